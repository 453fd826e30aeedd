import { describe, expect, it } from "vitest";
import {
  buildContent,
  exhaustedReason,
  planMesh,
  sameContent,
} from "../../functions/domain/plan.ts";
import { quarantineOver, VipPool } from "../../functions/domain/pool.ts";
import type { VipItem } from "../../functions/domain/types.ts";

const pool = VipPool.parse("240.0.0.0/27");

function item(vips: Record<string, string>, extra: Partial<VipItem> = {}): VipItem {
  return {
    mesh: "m",
    version: 3,
    vips,
    cidr: pool.cidr,
    updatedAt: "2026-01-01T00:00:00.000Z",
    incarnation: "inc-1",
    ...extra,
  };
}

describe("planMesh", () => {
  it("puts every service of a new mesh in needed, in sorted order", () => {
    // Act
    const plan = planMesh(undefined, ["web", "api", "db"], pool);

    // Assert
    expect(plan.needed).toEqual(["api", "db", "web"]);
    expect(plan.keep.size).toBe(0);
    expect(plan.outOfRange.size).toBe(0);
    expect(plan.removed.size).toBe(0);
  });

  it("keeps the in-range VIPs the mesh already holds", () => {
    // Arrange
    const current = item({ api: "240.0.0.3", web: "240.0.0.1" });

    // Act
    const plan = planMesh(current, ["api", "web"], pool);

    // Assert
    expect([...plan.keep]).toEqual([
      ["api", "240.0.0.3"],
      ["web", "240.0.0.1"],
    ]);
    expect(plan.needed).toEqual([]);
  });

  it("puts only new services in needed, sorted, beside the kept ones", () => {
    // Arrange
    const current = item({ web: "240.0.0.0" });

    // Act
    const plan = planMesh(current, ["zeta", "web", "alpha"], pool);

    // Assert
    expect([...plan.keep]).toEqual([["web", "240.0.0.0"]]);
    expect(plan.needed).toEqual(["alpha", "zeta"]);
  });

  it("sends VIPs outside the range (after a CIDR change) to needed and outOfRange", () => {
    // Arrange
    const current = item({ api: "10.0.0.1", web: "240.0.0.2", db: "fd00::1" });

    // Act
    const plan = planMesh(current, ["api", "db", "web"], pool);

    // Assert
    expect([...plan.keep]).toEqual([["web", "240.0.0.2"]]);
    expect(plan.needed).toEqual(["api", "db"]);
    expect(Object.fromEntries(plan.outOfRange)).toEqual({ api: "10.0.0.1", db: "fd00::1" });
  });

  it("lists the services that left, with the VIP they held", () => {
    // Arrange
    const current = item({ api: "240.0.0.0", gone: "240.0.0.1", old: "10.0.0.9" });

    // Act
    const plan = planMesh(current, ["api"], pool);

    // Assert
    expect(Object.fromEntries(plan.removed)).toEqual({ gone: "240.0.0.1", old: "10.0.0.9" });
    expect(plan.needed).toEqual([]);
  });

  it("keeps an IPv6 VIP in canonical form", () => {
    // Arrange
    const v6 = VipPool.parse("fd00::/120");
    const current = item({ web: "fd00:0:0:0:0:0:0:12" }, { cidr: v6.cidr });

    // Act
    const plan = planMesh(current, ["web"], v6);

    // Assert
    expect(plan.keep.get("web")).toBe("fd00::12");
  });

  it("does not keep a service listed only as unallocated", () => {
    // Arrange
    const current = item({}, { unallocated: { api: "range exhausted" } });

    // Act
    const plan = planMesh(current, ["api"], pool);

    // Assert
    expect(plan.needed).toEqual(["api"]);
    expect(plan.removed.size).toBe(0);
  });

  it("treats duplicated services once", () => {
    // Act
    const plan = planMesh(undefined, ["b", "a", "b"], pool);

    // Assert
    expect(plan.needed).toEqual(["a", "b"]);
  });
});

describe("buildContent", () => {
  it("sorts the VIP and unallocated maps by service", () => {
    // Act
    const content = buildContent(
      [
        ["web", "240.0.0.1"],
        ["api", "240.0.0.0"],
      ],
      [
        ["z", "full"],
        ["b", "full"],
      ],
      pool.cidr,
    );

    // Assert
    expect(Object.keys(content.vips)).toEqual(["api", "web"]);
    expect(Object.keys(content.unallocated)).toEqual(["b", "z"]);
    expect(content.cidr).toBe("240.0.0.0/27");
  });
});

describe("sameContent", () => {
  const content = buildContent(
    [
      ["api", "240.0.0.0"],
      ["web", "240.0.0.1"],
    ],
    [["db", "full"]],
    pool.cidr,
  );
  const stored = item({ api: "240.0.0.0", web: "240.0.0.1" }, { unallocated: { db: "full" } });

  it("is true for identical content, whatever the version, time and key order", () => {
    // Arrange
    const reordered = item(
      { web: "240.0.0.1", api: "240.0.0.0" },
      { unallocated: { db: "full" }, version: 99, updatedAt: "later" },
    );

    // Act
    const same = sameContent(reordered, content);

    // Assert
    expect(sameContent(stored, content)).toBe(true);
    expect(same).toBe(true);
  });

  it("is false when there is no current item", () => {
    expect(sameContent(undefined, buildContent([], [], pool.cidr))).toBe(false);
  });

  it.each([
    { why: "a VIP differs", next: item({ api: "240.0.0.0", web: "240.0.0.2" }) },
    { why: "a service is missing", next: item({ api: "240.0.0.0" }) },
    {
      why: "a service is extra",
      next: item({ api: "240.0.0.0", web: "240.0.0.1", x: "240.0.0.5" }),
    },
    {
      why: "a service is renamed",
      next: item({ api: "240.0.0.0", wib: "240.0.0.1" }),
    },
  ])("is false when $why", ({ next }) => {
    // Arrange
    const current = { ...next, unallocated: { db: "full" } };

    // Act
    const same = sameContent(current, content);

    // Assert
    expect(same).toBe(false);
  });

  it("is false when the cidr differs", () => {
    // Arrange
    const current = { ...stored, cidr: "240.0.0.0/28" };

    // Act
    const same = sameContent(current, content);

    // Assert
    expect(same).toBe(false);
  });

  it.each<{ why: string; unallocated: Record<string, string> | undefined }>([
    { why: "missing", unallocated: undefined },
    { why: "another reason", unallocated: { db: "other" } },
    { why: "another service", unallocated: { dc: "full" } },
    { why: "an extra entry", unallocated: { db: "full", x: "full" } },
  ])("is false when an unallocated entry is $why", ({ unallocated }) => {
    // Arrange
    const { unallocated: _drop, ...rest } = stored;
    const current: VipItem = unallocated === undefined ? rest : { ...rest, unallocated };

    // Act
    const same = sameContent(current, content);

    // Assert
    expect(same).toBe(false);
  });

  it("treats an absent unallocated map as empty", () => {
    // Arrange
    const current = item({ api: "240.0.0.0" });

    // Act
    const same = sameContent(current, buildContent([["api", "240.0.0.0"]], [], pool.cidr));

    // Assert
    expect(same).toBe(true);
  });
});

describe("quarantineOver", () => {
  it("is over exactly when the quarantine has elapsed", () => {
    // Arrange
    const releasedAt = 1_000_000;

    // Act
    const before = quarantineOver(releasedAt, releasedAt + 3_599_999, 3600);
    const at = quarantineOver(releasedAt, releasedAt + 3_600_000, 3600);

    // Assert
    expect(before).toBe(false);
    expect(at).toBe(true);
  });

  it("is over at once with a zero quarantine", () => {
    expect(quarantineOver(5, 5, 0)).toBe(true);
  });
});

describe("exhaustedReason", () => {
  it("names the range and its size", () => {
    // Act
    const reason = exhaustedReason(VipPool.parse("10.0.0.0/29"));

    // Assert
    expect(reason).toContain("10.0.0.0/29");
    expect(reason).toContain("8");
  });
});
