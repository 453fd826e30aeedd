/**
 * Five more orderings the event path alone must get right, without the repair sweep, all in
 * the state that decides whether a mesh's pass runs or what a pass finds: the index record's
 * pending pairs, the waiting list, the range a mesh was last passed under, and the memberships
 * a failed pass asserted. Each replays one exact interleaving (the Gate holds a chosen
 * request; a throttle outlasts the SDK's retries; an invocation dies) through the real batch
 * step on the in-memory ports.
 */
import type { DynamoDBRecord } from "aws-lambda";
import { describe, expect, it } from "vitest";
import { sweep } from "../../functions/allocator/sweep/sweep.ts";
import { VipPool } from "../../functions/domain/pool.ts";
import { dataplane, ingress, meshItem, meshRecord } from "../fixtures/builders.ts";
import { Gate, type Operation, type Pause, yieldOnce } from "../fixtures/in-memory-ports.ts";
import { invariantViolations, leakViolations } from "../fixtures/invariants.ts";
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

/** DynamoDB's answer once the SDK's own retries are spent. */
class Throttled extends Error {
  constructor(operation: string) {
    super(`Rate of requests exceeds the allowed throughput (${operation})`);
    this.name = "ProvisionedThroughputExceededException";
  }
}

/** A pause that throttles every request `when` names, while it says so. */
function throttling(when: (operation: Operation) => boolean, inner: Pause = yieldOnce): Pause {
  return async (operation) => {
    await inner(operation);
    if (when(operation)) throw new Throttled(operation);
  };
}

function listed(world: World, mesh: string): string[] {
  const item = world.vipItems.peek(mesh);
  return [...Object.keys(item?.vips ?? {}), ...Object.keys(item?.unallocated ?? {})].sort();
}

/** Every invariant the oracle checks on one snapshot, honest exhaustion (10) included. */
function allViolations(world: World): string[] {
  const meshes = new Set(world.source.meshNames());
  const items = world.vipItems.all();
  const claims = {
    services: world.claims.serviceClaims(),
    addresses: world.claims.addressClaims(),
  };
  return [
    ...invariantViolations({
      items,
      meshes,
      pool: world.pool,
      expected: new Map([...meshes].map((mesh) => [mesh, world.serviceSet(mesh)])),
      claims,
      clock: { nowMs: world.nowMs, quarantineSeconds: world.quarantineSeconds },
    }),
    ...leakViolations(items, claims.services),
  ];
}

/**
 * Pass A of M (the batch of `records`) gives c the address and writes M's item, and is held
 * before it takes M off the waiting list; meanwhile d joins M, finds the range full and puts M
 * on the list; then A goes on and its removal lands.
 */
async function dJoinsWhilePassAIsHeld(world: World, gate: Gate, records: DynamoDBRecord[]) {
  const held = gate.holdNext("claims.setWaiting");
  const a = deliver(world, records);
  await held.reached;
  expect(world.vipItems.peek("M")?.unallocated).toBeUndefined();
  await deliver(world, [put(world, dataplane("M", "dp-d", ["d"]))]);
  expect(Object.keys(world.vipItems.peek("M")?.unallocated ?? {})).toEqual(["d"]);
  held.release();
  await a;
}

describe("the event path without the sweep, round 2: the state kept beside the VIP item", () => {
  for (const [label, fails] of [
    ["is killed", "kill"],
    ["is throttled", "throttle"],
  ] as const) {
    it(`1. passes a mesh whose lowest contributor's delivery ${label} between its entries and its record, when the retry removes it again`, async () => {
      // Arrange: M lists web; the ingress (lowest dataplane id of M) starts advertising s for M
      let throttle = false;
      const world = indexWorld({
        pause: throttling((operation) => throttle && operation === "index.writeRecord"),
      });
      await deliver(world, [createMesh(world, "M"), put(world, dataplane("M", "web-1", ["web"]))]);
      const silent = ingress("M", "a-ingress", []);
      const advertising = ingress("M", "a-ingress", [{ mesh: "M", service: "s" }]);
      const starts = put(world, advertising);
      let crashes = 0;
      if (fails === "kill") {
        crashes = 1;
        world.index.crashBeforeRecords = () => crashes-- > 0;
      } else throttle = true;
      const first = await deliver(world, [starts]);
      throttle = false;
      expect(first.batchItemFailures).toHaveLength(1);

      // Act: another dataplane of M adds s (finds the ingress first and skips); the ingress
      // stops advertising s; the retried batch holds both of the ingress's records
      await deliver(world, [put(world, dataplane("M", "s-1", ["s"]))]);
      const stops = put(world, silent, advertising);
      await deliver(world, [starts, stops]);

      // Assert
      expect(allViolations(world)).toEqual([]);
      expect(listed(world, "M")).toEqual(["s", "web"]);
    });
  }

  it("2a. keeps a mesh on the waiting list when an older pass's removal lands after a newer pass's addition (no quarantine)", async () => {
    // Arrange: a full /30, M{a,b} and N{n1,n2}; no quarantine; c joins M and is unallocated
    const gate = new Gate();
    const world = indexWorld({ cidr: "240.0.0.0/30", quarantineSeconds: 0, pause: gate.pause });
    const ab = dataplane("M", "dp", ["a", "b"]);
    const n12 = dataplane("N", "dp", ["n1", "n2"]);
    await deliver(world, [createMesh(world, "M"), createMesh(world, "N"), put(world, ab)]);
    await deliver(world, [put(world, n12)]);
    await deliver(world, [put(world, dataplane("M", "dp-c", ["c"]))]);
    expect(Object.keys(world.vipItems.peek("M")?.unallocated ?? {})).toEqual(["c"]);

    // Act: n1 leaves N; the woken pass A of M gives c the address, writes M's item and is held
    // before it takes M off the waiting list; meanwhile d joins M, finds the range full and
    // puts M on the list; then A's removal lands; then n2 leaves N
    const n2 = dataplane("N", "dp", ["n2"]);
    await dJoinsWhilePassAIsHeld(world, gate, [put(world, n2, n12)]);
    await deliver(world, [put(world, dataplane("N", "dp", []), n2)]);

    // Assert: the address n2 left went to d
    expect(allViolations(world)).toEqual([]);
    expect(world.vipItems.peek("M")?.unallocated).toBeUndefined();
    expect(listed(world, "M")).toEqual(["a", "b", "c", "d"]);
  });

  it("2b. keeps a mesh on the waiting list when an older pass's removal lands after a newer pass's addition (with a quarantine)", async () => {
    // Arrange: a full /30, M{a,b} and N{n1,n2}, a 60 s quarantine; c joins M, unallocated; n1
    // leaves N and its quarantine runs out
    const gate = new Gate();
    const world = indexWorld({ cidr: "240.0.0.0/30", quarantineSeconds: 60, pause: gate.pause });
    const n12 = dataplane("N", "dp", ["n1", "n2"]);
    await deliver(world, [
      createMesh(world, "M"),
      createMesh(world, "N"),
      put(world, dataplane("M", "dp", ["a", "b"])),
    ]);
    await deliver(world, [put(world, n12)]);
    await deliver(world, [put(world, dataplane("M", "dp-c", ["c"]))]);
    const n2 = dataplane("N", "dp", ["n2"]);
    await deliver(world, [put(world, n2, n12)]);
    world.advance(61);

    // Act: a second instance of a (no presence change): the guard passes waiting M (pass A),
    // which gives c the address, writes the item and is held before it takes M off the list;
    // meanwhile d joins M, finds the range full and puts M on the list; A's removal lands.
    // Then n2 leaves N, its quarantine runs out, and another instance of a starts
    await dJoinsWhilePassAIsHeld(world, gate, [put(world, dataplane("M", "dp-a2", ["a"]))]);
    await deliver(world, [put(world, dataplane("N", "dp", []), n2)]);
    world.advance(61);
    await deliver(world, [put(world, dataplane("M", "dp-a3", ["a"]))]);

    // Assert: the address n2 left went to d
    expect(allViolations(world)).toEqual([]);
    expect(world.vipItems.peek("M")?.unallocated).toBeUndefined();
    expect(listed(world, "M")).toEqual(["a", "b", "c", "d"]);
  });

  it("3. renumbers a mesh whose range record an older configuration's pass overtook during a deployment", async () => {
    // Arrange: M lists web, passed under the old range
    const gate = new Gate();
    const world = indexWorld({ cidr: "240.0.0.0/27", pause: gate.pause });
    const OLD = VipPool.parse("240.0.0.0/27");
    const NEW = VipPool.parse("10.0.0.0/24");
    await deliver(world, [createMesh(world, "M"), put(world, dataplane("M", "web-1", ["web"]))]);

    // Act: a new-range invocation passes M (renumbers web) and is held before it records the
    // range; an old-range invocation passes M for db (the item goes back to the old range);
    // the new-range record lands; then, under the new range, a record changing no presence
    world.pool = NEW;
    const held = gate.holdNext("claims.setMeshRange");
    const renumbering = deliver(world, [put(world, dataplane("M", "web-2", ["web"]))]);
    await held.reached;
    expect(world.vipItems.peek("M")?.cidr).toBe(NEW.cidr);
    world.pool = OLD;
    await deliver(world, [put(world, dataplane("M", "db-1", ["db"]))]);
    expect(world.vipItems.peek("M")?.cidr).toBe(OLD.cidr);
    held.release();
    await renumbering;
    world.pool = NEW;
    await deliver(world, [put(world, dataplane("M", "web-3", ["web"]))]);

    // Assert: M is in the range the invocations now run with
    expect(allViolations(world)).toEqual([]);
    expect(world.vipItems.peek("M")?.cidr).toBe(NEW.cidr);
    expect(listed(world, "M")).toEqual(["db", "web"]);
  });

  for (const [label, fails] of [
    ["is killed", "kill"],
    ["has its item write throttled", "throttle"],
  ] as const) {
    it(`4. passes a mesh whose index a sweep repaired and which then ${label} before its pass, when the held record comes`, async () => {
      // Arrange: M lists web; db-1 is stored with db, and its record is held back (its shard
      // retrying)
      let failing = false;
      const world = indexWorld({
        pause: throttling(
          (operation) => failing && operation === (fails === "kill" ? "vips.get" : "vips.put"),
        ),
      });
      await deliver(world, [createMesh(world, "M"), put(world, dataplane("M", "web-1", ["web"]))]);
      const held = put(world, dataplane("M", "db-1", ["db"]));

      // Act: the sweep repairs M's index (entries and record of db-1), then fails before its
      // pass writes (killed at its item read, or its item writes throttled); then the held
      // record is delivered
      failing = true;
      await expect(
        sweep({ ...world.batchPorts(), index: world.index }, world.batchSettings()),
      ).rejects.toThrow(/allowed throughput/);
      failing = false;
      const record = (await world.index.getContributors([{ mesh: "M", name: "db-1" }])).get(
        JSON.stringify(["M", "db-1"]),
      );
      expect(record?.contributions).toEqual([{ mesh: "M", service: "db" }]);
      await deliver(world, [held]);

      // Assert
      expect(allViolations(world)).toEqual([]);
      expect(listed(world, "M")).toEqual(["db", "web"]);
    });
  }

  it("5. releases a new service whose pass failed after its claim when its dataplane is gone before the retry", async () => {
    // Arrange: M lists web; db-1 joins with db, and every item write of its invocation is
    // throttled (its pass, and its settling's fence, fail after db's claim is written)
    let throttle = false;
    const world = indexWorld({
      pause: throttling((operation) => throttle && operation === "vips.put"),
    });
    await deliver(world, [createMesh(world, "M"), put(world, dataplane("M", "web-1", ["web"]))]);
    const db = dataplane("M", "db-1", ["db"]);
    const joins = put(world, db);
    throttle = true;
    const first = await deliver(world, [joins]);
    throttle = false;
    expect(first.batchItemFailures).toHaveLength(1);
    expect(world.claims.serviceClaim("db")?.meshes.has("M")).toBe(true);

    // Act: db-1 is deleted before the retry; the retried batch holds both records
    await deliver(world, [joins, remove(world, db)]);

    // Assert: db's claim lists no mesh and is released
    expect(allViolations(world)).toEqual([]);
    expect(listed(world, "M")).toEqual(["web"]);
    expect(world.claims.serviceClaim("db")?.meshes.size).toBe(0);
    expect(world.claims.serviceClaim("db")?.releasedAt).toBeDefined();
  });

  it("6. finishes the leave of a service left unallocated by a renumbering when the leave failed after the write (found by the chaos suite, seed 1059)", async () => {
    // Arrange: A lists x (240.0.0.0); VIP_CIDR becomes a /31 that N's two services fill
    let throttle = false;
    const world = indexWorld({
      cidr: "240.0.0.0/30",
      pause: throttling((operation) => throttle && operation === "claims.leave"),
    });
    await deliver(world, [createMesh(world, "A"), put(world, dataplane("A", "x-1", ["x"]))]);
    world.pool = VipPool.parse("10.0.0.0/31");
    await deliver(world, [createMesh(world, "N"), put(world, dataplane("N", "n", ["n1", "n2"]))]);

    // Act: a second instance of x passes A under the new range: x finds no address there and
    // is listed as unallocated, and its leave (of the old address) is throttled; the record is
    // delivered again
    const second = put(world, dataplane("A", "x-2", ["x"]));
    throttle = true;
    const failed = await deliver(world, [second]);
    throttle = false;
    expect(failed.batchItemFailures).toHaveLength(1);
    expect(Object.keys(world.vipItems.peek("A")?.unallocated ?? {})).toEqual(["x"]);
    await deliver(world, [second]);

    // Assert: x no longer holds its old address for A (it is released)
    expect(allViolations(world)).toEqual([]);
    expect(world.claims.serviceClaim("x")?.meshes.size).toBe(0);
    expect(world.claims.serviceClaim("x")?.releasedAt).toBeDefined();
  });

  it("7. keeps a dataplane's newest record when a batch holds it before an older one (found by the chaos suite, seed 5001)", async () => {
    // Arrange: x goes r -> s -> t; only r's record was processed
    const world = indexWorld();
    const { toS, toT } = await xGoesRThenSThenT(world);

    // Act: one batch with the newer record first (a batch put together from retried records)
    await deliver(world, [toT, toS]);

    // Assert
    expect(allViolations(world)).toEqual([]);
    expect(listed(world, "A")).toEqual(["t"]);
  });

  it("8. releases a deleted mesh's services when its leaves are throttled after the item is gone (found by the chaos suite, seed 5787)", async () => {
    // Arrange: M lists s1 and s2; every leave of the invocation that passes the deleted mesh is
    // throttled (its pass, and its settling, fail after the item is removed)
    let throttle = false;
    const world = indexWorld({
      pause: throttling((operation) => throttle && operation === "claims.leave"),
    });
    await deliver(world, [createMesh(world, "M"), put(world, dataplane("M", "dp", ["s1", "s2"]))]);
    const deleted = deleteMesh(world, "M");
    throttle = true;
    const failed = await deliver(world, [deleted]);
    throttle = false;
    expect(failed.batchItemFailures).toHaveLength(1);

    // Act: the mesh's record is delivered again
    await deliver(world, [deleted]);

    // Assert
    expect(allViolations(world)).toEqual([]);
    expect(world.vipItems.peek("M")).toBeUndefined();
    expect(world.claims.serviceClaim("s1")?.releasedAt).toBeDefined();
  });

  it("9. restores the entries a dead attempt removed when the retry's newest record contributes them again (found by the property test)", async () => {
    // Arrange: x contributes s; x drops s and its delivery dies after the entries, before the
    // record; then the mesh's own record passes M, which reads its set without s
    const world = indexWorld();
    const withS = dataplane("M", "x", ["s"]);
    const without = dataplane("M", "x", []);
    await deliver(world, [
      createMesh(world, "M"),
      put(world, withS),
      put(world, dataplane("M", "k", ["keep"])),
    ]);
    const drops = put(world, without, withS);
    let crashes = 1;
    world.index.crashBeforeRecords = () => crashes-- > 0;
    const failed = await deliver(world, [drops]);
    expect(failed.batchItemFailures).toHaveLength(1);
    await deliver(world, [meshRecord(TABLES.meshes, "M", { newImage: meshItem("M") })]);
    expect(listed(world, "M")).toEqual(["keep"]);

    // Act: x contributes s again; the retried batch holds both records
    const again = put(world, withS, without);
    await deliver(world, [drops, again]);

    // Assert
    expect(allViolations(world)).toEqual([]);
    expect(listed(world, "M")).toEqual(["keep", "s"]);
  });
});
