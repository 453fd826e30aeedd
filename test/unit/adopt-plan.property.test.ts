import fc from "fast-check";
import { describe, expect, it } from "vitest";
import type { AdoptEntry } from "../../functions/domain/adopt-entries.ts";
import {
  type AdoptPlan,
  type AdoptState,
  adoptedName,
  alreadyAdopted,
  planAdoption,
} from "../../functions/domain/adopt-plan.ts";
import { VipPool } from "../../functions/domain/pool.ts";

const pool = VipPool.parse("240.0.0.0/28");
const services = ["web", "api", "__proto__", "constructor", "db"];
const meshes = ["a", "b", "c"];
/** Mostly in range (small, so VIPs collide), sometimes just outside. */
const vipArb = fc.oneof(
  { weight: 5, arbitrary: fc.integer({ min: 0, max: 7 }).map((i) => `240.0.0.${i}`) },
  { weight: 1, arbitrary: fc.integer({ min: 16, max: 18 }).map((i) => `240.0.0.${i}`) },
);
const entryArb: fc.Arbitrary<AdoptEntry> = fc
  .record({
    mesh: fc.constantFrom(...meshes),
    name: fc.constantFrom(...services),
    vip: vipArb,
    kind: fc.constantFrom("service", "service", "service", "host", "fqdn") as fc.Arbitrary<
      AdoptEntry["kind"]
    >,
  })
  .map((e) => ({ ...e, source: "f.json", key: `${e.mesh}.${e.name}` }));

/** A consistent state: each claimed service owns its address; some addresses owned by others. */
const stateArb: fc.Arbitrary<AdoptState> = fc
  .record({
    claimed: fc.uniqueArray(
      fc.record({ service: fc.constantFrom(...services), offset: fc.integer({ min: 0, max: 9 }) }),
      { selector: (c) => c.service, maxLength: 3 },
    ),
    strangers: fc.uniqueArray(fc.integer({ min: 0, max: 9 }), { maxLength: 2 }),
  })
  .map(({ claimed, strangers }) => {
    const svc = new Map<string, string>();
    const addr = new Map<string, string>();
    for (const { service, offset } of claimed) {
      const vip = pool.addressAt(BigInt(offset));
      if (addr.has(vip)) continue;
      svc.set(service, vip);
      addr.set(vip, service);
    }
    for (const offset of strangers) {
      const vip = pool.addressAt(BigInt(offset));
      if (!addr.has(vip)) addr.set(vip, "someone-else");
    }
    return { services: svc, addresses: addr };
  });

const optionsArb = fc.boolean().map((renumberOutside) => ({ pool, renumberOutside }));

function applied(state: AdoptState, plan: AdoptPlan): AdoptState {
  const svc = new Map(state.services);
  const addr = new Map(state.addresses);
  for (const [service, vip] of plan.claims) {
    svc.set(service, vip);
    addr.set(vip, service);
  }
  return { services: svc, addresses: addr };
}

describe("planAdoption properties", () => {
  it("never gives one VIP to two services, never writes over the allocator's claims", () => {
    fc.assert(
      fc.property(
        fc.array(entryArb, { maxLength: 20 }),
        stateArb,
        optionsArb,
        (entries, state, options) => {
          const plan = planAdoption(entries, state, options);
          const owners = new Map(state.addresses);
          for (const [service, vip] of plan.claims) {
            expect(state.services.has(service)).toBe(false);
            expect(owners.has(vip)).toBe(false);
            owners.set(vip, service);
            expect(pool.contains(vip)).toBe(true);
            expect(entries.some((e) => adoptedName(e) === service && e.vip === vip)).toBe(true);
          }
          // The VIP each decision gives: one name per VIP, one VIP per name (a host's name is
          // host/<host>, apart from a service of the same spelling).
          const byVip = new Map<string, string>();
          const byService = new Map<string, string>();
          for (const d of plan.decisions) {
            const name = adoptedName(d.entry);
            if (d.vip === undefined || name === undefined) continue;
            expect(byVip.get(d.vip) ?? name).toBe(name);
            expect(byService.get(name) ?? d.vip).toBe(d.vip);
            byVip.set(d.vip, name);
            byService.set(name, d.vip);
            const owner = state.addresses.get(d.vip);
            if (owner !== undefined) expect(owner).toBe(name);
          }
          for (const d of plan.decisions) {
            const name = adoptedName(d.entry);
            if (d.outcome === "adopt") expect(plan.claims.get(name as string)).toBe(d.vip);
            if (name === undefined) expect(d.outcome).toBe("skip");
          }
        },
      ),
      { numRuns: 500 },
    );
  });

  it("is stable: a second run over the state the first one wrote changes nothing", () => {
    fc.assert(
      fc.property(
        fc.array(entryArb, { maxLength: 20 }),
        stateArb,
        optionsArb,
        (entries, state, options) => {
          const first = planAdoption(entries, state, options);
          if (first.refused) return;
          const second = planAdoption(entries, applied(state, first), options);
          expect(second.claims.size).toBe(0);
          expect(second.refused).toBe(false);
          first.decisions.forEach((d, i) => {
            const again = second.decisions[i];
            if (d.vip !== undefined) expect(again?.vip).toBe(d.vip);
            if (d.outcome === "adopt" || d.outcome === "in-place") {
              expect(again?.outcome).toBe("in-place");
            }
          });
          const third = planAdoption(entries, applied(state, first), options);
          expect(third).toEqual(second);
        },
      ),
      { numRuns: 500 },
    );
  });

  it("does not depend on the order of the entries or of the files", () => {
    fc.assert(
      fc.property(
        fc
          .array(entryArb, { maxLength: 20 })
          .chain((entries) =>
            fc.tuple(
              fc.constant(entries),
              fc.shuffledSubarray(entries, { minLength: entries.length }),
            ),
          ),
        stateArb,
        optionsArb,
        ([entries, shuffled], state, options) => {
          const a = planAdoption(entries, state, options);
          const b = planAdoption(shuffled, state, options);
          expect([...b.claims]).toEqual([...a.claims]);
          expect(b.refused).toBe(a.refused);
        },
      ),
      { numRuns: 300 },
    );
  });

  it("refuses exactly when an unclaimed service has a VIP outside the range and no --renumber-outside", () => {
    fc.assert(
      fc.property(fc.array(entryArb, { maxLength: 20 }), stateArb, (entries, state) => {
        const plan = planAdoption(entries, state, { pool, renumberOutside: false });
        const outside = entries.some((e) => {
          const name = adoptedName(e);
          return name !== undefined && !pool.contains(e.vip) && !state.services.has(name);
        });
        expect(plan.refused).toBe(outside);
        expect(planAdoption(entries, state, { pool, renumberOutside: true }).refused).toBe(false);
      }),
      { numRuns: 300 },
    );
  });

  it("a state that already holds every entry is adopted already (dry run exits 0)", () => {
    fc.assert(
      fc.property(fc.array(entryArb, { maxLength: 20 }), (entries) => {
        const first = planAdoption(
          entries,
          { services: new Map(), addresses: new Map() },
          {
            pool,
            renumberOutside: true,
          },
        );
        const second = planAdoption(
          entries,
          applied({ services: new Map(), addresses: new Map() }, first),
          {
            pool,
            renumberOutside: true,
          },
        );
        const conflicts = first.decisions.some((d) => d.conflict !== undefined);
        expect(alreadyAdopted(second)).toBe(!conflicts);
      }),
      { numRuns: 300 },
    );
  });
});
