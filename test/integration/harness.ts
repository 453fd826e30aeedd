import { DynamoDBClient, paginateScan } from "@aws-sdk/client-dynamodb";
import { DeleteCommand, DynamoDBDocumentClient, PutCommand } from "@aws-sdk/lib-dynamodb";
import type { DynamoDBBatchResponse, DynamoDBStreamEvent } from "aws-lambda";
import { expect } from "vitest";
import { type AllocatorConfig, loadConfig } from "../../functions/allocator/config.ts";
import {
  createStreamHandler,
  type StreamHandler,
} from "../../functions/allocator/stream-handler.ts";
import { VipPool } from "../../functions/domain/pool.ts";
import type { VipItem } from "../../functions/domain/types.ts";
import { type MotoServer, startMoto } from "../../functions/local/moto.ts";
import { type DrainReport, StreamPoller } from "../../functions/local/poller.ts";
import { toPlain } from "../../functions/store/attribute-values.ts";
import { createTables } from "../../functions/store/create-tables.ts";
import type { TableNames } from "../../functions/store/table-definitions.ts";
import { decodeVipItem } from "../../functions/store/vip-item-codec.ts";
import { InMemoryTelemetry } from "../fixtures/in-memory-ports.ts";

const CREDENTIALS = { accessKeyId: "test", secretAccessKey: "test" };
let counter = 0;

export async function startEmulator(): Promise<MotoServer> {
  return await startMoto();
}

export interface World {
  readonly tables: TableNames;
  readonly config: AllocatorConfig;
  readonly doc: DynamoDBDocumentClient;
  readonly client: DynamoDBClient;
  readonly telemetry: InMemoryTelemetry;
  readonly handler: StreamHandler;
  /** Every event the poller delivered, in order. */
  readonly delivered: DynamoDBStreamEvent[];
  putMesh(name: string): Promise<void>;
  deleteMesh(name: string): Promise<void>;
  putDataplane(item: Record<string, unknown>): Promise<void>;
  deleteDataplane(mesh: string, name: string): Promise<void>;
  /** Reads both streams from the last checkpoint and runs the real handler on them. */
  drain(): Promise<DrainReport>;
  vipItem(mesh: string): Promise<VipItem | undefined>;
  allVipItems(): Promise<VipItem[]>;
  meshNames(): Promise<string[]>;
  /** A handler over the same tables whose config differs (e.g. another VIP_CIDR). */
  handlerWith(env: Record<string, string>): StreamHandler;
  invoke(event: DynamoDBStreamEvent): Promise<DynamoDBBatchResponse>;
  close(): void;
}

/** Fresh tables (unique names) on the emulator, and the real handler wired to them. */
export interface WorldOptions {
  /**
   * Gives the handler a client of its own, configured here (e.g. with a middleware that injects
   * faults); the test's own reads and writes keep using a clean client.
   */
  readonly handlerClient?: (client: DynamoDBClient) => void;
}

export async function createWorld(
  moto: MotoServer,
  env: Record<string, string> = {},
  options: WorldOptions = {},
): Promise<World> {
  counter += 1;
  const prefix = `t${process.pid}-${counter}`;
  const baseEnv: Record<string, string> = {
    MESHES_TABLE: `${prefix}-meshes`,
    DATAPLANES_TABLE: `${prefix}-dataplanes`,
    VIPS_TABLE: `${prefix}-vips`,
    CLAIMS_TABLE: `${prefix}-claims`,
    DYNAMODB_ENDPOINT: moto.endpoint,
    ...env,
  };
  const config = loadConfig(baseEnv);
  const client = new DynamoDBClient({
    endpoint: moto.endpoint,
    region: "us-east-1",
    credentials: CREDENTIALS,
  });
  const doc = DynamoDBDocumentClient.from(client, {
    marshallOptions: { removeUndefinedValues: true },
  });
  await createTables(client, config.tables);
  const telemetry = new InMemoryTelemetry();
  let handlerClient = client;
  if (options.handlerClient !== undefined) {
    handlerClient = new DynamoDBClient({
      endpoint: moto.endpoint,
      region: "us-east-1",
      credentials: CREDENTIALS,
    });
    options.handlerClient(handlerClient);
  }
  const handler = createStreamHandler(config, { client: handlerClient, telemetry });
  const delivered: DynamoDBStreamEvent[] = [];
  const poller = new StreamPoller({
    endpoint: moto.endpoint,
    region: "us-east-1",
    credentials: CREDENTIALS,
    tables: config.tables,
    handler: async (event) => {
      delivered.push(structuredClone(event));
      return await handler(event);
    },
    failureFile: `.local/test-failures-${prefix}.jsonl`,
  });
  // Raw pages decoded by the project's own codec: names such as `__proto__` survive.
  const scanAll = async (table: string) => {
    const items: Record<string, unknown>[] = [];
    for await (const page of paginateScan({ client }, { TableName: table, ConsistentRead: true })) {
      for (const item of page.Items ?? []) items.push(toPlain(item));
    }
    return items;
  };
  return {
    tables: config.tables,
    config,
    doc,
    client,
    telemetry,
    handler,
    delivered,
    async putMesh(name) {
      await doc.send(new PutCommand({ TableName: config.tables.meshes, Item: { name } }));
    },
    async deleteMesh(name) {
      await doc.send(new DeleteCommand({ TableName: config.tables.meshes, Key: { name } }));
    },
    async putDataplane(item) {
      await doc.send(new PutCommand({ TableName: config.tables.dataplanes, Item: item }));
    },
    async deleteDataplane(mesh, name) {
      await doc.send(
        new DeleteCommand({ TableName: config.tables.dataplanes, Key: { mesh, name } }),
      );
    },
    async drain() {
      const report = await poller.drain();
      expect(report.failedToDestination, "records sent to the failure destination").toBe(0);
      return report;
    },
    async vipItem(mesh) {
      const items = (await scanAll(config.tables.vips)).filter((item) => item.mesh === mesh);
      return items[0] === undefined ? undefined : decodeVipItem(items[0]);
    },
    async allVipItems() {
      return (await scanAll(config.tables.vips)).map(decodeVipItem);
    },
    async meshNames() {
      return (await scanAll(config.tables.meshes)).map((item) => String(item.name));
    },
    handlerWith(extra) {
      return createStreamHandler(loadConfig({ ...baseEnv, ...extra }), {
        client: handlerClient,
        telemetry,
      });
    },
    invoke(event) {
      return handler(event);
    },
    close() {
      poller.destroy();
      client.destroy();
      if (handlerClient !== client) handlerClient.destroy();
    },
  };
}

/** A dataplane with one inbound per service. */
export function dataplane(mesh: string, name: string, services: string[], extra: object = {}) {
  return {
    mesh,
    name,
    networking: {
      address: "10.0.0.1",
      inbound: services.map((service, index) => ({
        port: 8080 + index,
        tags: { "kuma.io/service": service },
      })),
    },
    ...extra,
  };
}

/** An ingress stored under `mesh` advertising `available` = [[mesh, service], ...]. */
export function ingress(mesh: string, name: string, available: Array<[string, string]>) {
  return {
    mesh,
    name,
    networking: {
      address: "10.0.0.2",
      ingress: {
        availableServices: available.map(([m, service]) => ({
          mesh: m,
          tags: { "kuma.io/service": service },
          instances: 1,
        })),
      },
    },
  };
}

/**
 * Checks the contract's invariants 2-6 over every VIP item, and coverage (1) against the
 * expected service sets when given.
 */
export async function expectInvariants(
  world: World,
  expected?: Record<string, readonly string[]> | ReadonlyMap<string, readonly string[]>,
): Promise<VipItem[]> {
  const items = await world.allVipItems();
  const meshes = new Set(await world.meshNames());
  const pool = VipPool.parse(world.config.pool.cidr);
  const owner = new Map<string, string>();
  const vipOf = new Map<string, string>();
  for (const item of items) {
    expect(meshes.has(item.mesh), `orphan VIP item for mesh ${item.mesh}`).toBe(true);
    const seen = new Set<string>();
    for (const [service, vip] of Object.entries(item.vips)) {
      expect(pool.contains(vip), `${item.mesh}/${service} ${vip} in ${pool.cidr}`).toBe(true);
      expect(seen.has(vip), `duplicate ${vip} in mesh ${item.mesh}`).toBe(false);
      seen.add(vip);
      const previous = vipOf.get(service);
      if (previous !== undefined) {
        expect(vip, `service ${service} has the same VIP in every mesh`).toBe(previous);
      }
      vipOf.set(service, vip);
      const holder = owner.get(vip);
      if (holder !== undefined) expect(holder, `${vip} is held by one service`).toBe(service);
      owner.set(vip, service);
    }
  }
  if (expected !== undefined) {
    // Maps, not objects: mesh and service names such as `__proto__` are data.
    const actual = new Map<string, string[]>();
    for (const item of items) {
      actual.set(
        item.mesh,
        [...Object.keys(item.vips), ...Object.keys(item.unallocated ?? {})].sort(),
      );
    }
    const want = new Map<string, string[]>();
    const entries = expected instanceof Map ? [...expected] : Object.entries(expected);
    for (const [mesh, services] of entries) want.set(mesh, [...services].sort());
    expect(actual).toEqual(want);
  }
  return items;
}
