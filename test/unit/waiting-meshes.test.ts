import { describe, expect, it } from "vitest";
import { processBatch } from "../../functions/allocator/batch/process-batch.ts";
import { waitingEntries, waitingWrite } from "../../functions/store/state-items.ts";
import { resolveTableNames } from "../../functions/store/table-definitions.ts";
import { type DataplaneItem, dataplane, dataplaneRecord } from "../fixtures/builders.ts";
import { World } from "./reconcile-world.ts";

const TABLES = resolveTableNames({});

/** Changes the tables and runs the batch of their records through the real batch step. */
async function batch(
  world: World,
  changes: Array<{ put?: DataplaneItem; remove?: DataplaneItem }>,
) {
  const records = changes.map(({ put, remove }) => {
    if (put !== undefined) {
      world.source.putDataplane(put);
      return dataplaneRecord(TABLES.dataplanes, { newImage: put });
    }
    const old = remove as DataplaneItem;
    world.source.deleteDataplane(old.mesh, old.name);
    return dataplaneRecord(TABLES.dataplanes, { oldImage: old });
  });
  return await processBatch(
    { Records: records },
    {
      source: world.source,
      vipItems: world.vipItems,
      claims: world.claims,
      passState: world.passState,
      telemetry: world.telemetry,
    },
    { ...world.batchSettings(), tables: TABLES, concurrency: 4 },
  );
}

describe("meshes waiting for an address", () => {
  it("get one as soon as another mesh frees one, with no record of their own", async () => {
    // Arrange: a full /31 (a and b in mesh m1); x waits in meshes m2 and m3
    const world = new World({ cidr: "10.0.0.0/31", quarantineSeconds: 0 });
    for (const mesh of ["m1", "m2", "m3"]) world.source.putMesh(mesh);
    const ab = dataplane("m1", "dp", ["a", "b"]);
    await batch(world, [{ put: ab }]);
    await batch(world, [
      { put: dataplane("m2", "dp", ["x"]) },
      { put: dataplane("m3", "dp", ["x"]) },
    ]);
    expect(world.vipItems.peek("m2")?.unallocated).toHaveProperty("x");
    expect(await world.passState.getWaiting()).toEqual(["m2", "m3"]);

    // Act: b leaves m1; the batch holds only m1's record
    await batch(world, [{ put: dataplane("m1", "dp", ["a"]) }]);

    // Assert
    const m2 = world.vipItems.peek("m2");
    const m3 = world.vipItems.peek("m3");
    expect(m2?.unallocated).toBeUndefined();
    expect(m3?.unallocated).toBeUndefined();
    expect(m2?.vips.x).toBe("10.0.0.1");
    expect(m3?.vips.x).toBe("10.0.0.1");
    expect(await world.passState.getWaiting()).toEqual([]);
  });

  it("get one freed in the same invocation while the clock moves on (a real clock)", async () => {
    // Arrange: as above, with a clock that moves 1 ms at every request (the invocation's
    // address finder is created before the release, so its start time predates it)
    let world: World | undefined;
    world = new World({
      cidr: "10.0.0.0/31",
      quarantineSeconds: 0,
      pause: async () => {
        await Promise.resolve();
        if (world !== undefined) world.nowMs += 1;
      },
    });
    for (const mesh of ["m1", "m2"]) world.source.putMesh(mesh);
    await batch(world, [{ put: dataplane("m1", "dp", ["a", "b"]) }]);
    await batch(world, [{ put: dataplane("m2", "dp", ["x"]) }]);
    expect(world.vipItems.peek("m2")?.unallocated).toHaveProperty("x");

    // Act: b leaves m1
    await batch(world, [{ put: dataplane("m1", "dp", ["a"]) }]);

    // Assert: the woken pass of m2 took the address b left
    expect(world.vipItems.peek("m2")?.unallocated).toBeUndefined();
    expect(world.vipItems.peek("m2")?.vips.x).toBe("10.0.0.1");
  });

  it("reads the string set written before decision 111 as waiting, and any leave removes from it", () => {
    // Arrange: a waiting item with a legacy set entry and an entry naming its item
    const item = {
      pk: "waiting",
      kind: "waiting",
      meshes: new Set(["old", "__proto__"]),
      "w#new": { i: "i1", v: 2 },
    };

    // Act
    const entries = waitingEntries(item);
    const leaveOld = waitingWrite("old", {
      waiting: false,
      item: { incarnation: "i9", version: 1 },
    });
    const olderLeave = waitingWrite("new", {
      waiting: false,
      item: { incarnation: "i1", version: 1 },
    });
    const seenLeave = waitingWrite("new", {
      waiting: false,
      item: { incarnation: "i2", version: 1 },
      seen: "i1",
    });

    // Assert
    expect(entries).toEqual(
      new Map([
        ["old", undefined],
        ["__proto__", undefined],
        ["new", { incarnation: "i1", version: 2 }],
      ]),
    );
    expect(leaveOld.holds(item)).toBe(true);
    expect(waitingEntries(leaveOld.apply(structuredClone(item)))).toEqual(
      new Map([
        ["__proto__", undefined],
        ["new", { incarnation: "i1", version: 2 }],
      ]),
    );
    expect(olderLeave.holds(item)).toBe(false);
    expect(seenLeave.holds(item)).toBe(true);
  });
});
