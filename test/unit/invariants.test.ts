/**
 * The invariant oracle (test/fixtures/invariants.ts) itself: a clean snapshot passes, and each
 * invariant flags the state that breaks it, so a suite checking through the oracle can fail.
 */
import { describe, expect, it } from "vitest";
import { VipPool } from "../../functions/domain/pool.ts";
import type { VipItem } from "../../functions/domain/types.ts";
import {
  type ClaimsView,
  globallyUnique,
  hostsApart,
  invariantViolations,
  leakViolations,
  ReuseHistory,
  Stability,
  versionChanges,
} from "../fixtures/invariants.ts";

const pool = VipPool.parse("10.0.0.0/30");
const clock = { nowMs: 10_000_000, quarantineSeconds: 60 };

function item(mesh: string, vips: Record<string, string>, extra: Partial<VipItem> = {}): VipItem {
  return {
    mesh,
    version: 1,
    vips,
    cidr: pool.cidr,
    updatedAt: "2026-01-01T00:00:00.000Z",
    incarnation: `i-${mesh}`,
    ...extra,
  };
}

const member = (mesh: string) => [mesh, { incarnation: `i-${mesh}` }] as const;

/** a and b list s1 (10.0.0.0); b lists s2 (10.0.0.1); every claim backs them. */
function clean(): { items: VipItem[]; claims: ClaimsView } {
  return {
    items: [item("a", { s1: "10.0.0.0" }), item("b", { s1: "10.0.0.0", s2: "10.0.0.1" })],
    claims: {
      services: [
        {
          service: "s1",
          vip: "10.0.0.0",
          meshes: new Map([member("a"), member("b")]),
          releasedAt: undefined,
        },
        { service: "s2", vip: "10.0.0.1", meshes: new Map([member("b")]), releasedAt: undefined },
      ],
      addresses: [
        { vip: "10.0.0.0", owner: "s1", releasedAt: undefined },
        { vip: "10.0.0.1", owner: "s2", releasedAt: undefined },
      ],
    },
  };
}

const expected = new Map([
  ["a", ["s1"]],
  ["b", ["s1", "s2"]],
]);
const meshes = new Set(["a", "b"]);

function check(items: readonly VipItem[], claims: ClaimsView = clean().claims): string[] {
  return invariantViolations({ items, meshes, pool, expected, claims, clock });
}

describe("the invariant oracle", () => {
  it("finds nothing wrong in a clean snapshot", () => {
    const { items, claims } = clean();
    expect(check(items, claims)).toEqual([]);
    expect(leakViolations(items, claims.services)).toEqual([]);
  });

  it("flags each invariant of a snapshot", () => {
    const [a, b] = clean().items as [VipItem, VipItem];
    const first = (items: VipItem[], claims?: ClaimsView) => check(items, claims)[0]?.slice(0, 2);
    expect(first([a])).toBe("1:");
    expect(first([a, b, item("c", {})])).toBe("1:");
    expect(first([a, { ...b, unallocated: { s2: "range exhausted" } }])).toBe("1:");
    expect(
      invariantViolations({ items: [a, b, item("c", {})], meshes, pool })[0]?.slice(0, 2),
    ).toBe("2:");
    expect(first([a, { ...b, vips: { s1: "10.0.0.0", s2: "10.0.0.0" } }])).toBe("3:");
    expect(check([a, { ...b, vips: { s1: "10.0.0.2", s2: "10.0.0.1" } }])).toContain(
      "4: s1 has 10.0.0.0 and 10.0.0.2",
    );
    expect(check([{ ...a, vips: { s1: "10.0.0.1" } }, b])).toContain(
      "5: 10.0.0.1 held by s1 and s2",
    );
    expect(first([a, { ...b, cidr: "10.0.1.0/30" }])).toBe("6:");
    expect(check([a, { ...b, vips: { s1: "10.0.0.0", s2: "10.0.1.1" } }])).toContain(
      "6: b/s2 10.0.1.1 outside 10.0.0.0/30",
    );
  });

  it("flags a host entry that is no host name, and a host unique only by spelling", () => {
    const items = [item("h", { "host/api.example.com": "10.0.0.1", api: "10.0.0.2" })];
    expect(hostsApart(items)).toEqual([]);
    expect(hostsApart([item("h", { "host/10.0.0.9": "10.0.0.1" })])).toEqual([
      'hosts: h lists "host/10.0.0.9", not a host name',
    ]);
    expect(hostsApart([item("h", { "host/API.example.com": "10.0.0.1" })])[0]).toMatch(
      /not a host name/,
    );
    // A host and a service of the same spelling are two entries: one VIP each (5).
    expect(globallyUnique([item("h", { "host/api": "10.0.0.1", api: "10.0.0.1" })])).toHaveLength(
      1,
    );
  });

  it("flags a listed VIP its claims do not back", () => {
    const { items, claims } = clean();
    const released = {
      ...claims,
      services: claims.services.map((c) => (c.service === "s2" ? { ...c, releasedAt: 1 } : c)),
    };
    expect(check(items, released)).toEqual(["claims: s2 10.0.0.1 listed in b but released"]);
    const notOwned = {
      ...claims,
      addresses: claims.addresses.map((c) => (c.vip === "10.0.0.1" ? { ...c, owner: "x" } : c)),
    };
    expect(check(items, notOwned)).toEqual([
      "claims: s2 10.0.0.1 listed in b but the address is owned by x",
    ]);
  });

  it("10: flags a service left unallocated while an address is free", () => {
    const { items, claims } = clean();
    const waiting = [
      items[0] as VipItem,
      { ...(items[1] as VipItem), unallocated: { s3: "full" } },
    ];
    const sets = new Map([...expected, ["b", ["s1", "s2", "s3"]]]);
    const run = (c: ClaimsView) =>
      invariantViolations({ items: waiting, meshes, pool, expected: sets, claims: c, clock });
    // Two of the four addresses are free.
    expect(run(claims)).toEqual(["10: b/s3 unallocated while 2 addresses are free"]);
    // Held: two by services in quarantine, one of them a former address.
    const quarantined = clock.nowMs - 1_000;
    const full: ClaimsView = {
      services: [
        ...claims.services,
        { service: "q", vip: "10.0.0.2", meshes: new Map(), releasedAt: quarantined },
      ],
      addresses: [
        ...claims.addresses,
        { vip: "10.0.0.2", owner: "q", releasedAt: quarantined },
        { vip: "10.0.0.3", owner: "s1", releasedAt: undefined },
      ],
    };
    expect(run(full)).toEqual([]);
    // An address whose owner's quarantine is over, or whose owner has no claim, is free.
    const over = clock.nowMs - 61_000;
    const expired = {
      ...full,
      services: full.services.map((c) => (c.service === "q" ? { ...c, releasedAt: over } : c)),
    };
    expect(run(expired)).toEqual(["10: b/s3 unallocated while 1 addresses are free"]);
    const orphaned = { ...full, services: full.services.filter((c) => c.service !== "q") };
    expect(run(orphaned)).toEqual(["10: b/s3 unallocated while 1 addresses are free"]);
  });

  it("11: flags a membership no item asserts, and a claim nobody holds", () => {
    const { items, claims } = clean();
    const [s1, s2] = claims.services as [ClaimsView["services"][0], ClaimsView["services"][0]];
    expect(
      leakViolations(items, [{ ...s1, meshes: new Map([...s1.meshes, member("c")]) }, s2]),
    ).toEqual(["11: s1 is still a member of c"]);
    expect(
      leakViolations(items, [s1, { ...s2, meshes: new Map([["b", { incarnation: "old" }]]) }]),
    ).toEqual(["11: s2 in b is held by another incarnation"]);
    expect(leakViolations(items, [s1, s2, { ...s2, service: "x", meshes: new Map() }])).toEqual([
      "11: x is held by nobody and not released",
    ]);
  });

  it("7, 8, 9: flag a moved VIP, an early reuse and a version a redelivery moved", () => {
    const { items } = clean();
    const stability = new Stability(expected);
    expect(stability.check(items)).toEqual([]);
    const moved = [
      items[0] as VipItem,
      { ...(items[1] as VipItem), vips: { s1: "10.0.0.0", s2: "10.0.0.3" } },
    ];
    expect(stability.check(moved)).toEqual(["7: s2 in b moved from 10.0.0.1 to 10.0.0.3"]);

    const reuse = new ReuseHistory(60_000);
    expect(reuse.observe(items, 0)).toEqual([]);
    const passed = [item("a", { s1: "10.0.0.0" }), item("b", { s1: "10.0.0.0", s3: "10.0.0.1" })];
    expect(reuse.observe(passed, 1_000)).toEqual([
      "8: 10.0.0.1 passed from s2 to s3 within the quarantine",
    ]);

    expect(versionChanges(items, items, "redelivery")).toEqual([]);
    expect(versionChanges(items, [items[0] as VipItem], "redelivery")).toEqual([
      "9 (redelivery): b's item removed",
    ]);
  });
});
