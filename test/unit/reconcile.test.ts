import { describe, expect, it } from "vitest";
import { METRIC } from "../../functions/allocator/telemetry-names.ts";
import { RetriesExhaustedError } from "../../functions/domain/errors.ts";
import { VipPool } from "../../functions/domain/pool.ts";
import type { VipItemStore } from "../../functions/store/ports.ts";
import { dataplane, ingress } from "../fixtures/builders.ts";
import { Gate } from "../fixtures/in-memory-ports.ts";
import { meshWith, START_MS, World } from "./reconcile-world.ts";

describe("reconcileMesh on a fresh state", () => {
  it("allocates the sorted services from the lowest address of the range", async () => {
    // Arrange
    const world = new World({ cidr: "240.0.0.0/27" });
    meshWith(world, "m", ["c", "a", "b"]);

    // Act
    const outcome = await world.reconcile("m");

    // Assert
    expect(outcome.action).toBe("created");
    expect(outcome.version).toBe(1);
    const item = world.vipItems.peek("m");
    expect(item?.vips).toEqual({ a: "240.0.0.0", b: "240.0.0.1", c: "240.0.0.2" });
    expect(Object.keys(item?.vips ?? {})).toEqual(["a", "b", "c"]);
    expect(item?.cidr).toBe("240.0.0.0/27");
    expect(item?.version).toBe(1);
    expect(item?.unallocated).toBeUndefined();
    expect(item?.updatedAt).toBe(new Date(START_MS).toISOString());
  });

  it("gives a service shared by two meshes the same VIP in both", async () => {
    // Arrange
    const world = new World();
    meshWith(world, "m1", ["api", "web"]);
    meshWith(world, "m2", ["db", "web"]);

    // Act
    await world.reconcileAll(["m1", "m2"]);

    // Assert
    expect(world.vips("m1")).toEqual({ api: "240.0.0.0", web: "240.0.0.1" });
    expect(world.vips("m2")).toEqual({ db: "240.0.0.2", web: "240.0.0.1" });
  });

  it("counts an ingress stored under another mesh for the mesh it advertises for", async () => {
    // Arrange
    const world = new World();
    world.source.putMesh("a");
    world.source.putMesh("b");
    world.source.putDataplane(ingress("a", "ingress", [{ mesh: "b", service: "remote" }]));

    // Act
    await world.reconcileAll(["a", "b"]);

    // Assert
    expect(world.vips("a")).toEqual({});
    expect(world.vips("b")).toEqual({ remote: "240.0.0.0" });
  });

  it("writes an empty VIP map for an existing mesh without services", async () => {
    // Arrange
    const world = new World();
    world.source.putMesh("empty");

    // Act
    const outcome = await world.reconcile("empty");

    // Assert
    expect(outcome.action).toBe("created");
    expect(world.vipItems.peek("empty")).toMatchObject({ version: 1, vips: {} });
  });

  it("writes no item for a mesh that does not exist", async () => {
    // Arrange
    const world = new World();
    world.source.putDataplane(dataplane("ghost", "dp", ["web"]));

    // Act
    const outcome = await world.reconcile("ghost");

    // Assert
    expect(outcome.action).toBe("absent");
    expect(world.vipItems.peek("ghost")).toBeUndefined();
    expect(world.claims.serviceClaims()).toEqual([]);
  });
});

describe("reconcileMesh over time", () => {
  it("changes nothing when reconciled again, version and claims included", async () => {
    // Arrange
    const world = new World();
    meshWith(world, "m", ["a", "b"]);
    await world.reconcile("m");
    const before = world.vipItems.peek("m");
    const claimWrites = world.claims.requests.length;
    const itemWrites = world.vipItems.requests.filter((r) => r === "vips.put").length;

    // Act
    const outcome = await world.reconcile("m");

    // Assert
    expect(outcome.action).toBe("unchanged");
    expect(world.vipItems.peek("m")).toEqual(before);
    expect(world.vipItems.requests.filter((r) => r === "vips.put").length).toBe(itemWrites);
    const since = world.claims.requests.slice(claimWrites);
    expect(since.filter((r) => !r.startsWith("claims.get"))).toEqual([]);
  });

  it("keeps a service's VIP when another service leaves and a new one arrives", async () => {
    // Arrange
    const world = new World();
    meshWith(world, "m", ["a", "b", "c"]);
    await world.reconcile("m");
    world.source.putDataplane(dataplane("m", "dp-1", ["c", "d"]));

    // Act
    const outcome = await world.reconcile("m");

    // Assert
    expect(outcome).toMatchObject({
      action: "updated",
      version: 2,
      added: { d: "240.0.0.3" },
      removed: { a: "240.0.0.0", b: "240.0.0.1" },
    });
    expect(world.vips("m")).toEqual({ c: "240.0.0.2", d: "240.0.0.3" });
    expect(world.telemetry.total(METRIC.releases)).toBe(2);
  });

  it("gives a service that returns within the quarantine its old VIP", async () => {
    // Arrange
    const world = new World({ quarantineSeconds: 3600 });
    meshWith(world, "m", ["a", "b", "c"]);
    await world.reconcile("m");
    world.source.putDataplane(dataplane("m", "dp-1", ["a", "c"]));
    await world.reconcile("m");
    world.advance(3599);

    // Act
    world.source.putDataplane(dataplane("m", "dp-1", ["a", "b", "c"]));
    await world.reconcile("m");

    // Assert
    expect(world.vips("m")).toEqual({ a: "240.0.0.0", b: "240.0.0.1", c: "240.0.0.2" });
    expect(world.claims.serviceClaim("b")?.releasedAt).toBeUndefined();
    expect(world.claims.addressClaim("240.0.0.1")?.releasedAt).toBeUndefined();
  });

  it("gives a service that returns after the quarantine its old VIP while no one took it", async () => {
    // Arrange
    const world = new World({ quarantineSeconds: 60 });
    meshWith(world, "m", ["a", "b"]);
    await world.reconcile("m");
    world.source.putDataplane(dataplane("m", "dp-1", ["a"]));
    await world.reconcile("m");
    world.advance(3600);

    // Act
    world.source.putDataplane(dataplane("m", "dp-1", ["a", "b"]));
    await world.reconcile("m");

    // Assert
    expect(world.vips("m")).toEqual({ a: "240.0.0.0", b: "240.0.0.1" });
  });

  it("starts the quarantine of a service that left its last mesh, on both claims", async () => {
    // Arrange
    const world = new World();
    meshWith(world, "m", ["a", "b"]);
    await world.reconcile("m");
    world.advance(10);
    world.source.putDataplane(dataplane("m", "dp-1", ["a"]));

    // Act
    await world.reconcile("m");

    // Assert
    const released = START_MS + 10_000;
    expect(world.claims.serviceClaim("b")).toMatchObject({
      vip: "240.0.0.1",
      releasedAt: released,
    });
    expect(world.claims.serviceClaim("b")?.meshes.size).toBe(0);
    expect(world.claims.addressClaim("240.0.0.1")).toMatchObject({
      owner: "b",
      releasedAt: released,
    });
    expect(world.claims.serviceClaim("a")?.releasedAt).toBeUndefined();
  });

  it("does not release a service that another mesh still uses", async () => {
    // Arrange
    const world = new World();
    meshWith(world, "m1", ["shared"]);
    meshWith(world, "m2", ["shared"]);
    await world.reconcileAll(["m1", "m2"]);
    world.source.deleteDataplane("m1", "dp-1");

    // Act
    await world.reconcile("m1");

    // Assert
    expect(world.vips("m1")).toEqual({});
    const claim = world.claims.serviceClaim("shared");
    expect(claim?.releasedAt).toBeUndefined();
    expect([...(claim?.meshes.keys() ?? [])]).toEqual(["m2"]);
  });

  it("never hands a quarantined VIP to a different service", async () => {
    // Arrange: a /29 full of a..h, then a leaves and z arrives
    const world = new World({ cidr: "10.0.0.0/29", quarantineSeconds: 3600 });
    const eight = ["a", "b", "c", "d", "e", "f", "g", "h"];
    meshWith(world, "m", eight);
    await world.reconcile("m");
    world.source.putDataplane(dataplane("m", "dp-1", [...eight.slice(1), "z"]));

    // Act
    await world.reconcile("m");
    world.advance(3599);
    await world.reconcile("m");

    // Assert
    const item = world.vipItems.peek("m");
    expect(item?.vips.z).toBeUndefined();
    expect(Object.keys(item?.unallocated ?? {})).toEqual(["z"]);
    expect(Object.values(item?.vips ?? {})).not.toContain("10.0.0.0");
  });

  it("hands a freed address to a new service once the quarantine is over", async () => {
    // Arrange
    const world = new World({ cidr: "10.0.0.0/29", quarantineSeconds: 3600 });
    const eight = ["a", "b", "c", "d", "e", "f", "g", "h"];
    meshWith(world, "m", eight);
    await world.reconcile("m");
    world.source.putDataplane(dataplane("m", "dp-1", [...eight.slice(1), "z"]));
    await world.reconcile("m");
    world.advance(3600);

    // Act
    const outcome = await world.reconcile("m");

    // Assert
    expect(outcome.added).toEqual({ z: "10.0.0.0" });
    const item = world.vipItems.peek("m");
    expect(item?.vips.z).toBe("10.0.0.0");
    expect(item?.unallocated).toBeUndefined();
    expect(world.claims.serviceClaim("a")).toBeUndefined();
    expect(world.claims.addressClaim("10.0.0.0")).toMatchObject({
      owner: "z",
      releasedAt: undefined,
    });
    expect(world.telemetry.total(METRIC.reclaims)).toBe(1);
  });
});

describe("reconcileMesh when the range is exhausted", () => {
  it("allocates 8 VIPs in a /29 and lists 2 services as unallocated with a reason", async () => {
    // Arrange
    const world = new World({ cidr: "10.0.0.0/29" });
    const services = Array.from({ length: 10 }, (_, i) => `svc-${i}`);
    meshWith(world, "m", services);

    // Act
    const outcome = await world.reconcile("m");

    // Assert
    const item = world.vipItems.peek("m");
    expect(Object.keys(item?.vips ?? {})).toEqual(services.slice(0, 8));
    expect(new Set(Object.values(item?.vips ?? {})).size).toBe(8);
    expect(Object.keys(item?.unallocated ?? {})).toEqual(["svc-8", "svc-9"]);
    for (const reason of Object.values(item?.unallocated ?? {})) {
      expect(reason).toContain("10.0.0.0/29");
    }
    expect(outcome.unallocated).toEqual(["svc-8", "svc-9"]);
    expect(world.telemetry.total(METRIC.exhausted)).toBe(2);
    expect(world.telemetry.linesAt("error")[0]?.data).toMatchObject({ unallocatedCount: 2 });
  });

  it("leaves an exhausted mesh unchanged when nothing was freed", async () => {
    // Arrange
    const world = new World({ cidr: "10.0.0.0/30" });
    meshWith(world, "m", ["a", "b", "c", "d", "e"]);
    await world.reconcile("m");

    // Act
    const outcome = await world.reconcile("m");

    // Assert
    expect(outcome.action).toBe("unchanged");
    expect(world.vipItems.peek("m")?.version).toBe(1);
  });
});

describe("reconcileMesh after a VIP_CIDR change", () => {
  it("renumbers out-of-range VIPs and reports each renumbering", async () => {
    // Arrange
    const world = new World({ cidr: "240.0.0.0/27" });
    meshWith(world, "m1", ["a", "b", "c"]);
    meshWith(world, "m2", ["b"]);
    await world.reconcileAll(["m1", "m2"]);
    world.pool = VipPool.parse("240.0.0.16/28");

    // Act
    const first = await world.reconcile("m1");
    const second = await world.reconcile("m2");

    // Assert
    expect(first.action).toBe("updated");
    expect(world.vipItems.peek("m1")).toMatchObject({
      cidr: "240.0.0.16/28",
      vips: { a: "240.0.0.16", b: "240.0.0.17", c: "240.0.0.18" },
    });
    expect(second.added).toEqual({ b: "240.0.0.17" });
    expect(world.vips("m2")).toEqual({ b: "240.0.0.17" });
    expect(world.telemetry.total(METRIC.renumbered)).toBe(4);
    const warnings = world.telemetry.linesAt("warn");
    expect(warnings.map((line) => line.data)).toContainEqual(
      expect.objectContaining({
        mesh: "m1",
        kumaService: "a",
        from: "240.0.0.0",
        to: "240.0.0.16",
      }),
    );
    // The old address stays with its service: a mesh not yet renumbered may still list it.
    expect(world.claims.addressClaim("240.0.0.0")?.owner).toBe("a");
    expect(world.claims.serviceClaim("a")?.vip).toBe("240.0.0.16");
  });

  it("keeps VIPs that still lie inside the new range", async () => {
    // Arrange
    const world = new World({ cidr: "240.0.0.0/28" });
    const services = Array.from({ length: 10 }, (_, i) => `s${i}`);
    meshWith(world, "m", services);
    await world.reconcile("m");
    world.pool = VipPool.parse("240.0.0.8/29");

    // Act
    await world.reconcile("m");

    // Assert
    const vips = world.vips("m") ?? {};
    expect(vips.s8).toBe("240.0.0.8");
    expect(vips.s9).toBe("240.0.0.9");
    for (const vip of Object.values(vips)) expect(world.pool.contains(vip)).toBe(true);
    expect(new Set(Object.values(vips)).size).toBe(Object.keys(vips).length);
    expect(world.vipItems.peek("m")?.unallocated).toEqual({
      s6: expect.any(String),
      s7: expect.any(String),
    });
  });
});

describe("reconcileMesh when a mesh is deleted", () => {
  it("deletes the VIP item and releases services no other mesh uses", async () => {
    // Arrange
    const world = new World();
    meshWith(world, "m1", ["only-here", "shared"]);
    meshWith(world, "m2", ["shared"]);
    await world.reconcileAll(["m1", "m2"]);
    world.source.deleteMesh("m1");

    // Act
    const outcome = await world.reconcile("m1");

    // Assert
    expect(outcome.action).toBe("deleted");
    expect(world.vipItems.peek("m1")).toBeUndefined();
    expect(world.claims.serviceClaim("only-here")?.releasedAt).toBeDefined();
    expect(world.claims.serviceClaim("shared")?.releasedAt).toBeUndefined();
    expect(world.vips("m2")).toEqual({ shared: "240.0.0.1" });
  });

  it("gives a recreated mesh its services' old VIPs within the quarantine", async () => {
    // Arrange
    const world = new World();
    meshWith(world, "m", ["x", "y"]);
    await world.reconcile("m");
    world.source.deleteMesh("m");
    await world.reconcile("m");
    meshWith(world, "other", ["z"]);
    await world.reconcile("other");

    // Act
    world.source.putMesh("m");
    const outcome = await world.reconcile("m");

    // Assert
    expect(outcome.action).toBe("created");
    expect(world.vips("m")).toEqual({ x: "240.0.0.0", y: "240.0.0.1" });
    expect(world.vips("other")).toEqual({ z: "240.0.0.2" });
    expect(world.vipItems.peek("m")?.incarnation).not.toBe("");
  });
});

describe("reconcileMesh with bad input", () => {
  it("reports each skipped piece and allocates the rest", async () => {
    // Arrange
    const world = new World();
    world.source.putMesh("m");
    world.source.putDataplane(dataplane("m", "dp-1", ["good", { service: "bad name" }]));
    world.source.putDataplane({ mesh: "m", name: "dp-2", networking: "broken" });

    // Act
    await world.reconcile("m");

    // Assert
    expect(world.vips("m")).toEqual({ good: "240.0.0.0" });
    expect(world.telemetry.issues.map((issue) => [issue.key, issue.field])).toEqual([
      [{ mesh: "m", name: "dp-1" }, "networking.inbound[1].tags.kuma.io/service"],
      [{ mesh: "m", name: "dp-2" }, "networking"],
    ]);
  });

  it("never loses an existing VIP when a dataplane turns malformed and back", async () => {
    // Arrange
    const world = new World();
    meshWith(world, "m", ["a"], "dp-a");
    world.source.putDataplane(dataplane("m", "dp-b", ["b"]));
    await world.reconcile("m");
    world.source.putDataplane({ mesh: "m", name: "dp-a", networking: { inbound: "x" } });
    await world.reconcile("m");

    // Act
    world.source.putDataplane(dataplane("m", "dp-a", ["a"]));
    await world.reconcile("m");

    // Assert
    expect(world.vips("m")).toEqual({ a: "240.0.0.0", b: "240.0.0.1" });
  });

  it("reports items the source could not decode", async () => {
    // Arrange
    const world = new World();
    world.source.putMesh("m");
    const issue = {
      table: "dataplanes",
      key: { mesh: "m", name: "x" },
      field: "(item)",
      reason: "undecodable",
    };
    world.source.reportUndecodable(issue);

    // Act
    await world.reconcile("m");

    // Assert
    expect(world.telemetry.issues).toEqual([issue]);
  });
});

describe("reconcileMesh under contention", () => {
  it("retries after losing the optimistic lock, and the loser's work is not duplicated", async () => {
    // Arrange
    const world = new World();
    meshWith(world, "m", ["a", "b"]);

    // Act
    const outcomes = await Promise.all([world.reconcile("m"), world.reconcile("m")]);

    // Assert
    expect(outcomes.map((o) => o.action).sort()).toEqual(["created", "unchanged"]);
    expect(world.vipItems.peek("m")).toMatchObject({
      version: 1,
      vips: { a: "240.0.0.0", b: "240.0.0.1" },
    });
    expect(world.telemetry.total(METRIC.conflicts)).toBeGreaterThan(0);
    expect(world.claims.serviceClaims().map((c) => c.vip)).toEqual(["240.0.0.0", "240.0.0.1"]);
  });

  it("gives up after maxAttempts with jittered backoff between attempts", async () => {
    // Arrange
    const world = new World({ maxAttempts: 4 });
    meshWith(world, "m", ["a"]);
    const losing: VipItemStore = {
      get: (mesh) => world.vipItems.get(mesh),
      put: async () => ({ written: false, found: "unknown" }),
      delete: (mesh, expected) => world.vipItems.delete(mesh, expected),
      meshPage: (after, limit) => world.vipItems.meshPage(after, limit),
      itemPage: (after, limit) => world.vipItems.itemPage(after, limit),
    };

    // Act
    const attempt = world.reconcile("m", { vipItems: losing });

    // Assert
    await expect(attempt).rejects.toBeInstanceOf(RetriesExhaustedError);
    await expect(attempt).rejects.toMatchObject({ mesh: "m", attempts: 4 });
    expect(world.sleeps).toHaveLength(3);
    world.sleeps.forEach((ms, index) => {
      expect(ms).toBeGreaterThanOrEqual(0);
      expect(ms).toBeLessThan(Math.min(1000, 25 * 2 ** (index + 1)));
    });
    expect(world.vipItems.peek("m")).toBeUndefined();
  });

  it("rethrows an error that is not a lost race, without retrying", async () => {
    // Arrange
    const world = new World();
    meshWith(world, "m", ["a"]);
    const failing: VipItemStore = {
      get: async () => {
        throw new Error("throttled");
      },
      put: (item, expected) => world.vipItems.put(item, expected),
      delete: (mesh, expected) => world.vipItems.delete(mesh, expected),
      meshPage: (after, limit) => world.vipItems.meshPage(after, limit),
      itemPage: (after, limit) => world.vipItems.itemPage(after, limit),
    };

    // Act
    const attempt = world.reconcile("m", { vipItems: failing });

    // Assert
    await expect(attempt).rejects.toThrow("throttled");
    expect(world.sleeps).toEqual([]);
  });

  it("never gives two services one VIP when two meshes allocate at once", async () => {
    // Arrange
    const world = new World({ cidr: "10.0.0.0/28" });
    meshWith(world, "m1", ["a", "b", "c", "shared"]);
    meshWith(world, "m2", ["d", "e", "f", "shared"]);
    meshWith(world, "m3", ["g", "h", "shared"]);

    // Act
    await Promise.all([world.reconcile("m1"), world.reconcile("m2"), world.reconcile("m3")]);

    // Assert
    const owners = new Map<string, string>();
    for (const item of world.vipItems.all()) {
      for (const [service, vip] of Object.entries(item.vips)) {
        expect(owners.get(vip) ?? service).toBe(service);
        owners.set(vip, service);
      }
    }
    expect(owners.size).toBe(9);
    expect(world.vips("m1")?.shared).toBe(world.vips("m2")?.shared);
    expect(world.vips("m2")?.shared).toBe(world.vips("m3")?.shared);
  });
});

describe("reconcileMesh in exact interleavings", () => {
  it("does not release a service that a newer writer re-added before the old writer's leave", async () => {
    // Arrange: v1 lists a and s; s leaves, and the first writer is held just before its leave
    const gate = new Gate();
    const world = new World({ pause: gate.pause });
    meshWith(world, "m", ["a", "s"]);
    await world.reconcile("m");
    world.source.putDataplane(dataplane("m", "dp-1", ["a"]));
    const leave = gate.holdNext("claims.leave");
    const first = world.reconcile("m");
    await leave.reached;

    // Act: s comes back and another invocation runs to the end, then the held leave goes on
    world.source.putDataplane(dataplane("m", "dp-1", ["a", "s"]));
    const second = await world.reconcile("m");
    leave.release();
    await first;

    // Assert
    expect(second).toMatchObject({ action: "updated", version: 3, added: { s: "240.0.0.1" } });
    expect(world.vips("m")).toEqual({ a: "240.0.0.0", s: "240.0.0.1" });
    const claim = world.claims.serviceClaim("s");
    expect(claim?.releasedAt).toBeUndefined();
    expect(claim?.meshes.get("m")?.version).toBe(3);
  });

  it("does not reclaim an address whose owner came back and left again meanwhile", async () => {
    // Arrange: a full /30; d left long enough ago that its address is reclaimable
    const gate = new Gate();
    const world = new World({ cidr: "10.0.0.0/30", quarantineSeconds: 60, pause: gate.pause });
    meshWith(world, "m1", ["a", "b", "c", "d"]);
    await world.reconcile("m1");
    world.source.putDataplane(dataplane("m1", "dp-1", ["a", "b", "c"]));
    await world.reconcile("m1");
    world.advance(60);
    meshWith(world, "m2", ["e"]);
    const claimNew = gate.holdNext("claims.claimNew");
    const takeover = world.reconcile("m2");
    await claimNew.reached;

    // Act: d returns in m3 (its quarantine ends) and leaves again (a new one starts), then the
    // held takeover of d's address goes on
    meshWith(world, "m3", ["d"]);
    await world.reconcile("m3");
    world.source.deleteDataplane("m3", "dp-1");
    await world.reconcile("m3");
    claimNew.release();
    const outcome = await takeover;

    // Assert
    expect(outcome.unallocated).toEqual(["e"]);
    expect(world.claims.serviceClaim("d")).toMatchObject({
      vip: "10.0.0.3",
      releasedAt: world.nowMs,
    });
    expect(world.claims.addressClaim("10.0.0.3")?.owner).toBe("d");
  });

  it("keeps a newer membership when a stale writer's join lands after it", async () => {
    // Arrange: s lives in m2; m holds a; s joins m, leaves m and joins m again while a stale
    // writer's join (from before any of it) and the leaving writer's leave are both held
    const gate = new Gate();
    const world = new World({ pause: gate.pause });
    meshWith(world, "m2", ["s"]);
    meshWith(world, "m", ["a"]);
    await world.reconcileAll(["m2", "m"]);
    world.source.putDataplane(dataplane("m", "dp-1", ["a", "s"]));
    const staleJoin = gate.holdNext("claims.join");
    const stale = world.reconcile("m");
    await staleJoin.reached;
    await world.reconcile("m"); // v2 lists s
    world.source.putDataplane(dataplane("m", "dp-1", ["a"]));
    const leave = gate.holdNext("claims.leave");
    const leaving = world.reconcile("m"); // v3 without s, held before its leave
    await leave.reached;
    world.source.putDataplane(dataplane("m", "dp-1", ["a", "s"]));
    await world.reconcile("m"); // v4 lists s again

    // Act
    staleJoin.release();
    await stale;
    leave.release();
    await leaving;

    // Assert
    expect(world.vipItems.peek("m")).toMatchObject({
      version: 4,
      vips: { a: "240.0.0.1", s: "240.0.0.0" },
    });
    expect(world.claims.serviceClaim("s")?.meshes.get("m")?.version).toBe(4);
  });

  it("releases a service after a lost concurrent create, whichever writer asserted last", async () => {
    // Arrange: two first writes of a new mesh; w2 asserts s, then w1 overwrites it with its
    // own incarnation, then w2 wins the create and w1 loses
    const gate = new Gate();
    const world = new World({ pause: gate.pause });
    meshWith(world, "m", ["s"]);
    const w2Put = gate.holdNext("vips.put");
    const w2 = world.reconcile("m");
    await w2Put.reached;
    const w1Put = gate.holdNext("vips.put");
    const w1 = world.reconcile("m");
    await w1Put.reached;
    w2Put.release();
    const won = await w2;
    w1Put.release();
    const lost = await w1;

    // Act: s leaves the mesh
    world.source.deleteDataplane("m", "dp-1");
    await world.reconcile("m");

    // Assert
    expect(won.action).toBe("created");
    expect(lost.action).toBe("unchanged");
    expect(lost.attempts).toBe(2);
    expect(world.claims.serviceClaim("s")?.meshes.size).toBe(0);
    expect(world.claims.serviceClaim("s")?.releasedAt).toBe(world.nowMs);
  });
});
