import { describe, expect, it } from "vitest";
import { decidePasses } from "../../functions/allocator/batch/plan-passes.ts";
import { updateIndex } from "../../functions/allocator/membership-index/update.ts";
import { indexView } from "../../functions/allocator/pass/service-set-view.ts";
import { sweep } from "../../functions/allocator/sweep/sweep.ts";
import type { SweepOptions } from "../../functions/allocator/sweep/types.ts";
import { readImages } from "../../functions/domain/contributions.ts";
import { dataplane, ingress } from "../fixtures/builders.ts";
import type { Operation } from "../fixtures/in-memory-ports.ts";
import { World } from "./reconcile-world.ts";

/** A world whose requests can be made to fail from a chosen one on (a killed function). */
function crashableWorld(options: { cidr?: string; quarantineSeconds?: number } = {}) {
  const crash: { at?: Operation; after?: number } = {};
  let seen = 0;
  const world = new World({
    mode: "index",
    ...options,
    pause: async (operation) => {
      await Promise.resolve();
      if (crash.at === operation && ++seen > (crash.after ?? 0)) {
        throw new Error(`injected crash at ${operation}`);
      }
    },
  });
  return {
    world,
    crashAt(operation: Operation, after = 0) {
      crash.at = operation;
      crash.after = after;
      seen = 0;
    },
    heal() {
      crash.at = undefined;
    },
  };
}

function portsOf(world: World) {
  return {
    source: world.source,
    vipItems: world.vipItems,
    claims: world.claims,
    passState: world.passState,
    index: world.index,
    telemetry: world.telemetry,
  };
}

function run(world: World, options: SweepOptions = {}) {
  return sweep(portsOf(world), { ...world.batchSettings() }, options);
}

function violations(world: World): string[] {
  return world.violations();
}

function writes(world: World): number {
  const written = (op: string) =>
    !/get|read|scan|meshPage|itemPage|meshExists|dataplanes|present|servicesOf|entriesOf|ingresses/.test(
      op,
    );
  return (
    world.vipItems.requests.filter(written).length + world.claims.requests.filter(written).length
  );
}

function seed(world: World): void {
  world.source.putMesh("default");
  world.source.putMesh("payments");
  world.source.putDataplane(dataplane("default", "web-1", ["web", "api"]));
  world.source.putDataplane(dataplane("default", "db-1", ["db"]));
  world.source.putDataplane(dataplane("payments", "ledger-1", ["ledger", "web"]));
  world.source.putDataplane(
    ingress("default", "ingress", [{ mesh: "payments", service: "remote" }]),
  );
}

describe("the repair sweep", () => {
  it("gives meshes written before any stream their items and index, and a second cycle repairs nothing", async () => {
    // Arrange: tables with data and no stream history; no items, no index.
    const { world } = crashableWorld();
    seed(world);

    // Act
    const first = await run(world);
    const claimsAfter = world.claims.serviceClaims();
    const itemsAfter = world.vipItems.all();
    const indexAfter = world.index.snapshot();
    const writesBefore = writes(world);
    const second = await run(world);

    // Assert
    expect(first.finished).toBe(true);
    expect(first.repairs.filter((r) => r.kind === "item-missing").map((r) => r.mesh)).toEqual([
      "default",
      "payments",
    ]);
    expect(first.repairs.filter((r) => r.kind === "index-drift")).toHaveLength(4);
    expect(violations(world)).toEqual([]);
    expect(world.vips("payments")).toMatchObject({
      ledger: expect.any(String),
      remote: expect.any(String),
    });
    expect(second.finished).toBe(true);
    expect(second.repairs).toEqual([]);
    expect(writes(world)).toBe(writesBefore);
    expect(world.claims.serviceClaims()).toEqual(claimsAfter);
    expect(world.vipItems.all()).toEqual(itemsAfter);
    expect(world.index.snapshot()).toEqual(indexAfter);
    expect(world.telemetry.repairs).toHaveLength(first.repairs.length);
  });

  it("removes the membership a pass asserted before it died, moving the item's version past it first", async () => {
    // Arrange: a clean state; then a pass for a new service dies before its item write.
    const { world, crashAt, heal } = crashableWorld();
    seed(world);
    await run(world);
    await putDataplane(world, dataplane("default", "cart-1", ["cart"]), "1");
    const before = world.vipItems.peek("default");
    crashAt("vips.put");
    await expect(
      world.reconcile("default", { view: indexView(world.index, "all") }),
    ).rejects.toThrow(/injected crash/);
    heal();
    await deleteDataplane(world, "default", "cart-1", "2");
    expect(world.claims.serviceClaim("cart")?.meshes.get("default")?.version).toBe(
      (before?.version ?? 0) + 1,
    );

    // Act
    const result = await run(world);

    // Assert
    expect(result.repairs).toEqual([
      expect.objectContaining({ kind: "membership-leak", mesh: "default", service: "cart" }),
    ]);
    expect(world.vipItems.peek("default")?.version).toBe((before?.version ?? 0) + 1);
    expect(world.vipItems.peek("default")?.vips).toEqual(before?.vips);
    expect(world.claims.serviceClaim("cart")?.releasedAt).toBe(world.nowMs);
    expect(violations(world)).toEqual([]);
    expect((await run(world)).repairs).toEqual([]);
  });

  it("removes the item of a mesh that was deleted while its records were lost", async () => {
    // Arrange
    const { world } = crashableWorld();
    seed(world);
    await run(world);
    world.source.deleteMesh("payments");

    // Act
    const result = await run(world);

    // Assert
    expect(result.repairs.map((r) => [r.kind, r.mesh])).toEqual([
      ["item-of-deleted-mesh", "payments"],
    ]);
    expect(world.vipItems.peek("payments")).toBeUndefined();
    expect(world.claims.serviceClaim("ledger")?.releasedAt).toBeDefined();
    expect(world.claims.serviceClaim("web")?.meshes.has("payments")).toBe(false);
    expect(violations(world)).toEqual([]);
  });

  it("gives a waiting mesh the addresses a removed item freed, in the same sweep (chaos seed 5684)", async () => {
    // Arrange: a full /31 held by mesh gone's g1 and g2; mesh waits lists w as unallocated; no
    // quarantine; gone is deleted while its records are lost
    const { world } = crashableWorld({ cidr: "240.0.0.0/31", quarantineSeconds: 0 });
    world.source.putMesh("gone");
    world.source.putDataplane(dataplane("gone", "dp", ["g1", "g2"]));
    await run(world);
    world.source.putMesh("waits");
    world.source.putDataplane(dataplane("waits", "dp", ["w"]));
    await run(world);
    expect(Object.keys(world.vipItems.peek("waits")?.unallocated ?? {})).toEqual(["w"]);
    world.source.deleteMesh("gone");

    // Act: one sweep (the meshes phase passes waits before the items phase removes gone's item)
    await run(world);
    const second = await run(world);

    // Assert
    expect(world.vipItems.peek("waits")?.unallocated).toBeUndefined();
    expect(world.vipItems.peek("waits")?.vips.w).toBeDefined();
    expect(second.repairs).toEqual([]);
    expect(violations(world)).toEqual([]);
  });

  it("puts back a listed service's missing membership, releases a claim nobody holds, fixes index and counter", async () => {
    // Arrange: damage the way lost responses, crashes between requests and lost records can.
    const { world, crashAt, heal } = crashableWorld();
    seed(world);
    await run(world);
    const item = world.vipItems.peek("default");
    await world.claims.removeMembership({
      service: "db",
      mesh: "default",
      incarnation: item?.incarnation ?? "",
      upToVersion: item?.version ?? 0,
    });
    await putDataplane(world, dataplane("default", "web-1", ["web"]), "5");
    crashAt("claims.release");
    await expect(
      world.reconcile("default", { view: indexView(world.index, "all") }),
    ).rejects.toThrow(/injected crash/);
    heal();
    world.source.deleteDataplane("payments", "ledger-1");
    await world.claims.setCounter(world.pool.cidr, 5, 9);

    // Act
    const result = await run(world);

    // Assert
    // api's release, which crashed after its leave, is finished by the mesh's pass itself (the
    // item still records api as leaving), so the audit finds no unreleased claim.
    const kinds = result.repairs.map((r) => `${r.kind} ${r.mesh ?? "-"} ${r.service ?? "-"}`);
    expect(world.claims.serviceClaim("api")?.releasedAt).toBeDefined();
    expect(kinds.sort()).toEqual([
      "index-drift payments -",
      "item-services-removed payments ledger",
      "item-services-removed payments web",
      "membership-missing default db",
      "pool-counter - -",
    ]);
    expect(world.claims.cursor(world.pool.cidr)?.claimed).toBe(5);
    expect(violations(world)).toEqual([]);
    expect((await run(world)).repairs).toEqual([]);
  });

  it("reports with --dry-run what it would correct, and changes nothing", async () => {
    // Arrange
    const { world } = crashableWorld();
    seed(world);
    const requestsBefore = writes(world);

    // Act
    const result = await run(world, { dryRun: true });

    // Assert
    expect(result.repairs.filter((r) => r.kind === "item-missing")).toHaveLength(2);
    expect(result.repairs.filter((r) => r.kind === "index-drift")).toHaveLength(4);
    expect(writes(world)).toBe(requestsBefore);
    expect(world.vipItems.all()).toEqual([]);
    expect(world.index.snapshot()).toEqual([]);
    expect(world.telemetry.repairs).toEqual([]);
  });

  it("predicts with --dry-run a VIP its claim moved elsewhere, as the pass then renumbers it", async () => {
    // Arrange: shop lists web; web's claim then moves to another address of the range (a
    // renumbering shop's item was not written with).
    const { world } = crashableWorld({ cidr: "240.0.0.0/29" });
    world.source.putMesh("shop");
    world.source.putDataplane(dataplane("shop", "web-1", ["web"]));
    await run(world);
    const listed = world.vipItems.all()[0]?.vips.web as string;
    const to = listed === "240.0.0.5" ? "240.0.0.6" : "240.0.0.5";
    const claim = world.claims.serviceClaim("web");
    const membership = claim?.meshes.get("shop");
    await world.claims.claimAddress({
      service: "web",
      candidate: { vip: to, offset: BigInt(Number(to.split(".")[3])) },
      mesh: "shop",
      membership: membership ?? { incarnation: "-", version: 0 },
      nowMs: world.nowMs,
      reclaimCutoffMs: 0,
      moveFrom: listed,
    });

    // Act
    const dry = await run(world, { dryRun: true });
    const live = await run(world);

    // Assert
    const renumbered = (repairs: readonly { kind: string; service?: string; detail?: unknown }[]) =>
      repairs.filter((r) => r.kind === "item-renumbered" && r.service === "web");
    expect(renumbered(dry.repairs).map((r) => r.detail)).toEqual([{ from: listed, to }]);
    expect(renumbered(live.repairs)).toHaveLength(1);
    expect(world.vipItems.all()[0]?.vips.web).toBe(to);
  });

  it("stops at its deadline, stores its position, and the next invocation finishes the cycle", async () => {
    // Arrange: each request takes a second of the fake clock; the budget is 20 s past the margin.
    const { world } = crashableWorld();
    for (let i = 0; i < 12; i++) {
      world.source.putMesh(`m${i}`);
      world.source.putDataplane(dataplane(`m${i}`, "dp", [`svc-${i}`]));
    }
    const ticking = () => {
      world.advance(1);
      return world.nowMs;
    };
    const settings = { ...world.batchSettings(), now: ticking };
    const ports = portsOf(world);

    // Act
    const invocations = [];
    for (let i = 0; i < 20; i++) {
      const result = await sweep(ports, settings, {
        stored: true,
        pageSize: 5,
        deadline: world.nowMs + 25_000,
      });
      invocations.push(result);
      if (result.finished) break;
    }

    // Assert
    expect(invocations.length).toBeGreaterThan(2);
    expect(invocations.slice(0, -1).every((r) => r.stopped === "deadline")).toBe(true);
    expect(invocations.at(-1)?.finished).toBe(true);
    expect(new Set(invocations.map((r) => r.cycle)).size).toBe(1);
    expect(invocations.reduce((n, r) => n + r.meshes, 0)).toBe(12);
    const state = await world.claims.getSweepState();
    expect(state).toMatchObject({ phase: "done", meshes: 12 });
    expect(violations(world)).toEqual([]);
  });

  it("marks a backfill's corrections as expected (the alarm's metric leaves them out) for its whole cycle", async () => {
    // Arrange
    const { world } = crashableWorld();
    seed(world);
    const settings = { ...world.batchSettings() };
    let tick = 0;
    const slow = { ...settings, now: () => world.nowMs + 1_000 * tick++ };

    // Act: the backfill runs out of time; the next scheduled sweep finishes its cycle.
    const first = await sweep(portsOf(world), slow, {
      stored: true,
      backfill: true,
      pageSize: 1,
      deadline: world.nowMs + 12_000,
    });
    const rest = await sweep(portsOf(world), settings, { stored: true });
    world.source.deleteMesh("payments");
    const later = await sweep(portsOf(world), settings, { stored: true });

    // Assert
    expect(first.finished).toBe(false);
    expect(rest.cycle).toBe(first.cycle);
    expect(first.repairs.length + rest.repairs.length).toBeGreaterThan(0);
    const backfilled = world.telemetry.repairs.filter((r) => r.data.cycle === first.cycle);
    expect(backfilled.length).toBe(first.repairs.length + rest.repairs.length);
    expect(backfilled.every((r) => r.expected)).toBe(true);
    expect(later.repairs.map((r) => r.kind)).toEqual(["item-of-deleted-mesh"]);
    expect(world.telemetry.repairs.at(-1)?.expected).toBe(false);
    expect(world.telemetry.total("SweepRepairs")).toBe(1);
  });

  it("lets only one of two stored sweeps go on", async () => {
    // Arrange
    const { world } = crashableWorld();
    seed(world);
    const ports = portsOf(world);
    const settings = { ...world.batchSettings() };

    // Act
    const [a, b] = await Promise.all([
      sweep(ports, settings, { stored: true, pageSize: 1 }),
      sweep(ports, settings, { stored: true, pageSize: 1 }),
    ]);

    // Assert
    expect([a.stopped, b.stopped]).toContain("superseded");
    expect(violations(world)).toEqual([]);
  });
});

/** A dataplane written to the table, and its stream record applied to the index. */
async function putDataplane(world: World, item: ReturnType<typeof dataplane>, sequence: string) {
  world.source.putDataplane(item);
  await updateIndex(
    [{ ...readImages(item, undefined, item), sequence: sequence.padStart(40, "0") }],
    world.index,
    decidePasses,
  );
}

async function deleteDataplane(
  world: World,
  mesh: string,
  name: string,
  sequence: string,
  fromTable = true,
) {
  if (fromTable) world.source.deleteDataplane(mesh, name);
  await updateIndex(
    [{ ...readImages({ mesh, name }, undefined, undefined), sequence: sequence.padStart(40, "0") }],
    world.index,
    decidePasses,
  );
}
