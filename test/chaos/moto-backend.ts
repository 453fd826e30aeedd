/**
 * The chaos run's backend on a local engine (moto_server or DynamoDB Local, whichever
 * VIPS_EMULATOR names; the file keeps its first engine's name): the real DynamoDB adapters over an SDK client whose
 * middleware injects the faults of the invocation making each request (a crash: the request
 * throws before it is sent; throttling: a ProvisionedThroughputExceededException), and a clean
 * client for the control plane's writes and the final checks.
 */

import { randomUUID } from "node:crypto";
import { DynamoDBClient, paginateScan } from "@aws-sdk/client-dynamodb";
import { loadConfig } from "../../functions/allocator/config.ts";
import { dynamoPorts } from "../../functions/allocator/runtime.ts";
import { VipPool } from "../../functions/domain/pool.ts";
import { deriveServiceSet } from "../../functions/domain/service-set.ts";
import type { DataplaneRecord } from "../../functions/domain/types.ts";
import { toPlain } from "../../functions/store/attribute-values.ts";
import { decodeAddress, decodeService } from "../../functions/store/claim-items.ts";
import { createTables } from "../../functions/store/create-tables.ts";
import { DynamoItemClient } from "../../functions/store/dynamo-item-client.ts";
import { prefixedTableEnv } from "../../functions/store/table-definitions.ts";
import { decodeAllocatorItem } from "../../functions/store/vip-item-codec.ts";
import type { EmulatorProcess } from "../../tools/local/emulator-process.ts";
import type { DataplaneItem } from "../fixtures/builders.ts";
import { InMemoryTelemetry, seededRandom } from "../fixtures/in-memory-ports.ts";
import type { ChaosBackend, FaultInjector } from "./chaos.ts";

const CREDENTIALS = { accessKeyId: "test", secretAccessKey: "test" };
const SINGLE_WRITES = new Set([
  "PutItemCommand",
  "UpdateItemCommand",
  "DeleteItemCommand",
  "BatchWriteItemCommand",
]);
let runs = 0;

/** A backend factory for {@link runChaos}'s `backend` option, on fresh tables of `emulator`. */
export function motoBackend(emulator: EmulatorProcess) {
  return async (
    faults: FaultInjector,
    setup: { cidr: string; quarantineSeconds: number },
  ): Promise<ChaosBackend> => {
    runs++;
    const prefix = `chaos${process.pid}-${runs}`;
    const config = loadConfig({
      ...prefixedTableEnv(prefix),
      VIP_CIDR: setup.cidr,
      VIP_QUARANTINE_SECONDS: String(setup.quarantineSeconds),
    });
    const options = { endpoint: emulator.endpoint, region: "us-east-1", credentials: CREDENTIALS };
    const clean = new DynamoDBClient(options);
    await createTables(clean, config.tables);
    const faulty = new DynamoDBClient({ ...options, maxAttempts: 3 });
    faulty.middlewareStack.add(
      (next, context) => async (args) => {
        faults.check(String(context.commandName));
        return await next(args);
      },
      { step: "initialize", name: "chaosFaults" },
    );
    // A lost response: the write reaches DynamoDB, then the SDK sees a timeout and sends it
    // again (this middleware sits inside the retry loop). Not for transactions: their retry
    // carries the same ClientRequestToken, which DynamoDB answers as the first (idempotent).
    faulty.middlewareStack.add(
      (next, context) => async (args) => {
        const output = await next(args);
        const command = String(context.commandName);
        if (SINGLE_WRITES.has(command) && faults.loses(command)) {
          throw Object.assign(new Error(`injected: the response to ${command} was lost`), {
            name: "TimeoutError",
          });
        }
        return output;
      },
      { step: "deserialize", name: "chaosLostResponses" },
    );
    const doc = new DynamoItemClient(clean);
    const meshes = new Set<string>();
    const dataplanes = new Map<string, DataplaneItem>();
    let pool = VipPool.parse(setup.cidr);
    let nowMs = Date.parse("2026-01-01T00:00:00Z");
    const random = seededRandom(runs);
    const telemetry = new InMemoryTelemetry();
    const ports = {
      ...dynamoPorts(config, faulty),
      telemetry,
    };
    const scan = async (table: string) => {
      const items: Record<string, unknown>[] = [];
      for await (const page of paginateScan(
        { client: clean },
        { TableName: table, ConsistentRead: true },
      )) {
        for (const item of page.Items ?? []) items.push(toPlain(item) as Record<string, unknown>);
      }
      return items;
    };
    return {
      quarantineSeconds: setup.quarantineSeconds,
      get pool() {
        return pool;
      },
      set pool(next: VipPool) {
        pool = next;
      },
      get nowMs() {
        return nowMs;
      },
      advance: (seconds) => {
        nowMs += seconds * 1000;
      },
      putMesh: async (name) => {
        meshes.add(name);
        await doc.put({ TableName: config.tables.meshes, Item: { name } });
      },
      deleteMesh: async (name) => {
        meshes.delete(name);
        await doc.delete({ TableName: config.tables.meshes, Key: { name } });
      },
      putDataplane: async (item) => {
        dataplanes.set(JSON.stringify([item.mesh, item.name]), item);
        await doc.put({
          TableName: config.tables.dataplanes,
          Item: item as unknown as Record<string, unknown>,
        });
      },
      deleteDataplane: async (mesh, name) => {
        dataplanes.delete(JSON.stringify([mesh, name]));
        await doc.delete({ TableName: config.tables.dataplanes, Key: { mesh, name } });
      },
      meshNames: async () => [...meshes].sort(),
      serviceSet: async (mesh) => {
        if (!meshes.has(mesh)) return [];
        const records: DataplaneRecord[] = [...dataplanes.values()].map((item) => ({
          mesh: item.mesh,
          name: item.name,
          item,
        }));
        const own = records.filter((record) => record.mesh === mesh);
        const ingresses = records.filter(
          (record) => (record.item as DataplaneItem).networking?.ingress !== undefined,
        );
        return deriveServiceSet(mesh, own, ingresses).services;
      },
      ports: () => ports,
      settings: () => ({
        pool,
        quarantineSeconds: setup.quarantineSeconds,
        maxAttempts: config.maxWriteAttempts,
        now: () => nowMs,
        newId: randomUUID,
        sleep: async () => {},
        random,
      }),
      state: async () => {
        const claims = await scan(config.tables.claims);
        return {
          items: (await scan(config.tables.vips)).map(decodeAllocatorItem),
          services: claims.filter((c) => String(c.pk).startsWith("svc#")).map(decodeService),
          addresses: claims.filter((c) => String(c.pk).startsWith("addr#")).map(decodeAddress),
        };
      },
    };
  };
}
