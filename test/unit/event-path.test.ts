/**
 * Eight orderings that the event path alone must get right, without the repair sweep: a record
 * delivered again, an older record beside a newer one, two invocations on one dataplane or one
 * mesh out of order, a lost response, a wake-up racing a release, a renumbered service's old
 * address, and a pass from a deleted mesh's earlier life. Each replays one exact interleaving
 * on the in-memory ports (the Gate holds a chosen request) through the real batch step.
 */
import { describe, expect, it } from "vitest";
import { sweep } from "../../functions/allocator/sweep/sweep.ts";
import { VipPool } from "../../functions/domain/pool.ts";
import type { MeshSource } from "../../functions/store/ports.ts";
import { dataplane, meshItem, meshRecord } from "../fixtures/builders.ts";
import { Gate } from "../fixtures/in-memory-ports.ts";
import {
  createMesh,
  deleteMesh,
  deliver,
  indexWorld,
  put,
  remove,
  TABLES,
  xGoesRThenSThenT,
} from "./batch-world.ts";
import type { World } from "./reconcile-world.ts";

function violations(world: World): string[] {
  return world.violations();
}

function listed(world: World, mesh: string): string[] {
  const item = world.vipItems.peek(mesh);
  return [...Object.keys(item?.vips ?? {}), ...Object.keys(item?.unallocated ?? {})].sort();
}

describe("the event path without the sweep", () => {
  it("1. does not bring a deleted dataplane back when its older record is delivered again", async () => {
    // Arrange: A with web-1{web} and api-1{api}, drained; web-1 deleted, drained
    const world = indexWorld();
    const web = dataplane("A", "web-1", ["web"]);
    const insert = put(world, web);
    await deliver(world, [
      createMesh(world, "A"),
      insert,
      put(world, dataplane("A", "api-1", ["api"])),
    ]);
    await deliver(world, [remove(world, web)]);
    const version = world.vipItems.peek("A")?.version;

    // Act: web-1's INSERT record again (a redelivery after a failure, or bisect-on-error)
    await deliver(world, [insert]);

    // Assert
    expect(listed(world, "A")).toEqual(["api"]);
    expect(world.vipItems.peek("A")?.version).toBe(version);
    expect(violations(world)).toEqual([]);
  });

  it("1b. does not bring back what a dataplane stopped contributing when an older record comes again", async () => {
    // Arrange: x contributes s, then is changed to contribute nothing (a serviceless inbound)
    const world = indexWorld();
    const first = put(world, dataplane("A", "x", ["s"]));
    await deliver(world, [
      createMesh(world, "A"),
      first,
      put(world, dataplane("A", "k", ["keep"])),
    ]);
    await deliver(world, [put(world, dataplane("A", "x", []), dataplane("A", "x", ["s"]))]);

    // Act
    await deliver(world, [first]);

    // Assert
    expect(listed(world, "A")).toEqual(["keep"]);
    expect(violations(world)).toEqual([]);
  });

  it("2. keeps the newer record when an older record of the same dataplane is processed beside it", async () => {
    // Arrange: x goes r -> s -> t; only r's record was processed
    const gate = new Gate();
    const world = indexWorld({ pause: gate.pause });
    const { toS, toT } = await xGoesRThenSThenT(world);

    // Act: P1 gets [t] and is held after reading the index; P2 gets the older [s] and runs
    // to the end; then P1 goes on
    const held = gate.holdNext("index.writeEntries");
    const p1 = deliver(world, [toT]);
    await held.reached;
    await deliver(world, [toS]);
    held.release();
    await p1;

    // Assert
    expect(listed(world, "A")).toEqual(["t"]);
    expect(violations(world)).toEqual([]);
  });

  it("3. does not trust presence its own index update saw once another invocation changed it", async () => {
    // Arrange: d contributes x; d goes x -> users (I1) -> cache (I2)
    const gate = new Gate();
    const world = indexWorld({ pause: gate.pause });
    const x = dataplane("A", "d", ["x"]);
    const users = dataplane("A", "d", ["users"]);
    const cache = dataplane("A", "d", ["cache"]);
    await deliver(world, [createMesh(world, "A"), put(world, x)]);
    const toUsers = put(world, users, x);
    const toCache = put(world, cache, users);

    // Act: I1 updates the index and is held before its pass; I2 runs whole; I1's pass goes on
    const held = gate.holdNext("vips.get");
    const i1 = deliver(world, [toUsers]);
    await held.reached;
    await deliver(world, [toCache]);
    held.release();
    await i1;

    // Assert
    expect(listed(world, "A")).toEqual(["cache"]);
    expect(violations(world)).toEqual([]);
  });

  it("4. the sweep's index repair does not write table data older than an event processed meanwhile", async () => {
    // Arrange: A with keep and x{s1}; x changes to s2 and that record is lost
    const world = indexWorld();
    const s1 = dataplane("A", "x", ["s1"]);
    const s2 = dataplane("A", "x", ["s2"]);
    const s3 = dataplane("A", "x", ["s3"]);
    await deliver(world, [
      createMesh(world, "A"),
      put(world, dataplane("A", "k", ["keep"])),
      put(world, s1),
    ]);
    world.source.putDataplane(s2);

    // Act: the sweep runs; right after its read of x from the table, x changes to s3 and that
    // event is processed, then the sweep goes on with what it read
    let fired = false;
    const source: MeshSource = Object.create(world.source);
    source.dataplanes = async (keys) => {
      const read = await world.source.dataplanes(keys);
      if (!fired && keys.some((key) => key.name === "x")) {
        fired = true;
        await deliver(world, [put(world, s3, s2)]);
      }
      return read;
    };
    await sweep(
      { ...world.batchPorts(), index: world.index, source },
      { ...world.batchSettings() },
    );

    // Assert
    expect(fired).toBe(true);
    expect(listed(world, "A")).toEqual(["keep", "s3"]);
    expect(violations(world)).toEqual([]);
  });

  it("5. leaves the deleted mesh's services when the response to its item's delete is lost", async () => {
    // Arrange: M lists s1 and s2; s2 is also in N
    const world = indexWorld();
    await deliver(world, [
      createMesh(world, "M"),
      createMesh(world, "N"),
      put(world, dataplane("M", "dp", ["s1", "s2"])),
      put(world, dataplane("N", "dp", ["s2"])),
    ]);

    // Act: M is deleted; the delete lands but its response is lost (the SDK's retry then
    // finds the condition failed)
    world.vipItems.loseNextResponse("vips.delete");
    await deliver(world, [deleteMesh(world, "M")]);

    // Assert
    expect(world.vipItems.peek("M")).toBeUndefined();
    expect(world.claims.serviceClaim("s1")?.releasedAt).toBe(world.nowMs);
    expect([...(world.claims.serviceClaim("s2")?.meshes.keys() ?? [])]).toEqual(["N"]);
    expect(violations(world)).toEqual([]);
  });

  it("6. wakes a mesh that found the range full while another mesh was releasing an address", async () => {
    // Arrange: a full /30 with A{a1,a2,a3} and B{b1}; no quarantine
    const gate = new Gate();
    const world = indexWorld({ cidr: "10.0.0.0/30", quarantineSeconds: 0, pause: gate.pause });
    const a = dataplane("A", "dp", ["a1", "a2", "a3"]);
    const b = dataplane("B", "dp", ["b1"]);
    await deliver(world, [
      createMesh(world, "A"),
      createMesh(world, "B"),
      put(world, a),
      put(world, b),
    ]);
    const a3Leaves = put(world, dataplane("A", "dp", ["a1", "a2"]), a);
    const b2Joins = put(world, dataplane("B", "dp", ["b1", "b2"]), b);

    // Act: B finds the range full and is held before its item write; A releases a3 meanwhile
    const held = gate.holdNext("vips.put");
    const ib = deliver(world, [b2Joins]);
    await held.reached;
    await deliver(world, [a3Leaves]);
    held.release();
    await ib;

    // Assert
    expect(world.vipItems.peek("B")?.unallocated).toBeUndefined();
    expect(listed(world, "B")).toEqual(["b1", "b2"]);
    expect(violations(world)).toEqual([]);
  });

  it("7. never strands a renumbered service's old address when its new address is reclaimed", async () => {
    // Arrange: x gets 240.0.0.0 in a /30; the range moves to 240.0.0.4/31 and x moves to .4,
    // keeping its old address claim; z joins (.5)
    const world = indexWorld({ cidr: "240.0.0.0/30", quarantineSeconds: 0 });
    const onlyX = dataplane("A", "dp", ["x"]);
    await deliver(world, [createMesh(world, "A"), put(world, onlyX)]);
    world.pool = VipPool.parse("240.0.0.4/31");
    await deliver(world, [meshRecord(TABLES.meshes, "A", { newImage: meshItem("A") })]);
    expect(world.vips("A")).toEqual({ x: "240.0.0.4" });
    const xz = dataplane("A", "dp", ["x", "z"]);
    await deliver(world, [put(world, xz, onlyX)]);

    // Act: x leaves and y reclaims .4; then the range goes back to the /30 and w and v join
    const yz = dataplane("A", "dp", ["y", "z"]);
    await deliver(world, [put(world, yz, xz)]);
    expect(world.vips("A")?.y).toBe("240.0.0.4");
    world.pool = VipPool.parse("240.0.0.0/30");
    await deliver(world, [put(world, dataplane("A", "dp", ["v", "w", "y", "z"]), yz)]);

    // Assert: four services, four addresses, none held by nobody
    expect(world.vipItems.peek("A")?.unallocated).toBeUndefined();
    expect(listed(world, "A")).toEqual(["v", "w", "y", "z"]);
    const owners = new Set(world.claims.serviceClaims().map((claim) => claim.service));
    const stranded = world.claims
      .addressClaims()
      .filter((address) => !owners.has(address.owner) && address.releasedAt === undefined);
    expect(stranded).toEqual([]);
    expect(violations(world)).toEqual([]);
  });

  it("8. a pass from a deleted mesh's earlier life cannot overwrite the new life's item", async () => {
    // Arrange: M lists a (first incarnation, v1); b joins and a pass of M is held before its
    // item write
    const gate = new Gate();
    const world = indexWorld({ pause: gate.pause });
    const onlyA = dataplane("M", "dp", ["a"]);
    await deliver(world, [createMesh(world, "M"), put(world, onlyA)]);
    const first = world.vipItems.peek("M")?.incarnation;
    const ab = dataplane("M", "dp", ["a", "b"]);
    const held = gate.holdNext("vips.put");
    const old = deliver(world, [put(world, ab, onlyA)]);
    await held.reached;

    // Act: M is deleted and created again (a new incarnation at v1), then the old pass goes on
    await deliver(world, [deleteMesh(world, "M")]);
    await deliver(world, [createMesh(world, "M")]);
    const second = world.vipItems.peek("M")?.incarnation;
    held.release();
    await old;

    // Assert: the item is the new life's, and every listed service is a member of it
    const item = world.vipItems.peek("M");
    expect(second).not.toBe(first);
    expect(item?.incarnation).toBe(second);
    for (const service of Object.keys(item?.vips ?? {})) {
      expect(world.claims.serviceClaim(service)?.meshes.get("M")?.incarnation).toBe(second);
    }
    expect(violations(world)).toEqual([]);
  });

  it("9. finishes a release that failed after its leave, when the records are delivered again", async () => {
    // Arrange: A lists web and api; the release of web fails once (throttled) after web's
    // membership was removed
    let throttle = false;
    const world = indexWorld({
      pause: async (operation) => {
        await Promise.resolve();
        if (throttle && operation === "claims.release") {
          throttle = false;
          throw new Error("ThrottlingException: Rate of requests exceeds the allowed throughput");
        }
      },
    });
    const both = dataplane("A", "dp", ["web", "api"]);
    await deliver(world, [createMesh(world, "A"), put(world, both)]);
    const onlyApi = dataplane("A", "dp", ["api"]);
    const change = put(world, onlyApi, both);
    throttle = true;
    const failed = await deliver(world, [change]);

    // Act: the failed record is delivered again
    await deliver(world, [change]);

    // Assert: web is released (its quarantine started), with no sweep
    expect(failed.batchItemFailures).toHaveLength(1);
    expect(listed(world, "A")).toEqual(["api"]);
    expect(world.claims.serviceClaim("web")?.meshes.size).toBe(0);
    expect(world.claims.serviceClaim("web")?.releasedAt).toBeDefined();
    expect(violations(world)).toEqual([]);
  });
});
