/**
 * The membership index on the local engine (DynamoDB Local, moto_server), through the real
 * poller and handler: incremental passes follow moved ingresses and dataplanes, a mesh created
 * after its dataplanes gets its service set from the index, no request on the event path reads
 * the dataplanes table, and the index builder derives the same index from a table loaded
 * without any stream history.
 */
import type { DynamoDBClient } from "@aws-sdk/client-dynamodb";
import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { rebuildIndex } from "../../functions/allocator/membership-index/rebuild.ts";
import { recomputeMesh } from "../../functions/allocator/membership-index/recompute.ts";
import { deriveServiceSet } from "../../functions/domain/service-set.ts";
import { DynamoItemClient } from "../../functions/store/dynamo-item-client.ts";
import { DynamoMembershipIndex } from "../../functions/store/dynamo-membership-index.ts";
import { DynamoMeshSource } from "../../functions/store/dynamo-mesh-source.ts";
import { DynamoVipItemStore } from "../../functions/store/dynamo-vip-item-store.ts";
import {
  dataplane,
  expectInvariants,
  ingress,
  type World,
  type WorldOptions,
  worldsOnTheEngine,
} from "./harness.ts";

const world = worldsOnTheEngine();

/** Requests the handler sent, as "Command table". */
function recordRequests(into: string[]): WorldOptions {
  return {
    handlerClient(client: DynamoDBClient) {
      client.middlewareStack.add(
        (next, context) => async (args) => {
          const input = args.input as { TableName?: string; RequestItems?: object };
          const tables = input.TableName ?? Object.keys(input.RequestItems ?? {}).join(",");
          into.push(`${context.commandName} ${tables}`);
          return await next(args);
        },
        { step: "initialize", name: "recordRequests" },
      );
    },
  };
}

function ports(w: World) {
  const doc = new DynamoItemClient(w.client);
  return {
    source: new DynamoMeshSource(w.client, w.tables),
    index: new DynamoMembershipIndex(doc, w.tables.index),
    vipItems: new DynamoVipItemStore(doc, w.tables.vips),
  };
}

/** Every mesh's index and item agree with the full recompute from the tables. */
async function expectAgreement(w: World, meshes: readonly string[]): Promise<void> {
  for (const mesh of meshes) {
    const comparison = await recomputeMesh(mesh, ports(w));
    expect(comparison, `mesh ${mesh}`).toMatchObject({ agrees: true });
  }
}

describe("incremental passes on the local engine", () => {
  it("follows an ingress that moves its advertisement to another mesh", async () => {
    // Arrange
    const w = await world();
    for (const mesh of ["a", "b", "c"]) await w.putMesh(mesh);
    await w.putDataplane(ingress("a", "ingress-1", [{ mesh: "b", service: "x" }]));
    await w.drain();
    expect((await w.vipItem("b"))?.vips).toEqual({ x: "240.0.0.0" });

    // Act
    await w.putDataplane(ingress("a", "ingress-1", [{ mesh: "c", service: "x" }]));
    await w.drain();

    // Assert
    expect((await w.vipItem("b"))?.vips).toEqual({});
    expect(Object.keys((await w.vipItem("c"))?.vips ?? {})).toEqual(["x"]);
    await expectInvariants(w, { a: [], b: [], c: ["x"] });
    await expectAgreement(w, ["a", "b", "c"]);
  });

  it("follows a dataplane moved to another mesh (a delete and a put)", async () => {
    // Arrange
    const w = await world();
    for (const mesh of ["a", "b"]) await w.putMesh(mesh);
    await w.putDataplane(dataplane("a", "dp", ["y", "z"]));
    await w.putDataplane(dataplane("a", "other", ["z"]));
    await w.drain();

    // Act
    await w.deleteDataplane("a", "dp");
    await w.putDataplane(dataplane("b", "dp", ["y", "z"]));
    await w.drain();

    // Assert
    await expectInvariants(w, { a: ["z"], b: ["y", "z"] });
    await expectAgreement(w, ["a", "b"]);
  });

  it("gives a mesh created after its dataplanes its service set from the index, never reading the dataplanes table", async () => {
    // Arrange
    const requests: string[] = [];
    const w = await world({}, recordRequests(requests));
    await w.putDataplane(dataplane("late", "dp-1", ["early-bird", "web"]));
    await w.putDataplane(ingress("other", "ingress", [{ mesh: "late", service: "remote" }]));
    await w.drain();
    expect(await w.vipItem("late")).toBeUndefined();

    // Act
    await w.putMesh("late");
    await w.drain();

    // Assert
    expect(Object.keys((await w.vipItem("late"))?.vips ?? {}).sort()).toEqual([
      "early-bird",
      "remote",
      "web",
    ]);
    const onDataplanes = requests.filter(
      (request) => request.endsWith(` ${w.tables.dataplanes}`) || request.includes("Scan"),
    );
    expect(onDataplanes).toEqual([]);
    expect(requests.some((request) => request.startsWith("QueryCommand "))).toBe(true);
    await expectAgreement(w, ["late"]);
  });

  it("agrees with the full recompute after random changes and drains", async () => {
    const w = await world({ VIP_QUARANTINE_SECONDS: "0" });
    const meshes = ["m1", "m2"];
    for (const mesh of meshes) await w.putMesh(mesh);
    const op = fc.oneof(
      fc
        .record({
          mesh: fc.constantFrom(...meshes),
          name: fc.constantFrom("dp-0", "dp-1", "dp-2"),
          services: fc.uniqueArray(fc.constantFrom("api", "db", "web", "constructor"), {
            maxLength: 2,
          }),
        })
        .map((r) => ({ kind: "put" as const, ...r })),
      fc
        .record({
          mesh: fc.constantFrom(...meshes),
          offers: fc.array(
            fc.record({ mesh: fc.constantFrom(...meshes), service: fc.constantFrom("api", "q") }),
            { maxLength: 2 },
          ),
        })
        .map((r) => ({ kind: "ingress" as const, ...r })),
      fc
        .record({ mesh: fc.constantFrom(...meshes), name: fc.constantFrom("dp-0", "dp-1", "dp-2") })
        .map((r) => ({ kind: "delete" as const, ...r })),
      fc.constant({ kind: "drain" as const }),
    );
    await fc.assert(
      fc.asyncProperty(fc.array(op, { minLength: 3, maxLength: 12 }), async (ops) => {
        // Act
        for (const step of ops) {
          if (step.kind === "put") {
            await w.putDataplane(dataplane(step.mesh, step.name, [...step.services]));
          } else if (step.kind === "ingress") {
            await w.putDataplane(ingress(step.mesh, "ingress", [...step.offers]));
          } else if (step.kind === "delete") {
            await w.deleteDataplane(step.mesh, step.name);
          } else {
            await w.drain();
          }
        }
        await w.drain();

        // Assert: items and index as the full recompute and a rebuild say.
        await expectAgreement(w, meshes);
        const { source, index } = ports(w);
        const rebuilt = await rebuildIndex(source, index);
        expect(rebuilt.recordsWritten + rebuilt.entriesRepaired).toBe(0);
      }),
      { numRuns: 5 },
    );
  });
});

// 2,000 dataplanes through moto_server take about 20 s alone (DynamoDB Local: less), and more beside other test files.
describe("the index builder on the local engine", { timeout: 180_000 }, () => {
  it("derives the index of a table loaded with 2,000 dataplanes and no stream history, idempotently", async () => {
    // Arrange: the tables are written directly; no record reaches the allocator.
    const w = await world();
    const doc = new DynamoItemClient(w.client);
    const meshes = ["alpha", "beta", "gamma", "delta"];
    await doc.batchWrite(
      w.tables.meshes,
      meshes.map((name) => ({ put: { name } })),
    );
    const items = Array.from({ length: 2000 }, (_, i) => {
      const mesh = meshes[i % meshes.length] as string;
      return i % 250 === 0
        ? ingress(mesh, `ingress-${i}`, [
            { mesh: meshes[(i + 1) % 4] as string, service: `edge-${i}` },
          ])
        : dataplane(mesh, `dp-${i}`, [`svc-${i % 37}`]);
    });
    await doc.batchWrite(
      w.tables.dataplanes,
      items.map((item) => ({ put: item })),
    );
    const { source, index } = ports(w);

    // Act
    const first = await rebuildIndex(source, index);
    const second = await rebuildIndex(source, index);

    // Assert
    expect(first.dataplanes).toBe(2000);
    expect(first.recordsWritten).toBe(2000);
    expect(second).toEqual({ dataplanes: 2000, recordsWritten: 0, entriesRepaired: 0 });
    const records = items.map((item) => ({ mesh: item.mesh, name: item.name, item }));
    const ingresses = records.filter((record) => record.name.startsWith("ingress"));
    for (const mesh of meshes) {
      const own = records.filter((record) => record.mesh === mesh);
      expect(await index.servicesOf(mesh), mesh).toEqual(
        deriveServiceSet(mesh, own, ingresses).services,
      );
    }
  });

  it("repairs an index that lost entries and holds entries of a deleted dataplane", async () => {
    // Arrange
    const w = await world();
    await w.putMesh("m");
    await w.putDataplane(dataplane("m", "dp-1", ["keep"]));
    await w.putDataplane(dataplane("m", "dp-2", ["gone"]));
    await w.drain();
    const { source, index } = ports(w);
    // An entry lost, and a dataplane deleted behind the allocator's back (no record).
    await index.write([
      { key: { mesh: "m", name: "dp-1" }, add: [], remove: [{ mesh: "m", service: "keep" }] },
    ]);
    const doc = new DynamoItemClient(w.client);
    await doc.delete({ TableName: w.tables.dataplanes, Key: { mesh: "m", name: "dp-2" } });
    expect(await index.servicesOf("m")).toEqual(["gone"]);

    // Act
    const result = await rebuildIndex(source, index, { mesh: "m" });

    // Assert
    expect(result.recordsWritten).toBe(1);
    expect(await index.servicesOf("m")).toEqual(["keep"]);
    expect(await rebuildIndex(source, index)).toMatchObject({
      recordsWritten: 0,
      entriesRepaired: 0,
    });
  });
});
