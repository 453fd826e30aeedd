/**
 * External services on the local engine through the real handler: the external-services
 * stream, the DynamoDB adapters (a Query of a mesh's external services, the index records under
 * `e#<mesh>`, the backfill's paging across both input tables) and the backfill's sweep.
 */
import { DeleteCommand, PutCommand } from "@aws-sdk/lib-dynamodb";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createSweepHandler } from "../../functions/allocator/handlers.ts";
import { hostEntry, splitHosts } from "../../functions/domain/hosts.ts";
import { DynamoMeshSource } from "../../functions/store/dynamo-mesh-source.ts";
import { EXTERNAL_SERVICES_TABLE } from "../../functions/store/table-definitions.ts";
import type { LocalEmulator } from "../../tools/local/emulator.ts";
import { externalService } from "../fixtures/builders.ts";
import { InMemoryTelemetry } from "../fixtures/in-memory-ports.ts";
import {
  createWorld,
  dataplane,
  expectInvariants,
  ingress,
  startEmulator,
  type World,
} from "./harness.ts";

let emulator: LocalEmulator;
let counter = 0;

beforeAll(async () => {
  emulator = await startEmulator();
});

afterAll(async () => {
  await emulator?.stop();
});

async function worldWithExternalServices(): Promise<World> {
  counter++;
  return await createWorld(emulator, {
    [EXTERNAL_SERVICES_TABLE.envVar]: `es${process.pid}-${counter}-external-services`,
  });
}

async function putExternal(w: World, item: Record<string, unknown>): Promise<void> {
  await w.doc.send(new PutCommand({ TableName: w.tables.externalServices as string, Item: item }));
}

async function deleteExternal(w: World, mesh: string, name: string): Promise<void> {
  await w.doc.send(
    new DeleteCommand({ TableName: w.tables.externalServices as string, Key: { mesh, name } }),
  );
}

async function kumaScenario(w: World): Promise<void> {
  await w.putMesh("mesh-1");
  await w.putMesh("mesh-2");
  await w.putDataplane(dataplane("mesh-1", "dp-1", ["backend"]));
  await w.putDataplane(dataplane("mesh-1", "dp-2", ["frontend"]));
  await w.putDataplane(dataplane("mesh-1", "dp-3", ["frontend"]));
  await w.putDataplane(dataplane("mesh-1", "dp-4", ["database", "metrics"]));
  await w.putDataplane(dataplane("mesh-2", "dp-5", ["another-mesh-svc"]));
  await w.putDataplane(
    ingress("mesh-1", "ingress-1", [
      { mesh: "mesh-1", service: "ingress-svc" },
      { mesh: "mesh-2", service: "another-mesh-ingress-svc" },
    ]),
  );
  await putExternal(w, externalService("mesh-1", "es-1", "es-backend", "es.example.com:443"));
  await putExternal(w, externalService("mesh-2", "es-2", "another-mesh-es", "10.9.9.9:80"));
}

const MESH_1 = ["backend", "database", "es-backend", "frontend", "ingress-svc", "metrics"];
const MESH_2 = ["another-mesh-es", "another-mesh-ingress-svc", "another-mesh-svc"];

describe("external services on the local engine", { timeout: 120_000 }, () => {
  it("Kuma's 'should build service set for mesh' through the real handler and the streams", async () => {
    const w = await worldWithExternalServices();
    try {
      await kumaScenario(w);
      await w.drain();
      const one = splitHosts((await w.vipItem("mesh-1"))?.vips ?? {});
      expect(Object.keys(one.services).sort()).toEqual(MESH_1);
      expect(Object.keys(one.hosts)).toEqual(["es.example.com"]);
      const two = splitHosts((await w.vipItem("mesh-2"))?.vips ?? {});
      expect(Object.keys(two.services).sort()).toEqual(MESH_2);
      expect(two.hosts).toEqual({});
      await expectInvariants(w, {
        "mesh-1": [...MESH_1, hostEntry("es.example.com")].sort(),
        "mesh-2": MESH_2,
      });

      // Moved to mesh-2 (a delete and a put): the same VIPs there, gone from mesh-1.
      const before = (await w.vipItem("mesh-1"))?.vips ?? {};
      await deleteExternal(w, "mesh-1", "es-1");
      await putExternal(w, externalService("mesh-2", "es-1", "es-backend", "es.example.com:443"));
      await w.drain();
      const moved = (await w.vipItem("mesh-2"))?.vips ?? {};
      expect(moved["es-backend"]).toBe(before["es-backend"]);
      expect(moved[hostEntry("es.example.com")]).toBe(before[hostEntry("es.example.com")]);
      expect((await w.vipItem("mesh-1"))?.vips["es-backend"]).toBeUndefined();
      await expectInvariants(w);
    } finally {
      w.close();
    }
  });

  it("pages the backfill's read across both input tables, and the backfill gives them VIPs", async () => {
    const w = await worldWithExternalServices();
    try {
      await kumaScenario(w);
      // No drain: as data written before the streams were read (a backfill's situation).
      const source = new DynamoMeshSource(w.client, w.tables);
      const seen: string[] = [];
      let after: string | undefined;
      let pages = 0;
      do {
        const page = await source.dataplanePage(after, 2);
        for (const record of page.records) seen.push(`${record.kind ?? "dp"} ${record.name}`);
        after = page.next;
        pages++;
      } while (after !== undefined && pages < 50);
      expect(seen.sort()).toEqual(
        [
          "dp dp-1",
          "dp dp-2",
          "dp dp-3",
          "dp dp-4",
          "dp dp-5",
          "dp ingress-1",
          "external-service es-1",
          "external-service es-2",
        ].sort(),
      );

      const backfill = createSweepHandler(w.config, {
        client: w.client,
        telemetry: new InMemoryTelemetry(),
      });
      for (let i = 0; i < 10; i++) {
        const summary = await backfill({ vipAllocator: "backfill" });
        if (summary.finished) break;
      }
      const one = splitHosts((await w.vipItem("mesh-1"))?.vips ?? {});
      expect(Object.keys(one.services).sort()).toEqual(MESH_1);
      expect(Object.keys(one.hosts)).toEqual(["es.example.com"]);
      await expectInvariants(w);
    } finally {
      w.close();
    }
  });
});
