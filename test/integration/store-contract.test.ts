/**
 * One contract for both implementations of the store ports: the in-memory doubles the unit and
 * property tests run on, and the DynamoDB adapters on the local engine (DynamoDB Local or
 * moto_server: one vitest project each). Every case runs against both, so the doubles cannot
 * drift from the adapters.
 */
import { DynamoDBClient } from "@aws-sdk/client-dynamodb";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { joinMesh, leaveMesh } from "../../functions/allocator/pass/memberships.ts";
import type { Membership, VipItem } from "../../functions/domain/types.ts";
import { createTables } from "../../functions/store/create-tables.ts";
import { DocumentClient } from "../../functions/store/document-client.ts";
import { DynamoClaimStore } from "../../functions/store/dynamo-claim-store.ts";
import { DynamoMembershipIndex } from "../../functions/store/dynamo-membership-index.ts";
import { DynamoVipItemStore } from "../../functions/store/dynamo-vip-item-store.ts";
import type {
  AddressCandidate,
  AddressClaim,
  ClaimStore,
  MembershipIndex,
  ServiceClaim,
  SweepState,
  VipItemStore,
} from "../../functions/store/ports.ts";
import type { LocalEmulator } from "../../tools/local/emulator.ts";
import { startTestEngine } from "../fixtures/engine.ts";
import {
  InMemoryClaimStore,
  InMemoryMembershipIndex,
  InMemoryVipItemStore,
  sequentialIds,
} from "../fixtures/in-memory-ports.ts";

let emulator: LocalEmulator;
let client: DynamoDBClient;
let counter = 0;

beforeAll(async () => {
  emulator = await startTestEngine();
  client = new DynamoDBClient({
    endpoint: emulator.endpoint,
    region: "us-east-1",
    credentials: { accessKeyId: "test", secretAccessKey: "test" },
  });
});

afterAll(async () => {
  client?.destroy();
  await emulator?.stop();
});

interface Stores {
  readonly claims: ClaimStore;
  readonly vipItems: VipItemStore;
  readonly index: MembershipIndex;
}

const IMPLEMENTATIONS: Array<[string, () => Promise<Stores>]> = [
  [
    "in memory",
    async () => ({
      claims: new InMemoryClaimStore(),
      vipItems: new InMemoryVipItemStore(),
      index: new InMemoryMembershipIndex(),
    }),
  ],
  [
    "DynamoDB adapters on the local engine",
    async () => {
      counter += 1;
      const prefix = `contract-${process.pid}-${counter}`;
      const tables = {
        meshes: `${prefix}-meshes`,
        dataplanes: `${prefix}-dataplanes`,
        vips: `${prefix}-vips`,
        claims: `${prefix}-claims`,
        index: `${prefix}-index`,
      };
      await createTables(client, tables);
      const doc = new DocumentClient(client);
      return {
        claims: new DynamoClaimStore(doc, tables.claims, sequentialIds("claim")),
        vipItems: new DynamoVipItemStore(doc, tables.vips),
        index: new DynamoMembershipIndex(doc, tables.index),
      };
    },
  ],
];

const member: Membership = { incarnation: "i1", version: 1 };

function vipItem(version: number, vips: Record<string, string> = {}): VipItem {
  return { mesh: "m", version, vips, cidr: "10.0.0.0/30", updatedAt: "t", incarnation: "i1" };
}

function at(vip: string, offset: number, reclaimFrom?: AddressClaim): AddressCandidate {
  return { vip, offset: BigInt(offset), ...(reclaimFrom !== undefined ? { reclaimFrom } : {}) };
}

async function serviceClaim(
  claims: ClaimStore,
  service: string,
): Promise<ServiceClaim | undefined> {
  return (await claims.getServices([service])).get(service);
}

async function addressClaim(claims: ClaimStore, vip: string): Promise<AddressClaim | undefined> {
  return (await claims.getAddresses([vip])).get(vip);
}

function claimNew(
  claims: ClaimStore,
  service: string,
  candidate: AddressCandidate,
  mesh: string,
  nowMs: number,
  reclaimCutoffMs: number,
) {
  return claims.claimAddress({
    service,
    candidate,
    mesh,
    membership: member,
    nowMs,
    reclaimCutoffMs,
  });
}

function leave(
  claims: ClaimStore,
  service: string,
  mesh: string,
  inc: string,
  upTo: number,
  nowMs: number,
) {
  return leaveMesh(claims, { service, mesh, incarnation: inc, upToVersion: upTo, nowMs });
}

describe.each(IMPLEMENTATIONS)("VipItemStore contract: %s", (_name, make) => {
  it("creates an item only when none exists", async () => {
    // Arrange
    const { vipItems } = await make();
    await vipItems.put(vipItem(1), undefined);

    // Act
    const again = await vipItems.put(vipItem(1, { a: "10.0.0.1" }), undefined);

    // Assert: the lost condition answers with the item it found
    expect(again).toEqual({ written: false, found: vipItem(1) });
  });

  it("writes over the version it was given, and only that one", async () => {
    // Arrange
    const { vipItems } = await make();
    await vipItems.put(vipItem(1), undefined);

    // Act
    const stale = await vipItems.put(vipItem(2, { a: "10.0.0.1" }), {
      version: 0,
      incarnation: "i1",
    });
    const fresh = await vipItems.put(vipItem(2, { a: "10.0.0.0" }), vipItem(1));

    // Assert
    expect(stale).toEqual({ written: false, found: vipItem(1) });
    expect(fresh.written).toBe(true);
    expect(fresh.written ? fresh.bytes : Number.NaN).toBeGreaterThan(0);
    expect(await vipItems.get("m")).toMatchObject({ version: 2, vips: { a: "10.0.0.0" } });
  });

  it("writes and deletes only over the incarnation it was given, whatever the version", async () => {
    // Arrange: the mesh's item of a later life (incarnation i2) at version 1
    const { vipItems } = await make();
    await vipItems.put({ ...vipItem(1), incarnation: "i2" }, undefined);

    // Act: a writer that read the earlier life (i1) at version 1
    const put = await vipItems.put(vipItem(2, { a: "10.0.0.1" }), vipItem(1));
    const del = await vipItems.delete("m", vipItem(1));

    // Assert
    const later = { ...vipItem(1), incarnation: "i2" };
    expect(put).toEqual({ written: false, found: later });
    expect(del).toEqual({ written: false, found: later });
    expect(await vipItems.get("m")).toMatchObject({ version: 1, incarnation: "i2", vips: {} });
  });

  it("deletes only the version it was given", async () => {
    // Arrange
    const { vipItems } = await make();
    await vipItems.put(vipItem(1), undefined);

    // Act
    const stale = await vipItems.delete("m", vipItem(2));
    const missing = await vipItems.delete("other", vipItem(1));
    const landed = await vipItems.delete("m", vipItem(1));

    // Assert: no item found is not known as such (an engine may not return it): "unknown"
    expect(stale).toEqual({ written: false, found: vipItem(1) });
    expect(missing).toEqual({ written: false, found: "unknown" });
    expect(landed).toEqual({ written: true, bytes: 0 });
    expect(await vipItems.get("m")).toBeUndefined();
  });

  it("stores a mesh beyond 64 KB in the compact format and reads it back whole", async () => {
    // Arrange
    const vips = Object.fromEntries(
      Array.from({ length: 3000 }, (_, i) => [`service-${i}`, `10.0.${i >> 8}.${i & 255}`]),
    );
    const { vipItems } = await make();

    // Act
    const write = await vipItems.put(vipItem(1, vips), undefined);

    // Assert
    expect(write.written).toBe(true);
    expect(write.written ? write.bytes : Number.NaN).toBeLessThan(64 * 1024);
    expect((await vipItems.get("m"))?.vips).toEqual(vips);
  });

  it("keeps service names that are JavaScript property names, and private attributes", async () => {
    // Arrange
    const { vipItems } = await make();
    const vips = JSON.parse('{"__proto__":"10.0.0.0","constructor":"10.0.0.1"}');
    const item = { ...vipItem(1, vips), renumberings: 3, leaving: ["toString"] };

    // Act
    await vipItems.put(item, undefined);
    const read = await vipItems.get("m");

    // Assert
    // A DynamoDB map keeps no order of its keys (moto returns them as written, DynamoDB Local
    // not): compared sorted.
    expect(Object.entries(read?.vips ?? {}).sort()).toEqual([
      ["__proto__", "10.0.0.0"],
      ["constructor", "10.0.0.1"],
    ]);
    expect(read?.renumberings).toBe(3);
    expect(read?.leaving).toEqual(["toString"]);
  });

  it("returns copies that do not alias the stored item", async () => {
    // Arrange
    const { vipItems } = await make();
    await vipItems.put(vipItem(1, { a: "10.0.0.0" }), undefined);

    // Act
    const read = await vipItems.get("m");
    (read?.vips as Record<string, string>).a = "changed";

    // Assert
    expect((await vipItems.get("m"))?.vips).toEqual({ a: "10.0.0.0" });
  });
});

describe.each(IMPLEMENTATIONS)("ClaimStore contract: %s", (_name, make) => {
  it("claims an address and a service together, and neither when one is taken", async () => {
    // Arrange
    const { claims } = await make();
    await claimNew(claims, "a", at("10.0.0.0", 0), "m", 1, 0);

    // Act
    const addressTaken = await claimNew(claims, "b", at("10.0.0.0", 0), "m", 1, 0);
    const serviceTaken = await claimNew(claims, "a", at("10.0.0.1", 1), "m", 1, 0);

    // Assert
    expect(addressTaken).toBe("address-taken");
    expect(serviceTaken).toBe("service-changed");
    expect([...(await claims.getServices(["a", "b"])).keys()]).toEqual(["a"]);
    expect([...(await claims.getAddresses(["10.0.0.0", "10.0.0.1"])).keys()]).toEqual(["10.0.0.0"]);
  });

  it("keeps a moved claim's old address as former, hints it on release, and lets another service reclaim it", async () => {
    // Arrange: a holds .0, then moves to .1 (a renumbering)
    const { claims } = await make();
    await claimNew(claims, "a", at("10.0.0.0", 0), "m", 1, 0);
    const moved = await claims.claimAddress({
      service: "a",
      candidate: at("10.0.0.1", 1),
      mesh: "m",
      membership: { incarnation: "i1", version: 2 },
      nowMs: 2,
      reclaimCutoffMs: 0,
      moveFrom: "10.0.0.0",
    });
    const afterMove = await serviceClaim(claims, "a");
    const formerBefore = await addressClaim(claims, "10.0.0.0");

    // Act: a leaves its last mesh; then b reclaims the former address (its quarantine over)
    const left = await leave(claims, "a", "m", "i1", 2, 50);
    const hinted = await addressClaim(claims, "10.0.0.0");
    const reclaim = await claimNew(claims, "b", at("10.0.0.0", 0, hinted), "n", 60, 50);

    // Assert
    expect(moved).toBe("ok");
    expect(afterMove).toMatchObject({ vip: "10.0.0.1", former: ["10.0.0.0"] });
    expect(formerBefore).toMatchObject({ owner: "a", former: true, releasedAt: undefined });
    expect(left).toBe("released");
    expect(hinted).toMatchObject({ owner: "a", former: true, releasedAt: 50 });
    expect(reclaim).toBe("ok");
    expect(await addressClaim(claims, "10.0.0.0")).toMatchObject({ owner: "b" });
    expect(await serviceClaim(claims, "a")).toMatchObject({ vip: "10.0.0.1", releasedAt: 50 });
    expect((await serviceClaim(claims, "a"))?.former).toBeUndefined();
  });

  it("does not let another service reclaim a former address its owner moved back to", async () => {
    // Arrange: a moved .0 -> .1 -> back to .0 (its own former address)
    const { claims } = await make();
    await claimNew(claims, "a", at("10.0.0.0", 0), "m", 1, 0);
    const move = (
      vip: string,
      offset: number,
      from: string,
      version: number,
      reclaim?: AddressClaim,
    ) =>
      claims.claimAddress({
        service: "a",
        candidate: at(vip, offset, reclaim),
        mesh: "m",
        membership: { incarnation: "i1", version },
        nowMs: 2,
        reclaimCutoffMs: 0,
        moveFrom: from,
      });
    await move("10.0.0.1", 1, "10.0.0.0", 2);
    const former = await addressClaim(claims, "10.0.0.0");
    const back = await move("10.0.0.0", 0, "10.0.0.1", 3, former);

    // Act: b tries to reclaim .0 with the claim it saw while .0 was former
    const stolen = await claimNew(claims, "b", at("10.0.0.0", 0, former), "n", 60, 50);

    // Assert
    expect(back).toBe("ok");
    expect(stolen).toBe("address-taken");
    expect(await addressClaim(claims, "10.0.0.0")).toMatchObject({ owner: "a" });
    expect((await addressClaim(claims, "10.0.0.0"))?.former).toBeUndefined();
    expect(await serviceClaim(claims, "a")).toMatchObject({
      vip: "10.0.0.0",
      former: ["10.0.0.1"],
    });
  });

  it("releases a service, on both claims, when its last mesh leaves", async () => {
    // Arrange
    const { claims } = await make();
    await claimNew(claims, "a", at("10.0.0.0", 0), "m1", 1, 0);
    await joinMesh(claims, {
      service: "a",
      vip: "10.0.0.0",
      mesh: "m2",
      membership: member,
      resume: false,
    });

    // Act
    const wrongIncarnation = await leave(claims, "a", "m1", "other", 9, 50);
    const tooOld = await leave(claims, "a", "m1", "i1", 0, 50);
    const first = await leave(claims, "a", "m1", "i1", 1, 50);
    const last = await leave(claims, "a", "m2", "i1", 1, 60);

    // Assert
    expect([wrongIncarnation, tooOld, first, last]).toEqual(["kept", "kept", "left", "released"]);
    expect((await serviceClaim(claims, "a"))?.releasedAt).toBe(60);
    expect((await addressClaim(claims, "10.0.0.0"))?.releasedAt).toBe(60);
  });

  it("releases a service whose last membership is already gone (a retried leave)", async () => {
    // Arrange: the membership was removed, but the release never happened
    const { claims } = await make();
    await claimNew(claims, "a", at("10.0.0.0", 0), "m", 1, 0);
    const removed = await claims.removeMembership({
      service: "a",
      mesh: "m",
      incarnation: "i1",
      upToVersion: 1,
    });

    // Act
    const retried = await leave(claims, "a", "m", "i1", 1, 70);

    // Assert
    expect(removed.written).toBe(true);
    expect(removed.claim?.meshes.size).toBe(0);
    expect(retried).toBe("released");
    expect((await serviceClaim(claims, "a"))?.releasedAt).toBe(70);
  });

  it("says what it found when a condition fails", async () => {
    // Arrange
    const { claims } = await make();
    await claimNew(claims, "a", at("10.0.0.0", 0), "m", 1, 0);

    // Act
    const wrongVip = await claims.putMembership({
      service: "a",
      vip: "10.0.0.9",
      mesh: "m2",
      membership: member,
      resume: false,
    });
    const missing = await claims.removeMembership({
      service: "zz",
      mesh: "m",
      incarnation: "i1",
      upToVersion: 1,
    });

    // Assert
    expect(wrongVip.written).toBe(false);
    expect(wrongVip.claim?.vip).toBe("10.0.0.0");
    expect([...(wrongVip.claim?.meshes.keys() ?? [])]).toEqual(["m"]);
    expect(missing).toEqual({ written: false, claim: undefined });
  });

  it("joins a released claim only as released, ending its quarantine", async () => {
    // Arrange
    const { claims } = await make();
    await claimNew(claims, "a", at("10.0.0.0", 0), "m", 1, 0);
    await leave(claims, "a", "m", "i1", 1, 50);
    const v2 = { incarnation: "i1", version: 2 };

    // Act
    const asLive = await joinMesh(claims, {
      service: "a",
      vip: "10.0.0.0",
      mesh: "m",
      membership: v2,
      resume: false,
    });
    const asReleased = await joinMesh(claims, {
      service: "a",
      vip: "10.0.0.0",
      mesh: "m",
      membership: v2,
      resume: true,
    });

    // Assert
    expect(asLive).toBe(false);
    expect(asReleased).toBe(true);
    expect((await serviceClaim(claims, "a"))?.releasedAt).toBeUndefined();
    expect((await addressClaim(claims, "10.0.0.0"))?.releasedAt).toBeUndefined();
  });

  it("reclaims a released address only after the cutoff, deleting the old service claim", async () => {
    // Arrange
    const { claims } = await make();
    await claimNew(claims, "a", at("10.0.0.0", 0), "m", 1, 0);
    await leave(claims, "a", "m", "i1", 1, 1000);
    const previous = await addressClaim(claims, "10.0.0.0");

    // Act
    const early = await claimNew(claims, "b", at("10.0.0.0", 0, previous), "m", 1500, 999);
    const due = await claimNew(claims, "b", at("10.0.0.0", 0, previous), "m", 2500, 1000);

    // Assert
    expect(early).toBe("address-taken");
    expect(due).toBe("ok");
    expect(await serviceClaim(claims, "a")).toBeUndefined();
    expect(await addressClaim(claims, "10.0.0.0")).toMatchObject({
      owner: "b",
      releasedAt: undefined,
    });
  });

  it("moves a claim to a new address, keeps the old one owned by the service, and counts the move", async () => {
    // Arrange
    const { claims } = await make();
    await claimNew(claims, "a", at("10.0.0.0", 0), "m", 1, 0);
    const before = await claims.getRenumberings();

    // Act
    const moved = await claims.claimAddress({
      service: "a",
      candidate: at("10.0.1.0", 0),
      mesh: "m",
      membership: { incarnation: "i1", version: 2 },
      nowMs: 5,
      reclaimCutoffMs: 0,
      moveFrom: "10.0.0.0",
    });

    // Assert
    expect(moved).toBe("ok");
    expect((await serviceClaim(claims, "a"))?.vip).toBe("10.0.1.0");
    expect((await addressClaim(claims, "10.0.0.0"))?.owner).toBe("a");
    expect((await addressClaim(claims, "10.0.1.0"))?.owner).toBe("a");
    expect(before).toBe(0);
    expect(await claims.getRenumberings()).toBe(1);
  });

  it("keeps mesh names that are JavaScript property names as memberships", async () => {
    // Arrange
    const { claims } = await make();
    await claimNew(claims, "a", at("10.0.0.0", 0), "__proto__", 1, 0);

    // Act
    const joined = await joinMesh(claims, {
      service: "a",
      vip: "10.0.0.0",
      mesh: "constructor",
      membership: member,
      resume: false,
    });

    // Assert
    expect(joined).toBe(true);
    expect([...((await serviceClaim(claims, "a"))?.meshes.keys() ?? [])].sort()).toEqual([
      "__proto__",
      "constructor",
    ]);
  });

  it("keeps the cursor and the claim count of each range", async () => {
    // Arrange
    const { claims } = await make();

    // Act
    const fresh = await claims.readCursor("10.0.0.0/30");
    const count = await claims.advanceCursor("10.0.0.0/30", 3n, 2);
    const again = await claims.advanceCursor("10.0.0.0/30", 0n, 1);

    // Assert
    expect(fresh).toBe(0n);
    expect(count).toBe(2);
    expect(again).toBe(3);
    expect(await claims.readCursor("10.0.0.0/30")).toBe(0n);
    expect(await claims.readCursor("10.0.0.0/29")).toBe(0n);
  });

  it("sets a range's claim counter only from the value it expects", async () => {
    // Arrange
    const { claims } = await make();
    const fresh = await claims.readCounter("10.0.0.0/30");

    // Act
    const fromZero = await claims.setCounter("10.0.0.0/30", 0, 4);
    const stale = await claims.setCounter("10.0.0.0/30", 0, 9);
    const fromFour = await claims.setCounter("10.0.0.0/30", 4, 3);

    // Assert
    expect(fresh).toBe(0);
    expect([fromZero, stale, fromFour]).toEqual([true, false, true]);
    expect(await claims.readCounter("10.0.0.0/30")).toBe(3);
    expect(await claims.advanceCursor("10.0.0.0/30", 1n, 1)).toBe(4);
  });

  it("scans service and address claims a page at a time, resuming after any key", async () => {
    // Arrange
    const { claims } = await make();
    await claimNew(claims, "constructor", at("10.0.0.0", 0), "m", 1, 0);
    await claimNew(claims, "web", at("10.0.0.1", 1), "m", 1, 0);
    await claims.advanceCursor("10.0.0.0/30", 2n, 2);

    // Act
    const seen: string[] = [];
    let after: string | undefined;
    let pages = 0;
    do {
      const page = await claims.scan(after, 2, pages % 2 === 0);
      for (const item of page.items) {
        seen.push("service" in item ? `svc ${item.service.service}` : `addr ${item.address.vip}`);
      }
      after = page.next;
      pages++;
    } while (after !== undefined && pages < 20);
    const first = await claims.scan(undefined, 10);
    const resumed = await claims.scan(first.items[0]?.key, 10);

    // Assert
    expect(seen.sort()).toEqual(["addr 10.0.0.0", "addr 10.0.0.1", "svc constructor", "svc web"]);
    expect(resumed.items.map((item) => item.key)).toEqual(first.items.slice(1).map((i) => i.key));
  });

  it("keeps the sweep's position, written only over the version it expects", async () => {
    // Arrange
    const { claims } = await make();
    const state: SweepState = {
      cycle: "c1",
      startedAt: 5,
      phase: "claims",
      after: "svc#__proto__",
      meshes: 3,
      repairs: 1,
      addressesInRange: 2,
      counterAtStart: 7,
      version: 1,
    };

    // Act
    const created = await claims.putSweepState(state, undefined);
    const duplicate = await claims.putSweepState(state, undefined);
    const advanced = await claims.putSweepState({ ...state, phase: "done", version: 2 }, 1);
    const stale = await claims.putSweepState({ ...state, version: 2 }, 1);

    // Assert
    expect([created, duplicate, advanced, stale]).toEqual([true, false, true, false]);
    expect(await claims.getSweepState()).toEqual({ ...state, phase: "done", version: 2 });
  });

  it("keeps a mesh on the waiting list against an older version's removal, and lets a seen incarnation go", async () => {
    // Arrange: M joins for (i1, v2); N joins for (i1, v1)
    const { claims } = await make();
    const at = (incarnation: string, version: number) => ({ incarnation, version });
    await claims.setWaiting("M", { waiting: true, item: at("i1", 2) });
    await claims.setWaiting("__proto__", { waiting: true, item: at("i1", 1) });

    // Act: an older version's join and leave of M; a newer version's leave of __proto__; a
    // leave of M by another incarnation, first unseen, then seen
    const olderJoin = await claims.setWaiting("M", { waiting: true, item: at("i1", 1) });
    const olderLeave = await claims.setWaiting("M", { waiting: false, item: at("i1", 1) });
    const state = await claims.getPassState([]);
    const newerLeave = await claims.setWaiting("__proto__", { waiting: false, item: at("i1", 3) });
    const unseen = await claims.setWaiting("M", { waiting: false, item: at("i2", 9) });
    const seen = await claims.setWaiting("M", { waiting: false, item: at("i2", 1), seen: "i1" });

    // Assert
    expect(state.waiting).toEqual(
      new Map([
        ["M", at("i1", 2)],
        ["__proto__", at("i1", 1)],
      ]),
    );
    expect([olderJoin, olderLeave, newerLeave, unseen, seen]).toEqual([
      false,
      false,
      true,
      false,
      true,
    ]);
    expect(await claims.getWaiting()).toEqual([]);
  });

  it("keeps a mesh's range record of the newest item version, and lets a seen incarnation go", async () => {
    // Arrange
    const { claims } = await make();
    const at = (incarnation: string, version: number) => ({ incarnation, version });
    const first = await claims.setMeshRange("constructor", "10.0.0.0/24", at("i1", 3));

    // Act: an older version, the same again, another incarnation unseen, then seen
    const older = await claims.setMeshRange("constructor", "240.0.0.0/4", at("i1", 2));
    const same = await claims.setMeshRange("constructor", "10.0.0.0/24", at("i1", 3));
    const unseen = await claims.setMeshRange("constructor", "240.0.0.0/4", at("i2", 1));
    const kept = await claims.getPassState(["constructor", "absent"]);
    const seen = await claims.setMeshRange("constructor", "240.0.0.0/4", at("i2", 1), "i1");

    // Assert
    expect([first, older, same, unseen, seen]).toEqual([true, false, true, false, true]);
    expect(kept.ranges).toEqual(
      new Map([["constructor", { cidr: "10.0.0.0/24", revision: at("i1", 3) }]]),
    );
    expect((await claims.getPassState(["constructor"])).ranges.get("constructor")).toEqual({
      cidr: "240.0.0.0/4",
      revision: at("i2", 1),
    });
  });
});

describe.each(IMPLEMENTATIONS)("MembershipIndex contract: %s", (_name, make) => {
  const dp1 = { mesh: "a", name: "dp-1" };
  const dp2 = { mesh: "b", name: "__proto__" };

  it("records contributions, answers presence and service sets, and scans both kinds of item", async () => {
    // Arrange
    const { index } = await make();

    // Act
    const lost = await index.write([
      {
        key: dp1,
        add: [
          { mesh: "a", service: "web" },
          { mesh: "a", service: "constructor" },
        ],
        remove: [],
        record: {
          contributions: [
            { mesh: "a", service: "constructor" },
            { mesh: "a", service: "web" },
          ],
          sequence: "0001",
          expectedVersion: undefined,
        },
      },
      {
        key: dp2,
        add: [{ mesh: "a", service: "web" }],
        remove: [],
        record: {
          contributions: [{ mesh: "a", service: "web" }],
          sequence: "0002",
          expectedVersion: undefined,
        },
      },
    ]);

    // Assert
    expect(lost.size).toBe(0);
    expect(await index.servicesOf("a")).toEqual(["constructor", "web"]);
    expect(await index.servicesOf("b")).toEqual([]);
    expect([...(await index.present("a", ["web", "we", "db", "constructor"]))].sort()).toEqual([
      "constructor",
      "web",
    ]);
    const records = await index.getDataplanes([dp1, dp2, { mesh: "a", name: "none" }]);
    expect([...records.keys()].sort()).toEqual(['["a","dp-1"]', '["b","__proto__"]']);
    expect(records.get('["b","__proto__"]')).toEqual({
      key: dp2,
      contributions: [{ mesh: "a", service: "web" }],
      sequence: "0002",
      version: 1,
      pending: [],
    });
    let entries = 0;
    let dataplanes = 0;
    for await (const page of index.scan()) {
      entries += page.entries.length;
      dataplanes += page.dataplanes.length;
    }
    expect({ entries, dataplanes }).toEqual({ entries: 3, dataplanes: 2 });
    expect((await index.recordsOf("a", false)).map((r) => r.key)).toEqual([dp1]);
    expect((await index.recordsOf("b")).map((r) => r.key)).toEqual([dp2]);
    expect((await index.recordsOf("constructor")).length).toBe(0);
    const entriesOfA = await index.entriesOf("a", false);
    expect(
      entriesOfA.map((e) => `${e.service} ${e.dataplane.mesh}/${e.dataplane.name}`).sort(),
    ).toEqual(["constructor a/dp-1", "web a/dp-1", "web b/__proto__"]);
    expect(await index.entriesOf("b")).toEqual([]);
  });

  it("writes a record only at the version it expects, and keeps one that contributes nothing as a tombstone", async () => {
    // Arrange
    const { index } = await make();
    const record = (
      expectedVersion: number | undefined,
      services: string[],
      sequence = "0001",
    ) => ({
      key: dp1,
      add: [],
      remove: [],
      record: {
        contributions: services.map((service) => ({ mesh: "a", service })),
        sequence,
        expectedVersion,
      },
    });
    await index.write([record(undefined, ["web"])]);

    // Act
    const stale = await index.write([record(undefined, ["db"])]);
    const next = await index.write([record(1, ["db"])]);
    const staleEmpty = await index.write([record(1, [])]);
    const emptied = await index.write([record(2, [], "0002")]);
    const tombstone = (await index.getDataplanes([dp1])).get('["a","dp-1"]');
    // A record with no contributions and no stream position (a rebuild's) is deleted.
    const rebuilt = await index.write([record(3, [], "")]);

    // Assert
    expect([...stale]).toEqual(['["a","dp-1"]']);
    expect(next.size).toBe(0);
    expect([...staleEmpty]).toEqual(['["a","dp-1"]']);
    expect(emptied.size).toBe(0);
    expect(tombstone).toMatchObject({ contributions: [], sequence: "0002", version: 3 });
    expect(rebuilt.size).toBe(0);
    expect((await index.getDataplanes([dp1])).size).toBe(0);
  });

  it("finds a service's first contributor, and keeps pending pairs until cleared at the record's version", async () => {
    // Arrange: dp-1 (a) and __proto__ (b) contribute web to a; the record carries a pending pair
    const { index } = await make();
    const web = { mesh: "a", service: "web" };
    await index.write([
      { key: dp2, add: [web], remove: [] },
      {
        key: dp1,
        add: [web],
        remove: [],
        record: {
          contributions: [web],
          sequence: "0001",
          expectedVersion: undefined,
          pending: [web],
        },
      },
    ]);

    // Act
    const first = await index.firstContributors("a", ["web", "db", "constructor"]);
    const written = (await index.getDataplanes([dp1])).get('["a","dp-1"]');
    await index.setPending([{ key: dp1, version: 2, pending: [] }]); // not its version
    const kept = (await index.getDataplanes([dp1])).get('["a","dp-1"]');
    await index.setPending([{ key: dp1, version: 1, pending: [] }]);
    const cleared = (await index.getDataplanes([dp1])).get('["a","dp-1"]');

    // Assert: ids sort as JSON arrays (`["a",...` before `["b",...`)
    expect([...first.entries()]).toEqual([["web", dp1]]);
    expect(written?.pending).toEqual([web]);
    expect(kept?.pending).toEqual([web]);
    expect(cleared).toMatchObject({ pending: [], version: 1, contributions: [web] });
  });

  it("removes entries, and lists a service while any contributor is left", async () => {
    // Arrange
    const { index } = await make();
    const web = { mesh: "a", service: "web" };
    await index.write([
      { key: dp1, add: [web], remove: [] },
      { key: dp2, add: [web], remove: [] },
    ]);

    // Act
    await index.write([{ key: dp1, add: [], remove: [web] }]);
    const afterOne = await index.present("a", ["web"]);
    await index.write([{ key: dp2, add: [], remove: [web] }]);

    // Assert
    expect([...afterOne]).toEqual(["web"]);
    expect([...(await index.present("a", ["web"]))]).toEqual([]);
  });
});

describe("InMemoryClaimStore", () => {
  it("rejects a transaction that names one item twice, as DynamoDB does", async () => {
    // Arrange
    const claims = new InMemoryClaimStore();
    await claimNew(claims, "a", at("10.0.0.0", 0), "m", 1, 0);
    await leave(claims, "a", "m", "i1", 1, 0);
    const previous = await addressClaim(claims, "10.0.0.0");

    // Act
    const attempt = claimNew(claims, "a", at("10.0.0.0", 0, previous), "m", 10, 10);

    // Assert
    await expect(attempt).rejects.toThrow(/ValidationException/);
  });
});
