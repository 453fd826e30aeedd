import { DynamoDBClient, paginateScan } from "@aws-sdk/client-dynamodb";
import { DeleteCommand, DynamoDBDocumentClient, PutCommand } from "@aws-sdk/lib-dynamodb";
import type { DynamoDBBatchResponse, DynamoDBStreamEvent } from "aws-lambda";
import { afterAll, beforeAll, expect } from "vitest";
import { type AllocatorConfig, loadConfig } from "../../functions/allocator/config.ts";
import { createStreamHandler, type StreamHandler } from "../../functions/allocator/handlers.ts";
import { VipPool } from "../../functions/domain/pool.ts";
import type { VipItem } from "../../functions/domain/types.ts";
import { toPlain } from "../../functions/store/attribute-values.ts";
import { createTables } from "../../functions/store/create-tables.ts";
import { prefixedTableEnv, type TableNames } from "../../functions/store/table-definitions.ts";
import { decodeAllocatorItem } from "../../functions/store/vip-item-codec.ts";
import type { LocalEmulator } from "../../tools/local/emulator.ts";
import { type DrainReport, StreamPoller } from "../../tools/local/poller.ts";
import { startTestEngine } from "../fixtures/engine.ts";
import { InMemoryTelemetry } from "../fixtures/in-memory-ports.ts";
import { invariantViolations } from "../fixtures/invariants.ts";
import { checkVipWrites } from "../fixtures/vip-item-schema.ts";

const CREDENTIALS = { accessKeyId: "test", secretAccessKey: "test" };
let counter = 0;

/** The local engine of the test file (test/fixtures/engine.ts). */
export { startTestEngine as startEmulator } from "../fixtures/engine.ts";

/**
 * The worlds of a test file: starts the file's engine before its tests, and after them closes
 * every world made and stops the engine. Called once, at the top level of the file.
 */
export function worldsOnTheEngine(): (
  env?: Record<string, string>,
  options?: WorldOptions,
) => Promise<World> {
  let emulator: LocalEmulator | undefined;
  const worlds: World[] = [];
  beforeAll(async () => {
    emulator = await startTestEngine();
  });
  afterAll(async () => {
    for (const world of worlds) world.close();
    await emulator?.stop();
  });
  return async (env = {}, options = {}) => {
    if (emulator === undefined) throw new Error("no engine yet: make worlds inside the tests");
    const created = await createWorld(emulator, env, options);
    worlds.push(created);
    return created;
  };
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
  /**
   * Reads both streams from the last checkpoint and runs the real handler on them; then checks
   * that every VIP item the handler wrote so far conforms to schema/vip-item.schema.json.
   */
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
  /** The handler's clock (quarantines run out on it, not on the wall clock). */
  readonly now?: () => number;
}

export async function createWorld(
  emulator: LocalEmulator,
  env: Record<string, string> = {},
  options: WorldOptions = {},
): Promise<World> {
  counter += 1;
  const prefix = `t${process.pid}-${counter}`;
  const baseEnv: Record<string, string> = {
    ...prefixedTableEnv(prefix),
    DYNAMODB_ENDPOINT: emulator.endpoint,
    ...env,
  };
  const config = loadConfig(baseEnv);
  const client = new DynamoDBClient({
    endpoint: emulator.endpoint,
    region: "us-east-1",
    credentials: CREDENTIALS,
  });
  const doc = DynamoDBDocumentClient.from(client, {
    marshallOptions: { removeUndefinedValues: true },
  });
  await createTables(client, config.tables);
  const telemetry = new InMemoryTelemetry();
  // The handler's own client: every VIP item it writes is checked against the item's JSON
  // Schema (schema/), while the test's client stays free to write deliberately bad items.
  const handlerClient = new DynamoDBClient({
    endpoint: emulator.endpoint,
    region: "us-east-1",
    credentials: CREDENTIALS,
  });
  options.handlerClient?.(handlerClient);
  const schemaErrors: string[] = [];
  checkVipWrites(handlerClient, config.tables.vips, schemaErrors);
  const expectSchema = (): void => {
    expect(
      schemaErrors,
      "VIP items the handler wrote that break schema/vip-item.schema.json",
    ).toEqual([]);
  };
  const handler = createStreamHandler(config, {
    client: handlerClient,
    telemetry,
    ...(options.now !== undefined ? { now: options.now } : {}),
  });
  const delivered: DynamoDBStreamEvent[] = [];
  const poller = new StreamPoller({
    endpoint: emulator.endpoint,
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
      expectSchema();
      return report;
    },
    async vipItem(mesh) {
      const items = (await scanAll(config.tables.vips)).filter((item) => item.mesh === mesh);
      return items[0] === undefined ? undefined : decodeAllocatorItem(items[0]);
    },
    async allVipItems() {
      return (await scanAll(config.tables.vips)).map(decodeAllocatorItem);
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
    async invoke(event) {
      const response = await handler(event);
      expectSchema();
      return response;
    },
    close() {
      poller.destroy();
      client.destroy();
      handlerClient.destroy();
      expectSchema();
    },
  };
}

/** The one dataplane builder of the tests (test/fixtures/builders.ts). */
export { dataplane, ingress } from "../fixtures/builders.ts";

/**
 * Checks the contract's invariants 2-6 over every VIP item, and coverage (1) against the
 * expected service sets when given (test/fixtures/invariants.ts).
 */
export async function expectInvariants(
  world: World,
  expected?: Record<string, readonly string[]> | ReadonlyMap<string, readonly string[]>,
): Promise<VipItem[]> {
  const items = await world.allVipItems();
  const meshes = new Set(await world.meshNames());
  const violations = invariantViolations({
    items,
    meshes,
    pool: VipPool.parse(world.config.pool.cidr),
    ...(expected !== undefined
      ? { expected: expected instanceof Map ? expected : new Map(Object.entries(expected)) }
      : {}),
  });
  expect(violations).toEqual([]);
  return items;
}
