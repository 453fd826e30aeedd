/**
 * Regression tests for the bugs the reconcile tests found (fixed in b68390b, "Fix races and
 * edge cases found by the property tests"). Each replays a repro and fails on the code before
 * that commit, except the guards of regression 7 that the old parser already got right
 * (`10.0.0.0/x` rejected; the plain ranges accepted).
 */
import { DynamoDBClient, ScanCommand, TransactWriteItemsCommand } from "@aws-sdk/client-dynamodb";
import { marshall } from "@aws-sdk/util-dynamodb";
import { describe, expect, it, vi } from "vitest";
import { loadConfig } from "../../functions/allocator/config.ts";
import { BatchIngresses } from "../../functions/allocator/pass/service-set-view.ts";
import { InvalidCidrError } from "../../functions/domain/errors.ts";
import { VipPool } from "../../functions/domain/pool.ts";
import { isValidServiceName } from "../../functions/domain/service-set.ts";
import { ClaimStoreLogic } from "../../functions/store/claim-store-logic.ts";
import { DynamoClaimTable } from "../../functions/store/dynamo-claim-table.ts";
import { DynamoItemClient } from "../../functions/store/dynamo-item-client.ts";
import {
  DynamoMeshSource,
  INGRESS_SCAN_SEGMENTS,
} from "../../functions/store/dynamo-mesh-source.ts";
import type { SourceRead } from "../../functions/store/ports.ts";
import { dataplane, ingress } from "../fixtures/builders.ts";
import { Gate } from "../fixtures/in-memory-ports.ts";
import { globallyUnique, invariantViolations } from "../fixtures/invariants.ts";
import { meshWith, World } from "./reconcile-world.ts";

/**
 * docs/contract.md invariants 1-6 for `meshes`, plus the claims that back every listed VIP (the
 * service's live claim, with a membership of the mesh, and the address owned by the service),
 * and 5 (globally unique) over every item (test/fixtures/invariants.ts).
 */
function expectInvariants(world: World, meshes: readonly string[]): void {
  const all = world.vipItems.all();
  const violations = invariantViolations({
    items: all.filter((item) => meshes.includes(item.mesh)),
    meshes: new Set(meshes.filter((mesh) => world.source.hasMesh(mesh))),
    pool: world.pool,
    expected: new Map(
      meshes
        .filter((mesh) => world.source.hasMesh(mesh))
        .map((mesh) => [mesh, world.serviceSet(mesh)]),
    ),
    claims: { services: world.claims.serviceClaims(), addresses: world.claims.addressClaims() },
  });
  expect([...violations, ...globallyUnique(all)]).toEqual([]);
}

describe("regression 1: VIP_CIDR rolled back before every mesh was renumbered", () => {
  it("never hands the address a not-yet-renumbered mesh still lists to another service", async () => {
    // Arrange: s holds 10.0.0.0 in m1 and m2; only m1 is renumbered, then the range goes back
    const world = new World({ cidr: "10.0.0.0/30" });
    meshWith(world, "m1", ["s"]);
    meshWith(world, "m2", ["s"]);
    await world.reconcileAll(["m1", "m2"]);
    world.pool = VipPool.parse("10.0.1.0/30");
    await world.reconcile("m1");
    world.pool = VipPool.parse("10.0.0.0/30");
    await world.reconcileAll(["m1", "m2"]);

    // Act
    meshWith(world, "m3", ["t", "u", "v"]);
    await world.reconcile("m3");

    // Assert (invariant 4 holds after the rollback too: m2 follows s's claim)
    expect(world.vips("m2")?.s).toBe(world.vips("m1")?.s);
    expect(globallyUnique(world.vipItems.all())).toEqual([]);
    const m3 = world.vipItems.peek("m3");
    expect(Object.values(m3?.vips ?? {})).not.toContain("10.0.0.0");
    expect([...Object.keys(m3?.vips ?? {}), ...Object.keys(m3?.unallocated ?? {})].sort()).toEqual([
      "t",
      "u",
      "v",
    ]);
    expect(world.claims.addressClaim("10.0.0.0")?.owner).toBe("s");
  });
});

describe("regression 1 in the adapter", () => {
  it("the claim store on DynamoDB moves a claim in a transaction that keeps the old address claim, marked former", async () => {
    // Arrange
    const sent: unknown[] = [];
    const client = {
      send: async (command: unknown) => {
        sent.push(command);
        return {};
      },
    } as unknown as DynamoDBClient;
    const store = new ClaimStoreLogic(
      new DynamoClaimTable(new DynamoItemClient(client), "claims"),
      () => "claim-1",
    );

    // Act
    const outcome = await store.claimAddress({
      service: "s",
      candidate: { vip: "10.0.1.0", offset: 0n },
      mesh: "m1",
      membership: { incarnation: "inc-1", version: 2 },
      nowMs: 1000,
      reclaimCutoffMs: 0,
      moveFrom: "10.0.0.0",
    });

    // Assert
    expect(outcome).toBe("ok");
    expect(sent).toHaveLength(1);
    const command = sent[0] as TransactWriteItemsCommand;
    expect(command).toBeInstanceOf(TransactWriteItemsCommand);
    const keys = (command.input.TransactItems ?? []).map(
      (item) =>
        item.Put?.Item?.pk?.S ??
        item.Update?.Key?.pk?.S ??
        item.Delete?.Key?.pk?.S ??
        item.ConditionCheck?.Key?.pk?.S,
    );
    // The old address claim stays the service's: only marked former (decision 052), never
    // deleted or given away; the move is counted.
    expect(keys.sort()).toEqual(["addr#10.0.0.0", "addr#10.0.1.0", "renumberings", "svc#s"]);
    const old = (command.input.TransactItems ?? []).find(
      (item) => (item.Update?.Key?.pk?.S ?? item.Put?.Item?.pk?.S) === "addr#10.0.0.0",
    );
    expect(old?.Update?.UpdateExpression).toBe("SET former = :true");
    expect(old?.Update?.ConditionExpression).toBe("#owner = :svc");
  });
});

describe("regression 2: mesh deleted while a reconcile of it is in flight", () => {
  it("leaves no item for the mesh when the first write lands after the deletion", async () => {
    // Arrange: R1 has read the tables (mesh exists, web) and is held before its first write
    const gate = new Gate();
    const world = new World({ pause: gate.pause });
    meshWith(world, "m", ["web"]);
    const put = gate.holdNext("vips.put");
    const first = world.reconcile("m");
    await put.reached;

    // Act: the mesh is deleted and its record reconciled, then R1 goes on
    world.source.deleteMesh("m");
    const second = await world.reconcile("m");
    put.release();
    const late = await first;

    // Assert
    expect(second.action).toBe("absent");
    expect(late.action).toBe("deleted");
    expect(world.vipItems.peek("m")).toBeUndefined();
    expect(world.claims.serviceClaim("web")?.meshes.size).toBe(0);
    expect(world.claims.serviceClaim("web")?.releasedAt).toBe(world.nowMs);
  });

  it("leaves no item for the mesh when it is deleted while the first pass claims", async () => {
    // Arrange: R1 is held at its claim of web's address
    const gate = new Gate();
    const world = new World({ pause: gate.pause });
    meshWith(world, "m", ["web"]);
    const claim = gate.holdNext("claims.claimNew");
    const first = world.reconcile("m");
    await claim.reached;

    // Act
    world.source.deleteMesh("m");
    const second = await world.reconcile("m");
    claim.release();
    await first;

    // Assert
    expect(second.action).toBe("absent");
    expect(world.vipItems.all()).toEqual([]);
    expectInvariants(world, ["m"]);
  });
});

describe("regression 3: a pass that read stale tables writes after one that found nothing to do", () => {
  it("keeps a service that a dataplane re-added while the stale pass was in flight", async () => {
    // Arrange: m is v1 {a, b}, b offered to m by an ingress stored under mesh x
    const gate = new Gate();
    const world = new World({ pause: gate.pause });
    meshWith(world, "m", ["a"]);
    world.source.putDataplane(ingress("x", "ingress", [{ mesh: "m", service: "b" }]));
    await world.reconcile("m");
    const before = world.vips("m");
    world.source.putDataplane(ingress("x", "ingress", []));
    const put = gate.holdNext("vips.put");
    const stale = world.reconcile("m");
    await put.reached;

    // Act: a dataplane of m now offers b, so a fresh pass finds nothing to change
    world.source.putDataplane(dataplane("m", "dp-2", ["b"]));
    const fresh = await world.reconcile("m");
    put.release();
    await stale;

    // Assert
    expect(before).toEqual({ a: "240.0.0.0", b: "240.0.0.1" });
    expect(fresh.action).toBe("unchanged");
    expect(world.vips("m")).toEqual(before);
    const claim = world.claims.serviceClaim("b");
    expect(claim?.releasedAt).toBeUndefined();
    expect(claim?.meshes.has("m")).toBe(true);
    expect(world.claims.addressClaim("240.0.0.1")).toMatchObject({
      owner: "b",
      releasedAt: undefined,
    });
    expectInvariants(world, ["m"]);
  });
});

describe("regression 3 with the adapter's per-batch ingress scan", () => {
  it("re-reads the ingresses after writing, so a stale batch cannot drop an offered service", async () => {
    // Arrange: m is v1 {a, b}; b's dataplane goes, and a batch that scanned the ingresses
    // (none offer b) is held before its write
    const gate = new Gate();
    const world = new World({ pause: gate.pause });
    meshWith(world, "m", ["a"]);
    world.source.putDataplane(dataplane("m", "dp-2", ["b"]));
    await world.reconcile("m");
    const before = world.vips("m");
    world.source.deleteDataplane("m", "dp-2");
    const staleBatch = new BatchIngresses(world.source);
    const put = gate.holdNext("vips.put");
    const stale = world.reconcile("m", { ingresses: staleBatch });
    await put.reached;

    // Act: an ingress stored under x now offers b to m; the next batch finds nothing to change
    world.source.putDataplane(ingress("x", "ingress", [{ mesh: "m", service: "b" }]));
    const fresh = await world.reconcile("m", { ingresses: new BatchIngresses(world.source) });
    put.release();
    await stale;

    // Assert
    expect(fresh.action).toBe("unchanged");
    expect(world.vips("m")).toEqual(before);
    // The stale batch's own read happened once; the check after its write read the tables again.
    expect(staleBatch.reads).toBe(1);
    expect(world.source.ingressScans).toBeGreaterThan(2);
    expect(world.claims.serviceClaim("b")?.releasedAt).toBeUndefined();
    expectInvariants(world, ["m"]);
  });

  it("a batch scans the ingresses once through DynamoMeshSource; a fresh read scans again", async () => {
    // Arrange
    const client = new DynamoDBClient({
      region: "us-east-1",
      credentials: { accessKeyId: "test", secretAccessKey: "test" },
    });
    // The ingresses' Scan reads its segments at once; segment 0 holds the ingress, which offers
    // nothing in the first Scan and service b in the second.
    let scans = 0;
    const send = vi.spyOn(client, "send").mockImplementation((async (command: unknown) => {
      if (!(command instanceof ScanCommand)) throw new Error("unexpected command");
      if ((command.input.Segment ?? 0) !== 0) return { Items: [] };
      scans += 1;
      const services = scans === 1 ? [] : ["b"];
      return {
        Items: [
          marshall(
            ingress(
              "x",
              "ingress",
              services.map((service) => ({ mesh: "m", service })),
            ),
          ),
        ],
      };
    }) as never);
    const source = new DynamoMeshSource(client, { meshes: "meshes", dataplanes: "dataplanes" });
    const batch = new BatchIngresses(source);
    const offers = async (read: () => Promise<SourceRead>) => {
      const [record] = (await read()).records;
      const item = record?.item as { networking: { ingress: { availableServices: unknown[] } } };
      return item.networking.ingress.availableServices.length;
    };

    // Act
    const first = await offers(() => batch.get());
    const cached = await offers(() => batch.get());
    const refreshed = await offers(() => source.ingresses());

    // Assert
    expect([first, cached, refreshed]).toEqual([0, 0, 1]);
    expect(scans).toBe(2);
    expect(send).toHaveBeenCalledTimes(2 * INGRESS_SCAN_SEGMENTS);
  });
});

describe("regression 4: a service's own released address reclaimed by another while it joins", () => {
  it("completes without trying to reclaim the address from the service itself", async () => {
    // Arrange: w left 10.0.0.0 a quarantine ago; m2 [a, w] is held at w's join of its old claim
    const gate = new Gate();
    const world = new World({ cidr: "10.0.0.0/31", quarantineSeconds: 60, pause: gate.pause });
    meshWith(world, "m1", ["w"]);
    await world.reconcile("m1");
    world.source.deleteDataplane("m1", "dp-1");
    await world.reconcile("m1");
    world.advance(60);
    meshWith(world, "m2", ["a", "w"]);
    const join = gate.holdNext("claims.join");
    const held = world.reconcile("m2");
    await join.reached;

    // Act: z reclaims 10.0.0.0 from w, then w's join goes on
    meshWith(world, "m3", ["z"]);
    await world.reconcile("m3");
    join.release();
    const outcome = await held;

    // Assert
    expect(world.vips("m3")).toEqual({ z: "10.0.0.0" });
    expect(outcome.unallocated).toEqual(["w"]);
    expect(world.vips("m2")).toEqual({ a: "10.0.0.1" });
    expectInvariants(world, ["m1", "m2", "m3"]);
  });
});

describe("regression 5: no quarantine", () => {
  it("gives a waiting service the address freed in the same reconcile, then changes nothing", async () => {
    // Arrange: a full /30; d is replaced by e
    const world = new World({ cidr: "10.0.0.0/30", quarantineSeconds: 0 });
    meshWith(world, "m", ["a", "b", "c", "d"]);
    await world.reconcile("m");
    world.source.putDataplane(dataplane("m", "dp-1", ["a", "b", "c", "e"]));

    // Act
    const replaced = await world.reconcile("m");
    const itemAfter = world.vipItems.peek("m");
    const again = await world.reconcile("m");

    // Assert
    expect(itemAfter?.vips).toEqual({
      a: "10.0.0.0",
      b: "10.0.0.1",
      c: "10.0.0.2",
      e: "10.0.0.3",
    });
    expect(itemAfter?.unallocated).toBeUndefined();
    expect(replaced.unallocated).toEqual([]);
    expect(again.action).toBe("unchanged");
    expect(world.vipItems.peek("m")).toEqual(itemAfter);
    expectInvariants(world, ["m"]);
  });
});

describe("regression 6: the service name __proto__ (valid since names are data)", () => {
  it("gets a VIP like any other name and never rewrites the item", async () => {
    // Arrange
    const world = new World();
    meshWith(world, "m", ["__proto__", "web"]);

    // Act
    await world.reconcile("m");
    await world.reconcile("m");
    await world.reconcile("m");

    // Assert
    const item = world.vipItems.peek("m");
    expect(item?.version).toBe(1);
    expect(Object.keys(item?.vips ?? {})).toEqual(["__proto__", "web"]);
    expect(Object.hasOwn(item?.vips ?? {}, "__proto__")).toBe(true);
    expect(item?.vips.web).toBe("240.0.0.1");
    expect(world.telemetry.issues).toEqual([]);
    expect(world.claims.serviceClaim("__proto__")?.vip).toBe("240.0.0.0");
  });

  it("gets a VIP when an ingress offers it", async () => {
    // Arrange
    const world = new World();
    world.source.putMesh("m");
    world.source.putDataplane(
      ingress("m", "ingress", [
        { mesh: "m", service: "__proto__" },
        { mesh: "m", service: "web" },
      ]),
    );

    // Act
    await world.reconcile("m");
    await world.reconcile("m");

    // Assert
    expect(world.vipItems.peek("m")?.version).toBe(1);
    expect(Object.keys(world.vipItems.peek("m")?.vips ?? {})).toEqual(["__proto__", "web"]);
    expect(world.telemetry.issues).toEqual([]);
  });

  it("is a valid service name", () => {
    expect(isValidServiceName("__proto__")).toBe(true);
    expect(isValidServiceName("constructor")).toBe(true);
  });
});

describe("regression 7: VIP_CIDR is parsed strictly", () => {
  it.each(["010.0.0.0/8", "1.2.3/24", "0x0a.0.0.0/8", "fd00::%eth0/64", "10.0.0.0/x"])(
    "rejects %j at start-up with an InvalidCidrError naming it",
    (value) => {
      // Act
      const parse = () => VipPool.parse(value);
      const load = () => loadConfig({ VIP_CIDR: value });

      // Assert
      expect(parse).toThrow(InvalidCidrError);
      expect(parse).toThrow(JSON.stringify(value));
      expect(load).toThrow(InvalidCidrError);
      expect(load).toThrow(JSON.stringify(value));
    },
  );

  it.each([
    ["240.0.0.0/4", "240.0.0.0/4"],
    ["fd00::/64", "fd00::/64"],
    ["0.0.0.0/0", "0.0.0.0/0"],
  ])("still accepts %j", (value, cidr) => {
    // Act
    const config = loadConfig({ VIP_CIDR: value });

    // Assert
    expect(config.pool.cidr).toBe(cidr);
  });
});

describe("regression: a renumbered service left without an address in the new range", () => {
  it("is unallocated, drops the mesh's membership, and is released once it leaves", async () => {
    // Arrange: a holds 10.0.0.0; the new range 10.0.1.0/31 is filled by m2 before m1 renumbers
    const world = new World({ cidr: "10.0.0.0/30" });
    meshWith(world, "m1", ["a"]);
    await world.reconcile("m1");
    world.pool = VipPool.parse("10.0.1.0/31");
    meshWith(world, "m2", ["x", "y"]);
    await world.reconcile("m2");

    // Act
    const renumbered = await world.reconcile("m1");
    const membershipAfter = world.claims.serviceClaim("a")?.meshes.has("m1");
    world.source.deleteDataplane("m1", "dp-1");
    await world.reconcile("m1");

    // Assert
    expect(renumbered.unallocated).toEqual(["a"]);
    expect(membershipAfter).toBe(false);
    expect(world.vipItems.peek("m1")).toMatchObject({ vips: {}, cidr: "10.0.1.0/31" });
    expect(world.claims.serviceClaim("a")?.meshes.size).toBe(0);
    expect(world.claims.serviceClaim("a")?.releasedAt).toBeDefined();
    expectInvariants(world, ["m1", "m2"]);
  });
});
