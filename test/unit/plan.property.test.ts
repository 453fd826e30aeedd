import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { buildContent, planMesh, sameContent } from "../../functions/domain/plan.ts";
import { VipPool } from "../../functions/domain/pool.ts";
import { compareServices } from "../../functions/domain/service-set.ts";
import type { VipItem } from "../../functions/domain/types.ts";

const pool = VipPool.parse("240.0.0.0/28");
const names = ["api", "backend", "cache", "db", "frontend", "metrics", "queue", "web", "Zed", "_x"];

/** A VIP inside the range, just outside it, in another range or of the other family. */
const vipArb = fc.oneof(
  fc.integer({ min: 0, max: 15 }).map((i) => pool.addressAt(BigInt(i))),
  fc.integer({ min: 16, max: 255 }).map((i) => `240.0.0.${i}`),
  fc.integer({ min: 0, max: 255 }).map((i) => `10.0.0.${i}`),
  fc.integer({ min: 0, max: 255 }).map((i) => `fd00::${i.toString(16)}`),
);

const currentArb: fc.Arbitrary<VipItem | undefined> = fc.option(
  fc.dictionary(fc.constantFrom(...names), vipArb, { maxKeys: names.length }).map((vips) => ({
    mesh: "m",
    version: 1,
    vips,
    cidr: pool.cidr,
    updatedAt: "2026-01-01T00:00:00.000Z",
    incarnation: "i",
  })),
  { nil: undefined },
);

const servicesArb = fc.array(fc.constantFrom(...names), { maxLength: 15 });

describe("planMesh properties", () => {
  it("splits the service set into kept and needed, disjoint and complete", () => {
    fc.assert(
      fc.property(currentArb, servicesArb, (current, services) => {
        // Act
        const plan = planMesh(current, services, pool);

        // Assert
        const kept = [...plan.keep.keys()];
        expect(new Set([...kept, ...plan.needed])).toEqual(new Set(services));
        expect(kept.filter((s) => plan.needed.includes(s))).toEqual([]);
        expect(new Set(plan.needed).size).toBe(plan.needed.length);
      }),
      { numRuns: 300 },
    );
  });

  it("keeps only the VIP the current item had, and only when it is in range", () => {
    fc.assert(
      fc.property(currentArb, servicesArb, (current, services) => {
        // Act
        const plan = planMesh(current, services, pool);

        // Assert
        for (const [service, vip] of plan.keep) {
          expect(current?.vips[service]).toBeDefined();
          expect(pool.canonical(current?.vips[service] as string)).toBe(vip);
          expect(pool.contains(vip)).toBe(true);
        }
        for (const service of plan.needed) {
          const held = current?.vips[service];
          expect(held === undefined || !pool.contains(held)).toBe(true);
          expect(plan.outOfRange.get(service)).toBe(held);
        }
      }),
      { numRuns: 300 },
    );
  });

  it("lists as removed exactly the held services that left the set", () => {
    fc.assert(
      fc.property(currentArb, servicesArb, (current, services) => {
        // Act
        const plan = planMesh(current, services, pool);

        // Assert
        const set = new Set(services);
        for (const service of plan.removed.keys()) expect(set.has(service)).toBe(false);
        const expected = Object.keys(current?.vips ?? {}).filter((s) => !set.has(s));
        expect(new Set(plan.removed.keys())).toEqual(new Set(expected));
        for (const [service, vip] of plan.removed) expect(current?.vips[service]).toBe(vip);
      }),
      { numRuns: 300 },
    );
  });

  it("gives needed in sorted order", () => {
    fc.assert(
      fc.property(currentArb, servicesArb, (current, services) => {
        // Act
        const plan = planMesh(current, services, pool);

        // Assert
        expect(plan.needed).toEqual([...plan.needed].sort(compareServices));
      }),
      { numRuns: 300 },
    );
  });
});

describe("sameContent properties", () => {
  const contentArb = fc.record({
    vips: fc.dictionary(fc.constantFrom(...names), vipArb, { maxKeys: names.length }),
    unallocated: fc.dictionary(fc.constantFrom(...names), fc.constantFrom("full", "other"), {
      maxKeys: 3,
    }),
    cidr: fc.constantFrom("240.0.0.0/28", "240.0.0.0/27"),
  });

  function stored(content: {
    vips: Record<string, string>;
    unallocated: Record<string, string>;
    cidr: string;
  }): VipItem {
    return {
      mesh: "m",
      version: 7,
      vips: content.vips,
      cidr: content.cidr,
      updatedAt: "t",
      incarnation: "i",
      ...(Object.keys(content.unallocated).length > 0 ? { unallocated: content.unallocated } : {}),
    };
  }

  it("is true for the same content rebuilt in any order", () => {
    fc.assert(
      fc.property(contentArb, (content) => {
        // Act
        const rebuilt = buildContent(
          Object.entries(content.vips).reverse(),
          Object.entries(content.unallocated).reverse(),
          content.cidr,
        );

        // Assert
        expect(sameContent(stored(content), rebuilt)).toBe(true);
      }),
    );
  });

  it("agrees with deep equality of the content", () => {
    fc.assert(
      fc.property(contentArb, contentArb, (a, b) => {
        // Act
        const same = sameContent(
          stored(a),
          buildContent(Object.entries(b.vips), Object.entries(b.unallocated), b.cidr),
        );

        // Assert
        const equal =
          a.cidr === b.cidr &&
          JSON.stringify(Object.entries(a.vips).sort()) ===
            JSON.stringify(Object.entries(b.vips).sort()) &&
          JSON.stringify(Object.entries(a.unallocated).sort()) ===
            JSON.stringify(Object.entries(b.unallocated).sort());
        expect(same).toBe(equal);
      }),
      { numRuns: 500 },
    );
  });
});
