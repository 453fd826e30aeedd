/**
 * The mesh pass is skipped when no service's presence changed (decision 073): what an event
 * that changes no service set reads, and the orderings the skip must get right (a crash
 * between the index update and the pass, two first instances of a new service at once).
 */
import { describe, expect, it } from "vitest";
import { VipPool } from "../../functions/domain/pool.ts";
import { type DataplaneItem, dataplane } from "../fixtures/builders.ts";
import { Gate } from "../fixtures/in-memory-ports.ts";
import { createMesh, deliver, indexWorld, put, remove } from "./batch-world.ts";
import type { World } from "./reconcile-world.ts";

function itemReads(world: World): number {
  return world.vipItems.requests.filter((operation) => operation === "vips.get").length;
}

function listed(world: World, mesh: string): string[] {
  return Object.keys(world.vipItems.peek(mesh)?.vips ?? {}).sort();
}

describe("the mesh pass skipped when no presence changed", () => {
  it("reads no VIP item for a tag change, a second instance, or one of two instances gone", async () => {
    // Arrange: A with web-1{web} and api-1{api}, drained
    const world = indexWorld();
    const web1 = dataplane("A", "web-1", ["web"]);
    await deliver(world, [
      createMesh(world, "A"),
      put(world, web1),
      put(world, dataplane("A", "api-1", ["api"])),
    ]);
    const reads = itemReads(world);
    const version = world.vipItems.peek("A")?.version;

    // Act: web-2 joins web (web-1 sorts first), web-1's tags change, web-2 goes
    const web2 = dataplane("A", "web-2", ["web"]);
    await deliver(world, [put(world, web2)]);
    const retagged = { ...web1, labels: { version: "2" } };
    await deliver(world, [put(world, retagged as DataplaneItem, web1)]);
    await deliver(world, [remove(world, web2)]);

    // Assert
    expect(itemReads(world)).toBe(reads);
    expect(world.vipItems.peek("A")?.version).toBe(version);
    expect(world.telemetry.total("PassesSkipped")).toBe(3);
    expect(world.violations()).toEqual([]);
  });

  it("passes a mesh whose service appeared or left", async () => {
    // Arrange
    const world = indexWorld();
    const web1 = dataplane("A", "web-1", ["web"]);
    await deliver(world, [createMesh(world, "A"), put(world, web1)]);

    // Act: db appears, then web's only instance goes
    await deliver(world, [put(world, dataplane("A", "db-1", ["db"]))]);
    expect(listed(world, "A")).toEqual(["db", "web"]);
    await deliver(world, [remove(world, web1)]);

    // Assert
    expect(listed(world, "A")).toEqual(["db"]);
    expect(world.telemetry.total("PassesSkipped")).toBe(0);
    expect(world.violations()).toEqual([]);
  });

  it("still passes when the first delivery died after the index records, before the pass", async () => {
    // Arrange: A with web; db's record is delivered and the invocation dies after the index
    // records are written
    const world = indexWorld();
    await deliver(world, [createMesh(world, "A"), put(world, dataplane("A", "web-1", ["web"]))]);
    const insert = put(world, dataplane("A", "db-1", ["db"]));
    let crashes = 1;
    world.index.crashAfterRecords = () => crashes-- > 0;
    const first = await deliver(world, [insert]);
    expect(first.batchItemFailures).toHaveLength(1);
    expect(listed(world, "A")).toEqual(["web"]);

    // Act: the record again; the index already lists db-1
    const again = await deliver(world, [insert]);

    // Assert: the pending pair brought it to the pass, and the pass cleared it
    expect(again.batchItemFailures).toEqual([]);
    expect(listed(world, "A")).toEqual(["db", "web"]);
    const record = (await world.index.getContributors([{ mesh: "A", name: "db-1" }])).get(
      JSON.stringify(["A", "db-1"]),
    );
    expect(record?.pending).toEqual([]);
    expect(world.violations()).toEqual([]);
  });

  it("passes once of two first instances of a new service delivered at once", async () => {
    // Arrange: A with web; db-2's invocation is held before its decision read
    const gate = new Gate();
    const world = indexWorld({ pause: gate.pause });
    await deliver(world, [createMesh(world, "A"), put(world, dataplane("A", "web-1", ["web"]))]);
    const held = gate.holdNext("index.firstContributors");
    const late = deliver(world, [put(world, dataplane("A", "db-1", ["db"]))]);
    await held.reached;
    const passes = world.passes.length;
    const skipped = world.telemetry.total("PassesSkipped");

    // Act: db-2 is delivered meanwhile, finds db-1 first and skips; then db-1 goes on, finds
    // itself first and passes
    await deliver(world, [put(world, dataplane("A", "db-2", ["db"]))]);
    expect(listed(world, "A")).toEqual(["web"]);
    held.release();
    await late;

    // Assert: of the two deliveries, one pass (db-1's, adding db) and one skip (db-2's)
    const ran = world.passes.slice(passes).map((pass) => [pass.mesh, Object.keys(pass.added)]);
    expect(ran).toEqual([["A", ["db"]]]);
    expect(world.telemetry.total("PassesSkipped") - skipped).toBe(1);
    expect(listed(world, "A")).toEqual(["db", "web"]);
    expect(world.violations()).toEqual([]);
  });

  it("still renumbers a mesh after a change of range, on a record that changes no presence", async () => {
    // Arrange: A with web-1{web}, drained under 240.0.0.0/27; then VIP_CIDR is 10.0.0.0/24
    const world = indexWorld();
    await deliver(world, [createMesh(world, "A"), put(world, dataplane("A", "web-1", ["web"]))]);
    expect(world.vipItems.peek("A")?.vips).toEqual({ web: "240.0.0.0" });
    world.pool = VipPool.parse("10.0.0.0/24");

    // Act: a second instance of web (no presence changes)
    await deliver(world, [put(world, dataplane("A", "web-2", ["web"]))]);

    // Assert: renumbered into the new range, and the next such record skips again
    expect(world.vipItems.peek("A")?.vips).toEqual({ web: "10.0.0.0" });
    const reads = itemReads(world);
    await deliver(world, [put(world, dataplane("A", "web-3", ["web"]))]);
    expect(itemReads(world)).toBe(reads);
    expect(world.violations()).toEqual([]);
  });

  it("still allocates to a waiting mesh once a quarantine is over, on a record that changes no presence", async () => {
    // Arrange: a /31 range (two addresses) and three services: c is unallocated; b leaves
    // (its address quarantined for 60 s)
    const world = indexWorld({ cidr: "240.0.0.0/31", quarantineSeconds: 60 });
    const abc = dataplane("A", "dp", ["a", "b", "c"]);
    await deliver(world, [createMesh(world, "A"), put(world, abc)]);
    expect(Object.keys(world.vipItems.peek("A")?.unallocated ?? {})).toEqual(["c"]);
    const ac = dataplane("A", "dp", ["a", "c"]);
    await deliver(world, [put(world, ac, abc)]);
    expect(Object.keys(world.vipItems.peek("A")?.unallocated ?? {})).toEqual(["c"]);
    world.advance(61);

    // Act: a second instance of a (no presence changes)
    await deliver(world, [put(world, dataplane("A", "dp-2", ["a"]))]);

    // Assert: c got the address b left
    expect(world.vipItems.peek("A")?.unallocated).toBeUndefined();
    expect(Object.keys(world.vipItems.peek("A")?.vips ?? {}).sort()).toEqual(["a", "c"]);
    expect(world.violations()).toEqual([]);
  });
});
