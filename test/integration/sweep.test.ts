import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { DeleteItemCommand, DynamoDBClient, paginateScan } from "@aws-sdk/client-dynamodb";
import { afterAll, afterEach, beforeAll, describe, expect, it } from "vitest";
import { inFlightGraceSeconds, loadConfig } from "../../functions/allocator/config.ts";
import { createStreamHandler, createSweepHandler } from "../../functions/allocator/handlers.ts";
import { createDynamoClient, dynamoPorts } from "../../functions/allocator/runtime.ts";
import { sweep } from "../../functions/allocator/sweep/sweep.ts";
import { VipPool } from "../../functions/domain/pool.ts";
import type { VipItem } from "../../functions/domain/types.ts";
import { toPlain } from "../../functions/store/attribute-values.ts";
import { decodeService } from "../../functions/store/claim-items.ts";
import { createTables } from "../../functions/store/create-tables.ts";
import { DynamoItemClient } from "../../functions/store/dynamo-item-client.ts";
import { prefixedTableEnv } from "../../functions/store/table-definitions.ts";
import { decodeVipItem } from "../../functions/store/vip-item-codec.ts";
import type { LocalEmulator } from "../../tools/local/emulator.ts";
import { StreamPoller } from "../../tools/local/poller.ts";
import { dataplane } from "../fixtures/builders.ts";
import { startTestEngine } from "../fixtures/engine.ts";
import { InMemoryTelemetry, seededRandom } from "../fixtures/in-memory-ports.ts";
import { invariantViolations, leakViolations } from "../fixtures/invariants.ts";
import { checkVipWrites } from "../fixtures/vip-item-schema.ts";
import { CliRunner } from "./cli-runner.ts";

let emulator: LocalEmulator;
let localDir: string;
const cli = new CliRunner("sweep", () => localDir);

beforeAll(async () => {
  emulator = await startTestEngine();
  localDir = mkdtempSync(join(tmpdir(), "vips-sweep-test-"));
});

afterAll(async () => {
  await emulator?.stop();
  if (localDir !== undefined) rmSync(localDir, { recursive: true, force: true });
});

const CREDENTIALS = { accessKeyId: "test", secretAccessKey: "test" };

/** What the allocator's clients wrote to a vips table against the item's schema (schema/). */
const schemaErrors: string[] = [];
afterEach(() => {
  expect(schemaErrors.splice(0), "VIP items that break schema/vip-item.schema.json").toEqual([]);
});

function client(): DynamoDBClient {
  return new DynamoDBClient({
    endpoint: emulator.endpoint,
    region: "us-east-1",
    credentials: CREDENTIALS,
  });
}

interface Seed {
  readonly meshes: string[];
  /** Per mesh, the services its dataplanes declare. */
  readonly expected: Map<string, string[]>;
}

/** `perMesh` dataplanes in each of `meshes` meshes, written straight to the tables (no drain). */
async function seedTables(env: Record<string, string>, meshes: number, perMesh: number) {
  const doc = new DynamoItemClient(client());
  const seed: Seed = { meshes: [], expected: new Map() };
  for (let m = 0; m < meshes; m++) {
    const mesh = `mesh-${String(m).padStart(2, "0")}`;
    seed.meshes.push(mesh);
    await doc.put({ TableName: env.MESHES_TABLE as string, Item: { name: mesh } });
    const services = new Set<string>();
    const items = [];
    for (let d = 0; d < perMesh; d++) {
      // A few services of the mesh's own, and three shared by every mesh.
      const own = `svc-${m}-${d % 6}`;
      const shared = `shared-${d % 3}`;
      services.add(own).add(shared);
      items.push(dataplane(mesh, `dp-${d}`, [own, shared], `10.${m}.0.${d}`));
    }
    await doc.batchWrite(
      env.DATAPLANES_TABLE as string,
      items.map((item) => ({ put: item as unknown as Record<string, unknown> })),
    );
    seed.expected.set(mesh, [...services].sort());
  }
  return seed;
}

async function scan(table: string): Promise<Record<string, unknown>[]> {
  const out: Record<string, unknown>[] = [];
  for await (const page of paginateScan(
    { client: client() },
    { TableName: table, ConsistentRead: true },
  )) {
    for (const item of page.Items ?? []) out.push(toPlain(item) as Record<string, unknown>);
  }
  return out;
}

async function violations(env: Record<string, string>, seed: Seed): Promise<string[]> {
  const items: VipItem[] = (await scan(env.VIPS_TABLE as string)).map(decodeVipItem);
  const claims = (await scan(env.CLAIMS_TABLE as string))
    .filter((item) => String(item.pk).startsWith("svc#"))
    .map(decodeService);
  return [
    ...invariantViolations({
      items,
      meshes: new Set(seed.meshes),
      pool: VipPool.parse("240.0.0.0/4"),
      expected: seed.expected,
    }),
    ...leakViolations(items, claims),
  ];
}

/** The sweep in-process on the DynamoDB adapters, counting the write requests it sends. */
async function sweepCountingWrites(env: Record<string, string>) {
  const config = loadConfig({
    ...env,
    DYNAMODB_ENDPOINT: emulator.endpoint,
    AWS_REGION: "us-east-1",
  });
  const raw = createDynamoClient(config, { credentials: CREDENTIALS, region: "us-east-1" });
  checkVipWrites(raw, config.tables.vips, schemaErrors);
  const written: string[] = [];
  raw.middlewareStack.add(
    (next, context) => async (args) => {
      const command = String(context.commandName);
      if (/Put|Update|Delete|BatchWrite|TransactWrite/.test(command)) written.push(command);
      return await next(args);
    },
    { step: "initialize", name: "countWrites" },
  );
  const result = await sweep(
    {
      ...dynamoPorts(config, raw),
      telemetry: new InMemoryTelemetry(),
    },
    {
      pool: config.pool,
      quarantineSeconds: config.quarantineSeconds,
      maxAttempts: config.maxWriteAttempts,
      now: Date.now,
      newId: () => crypto.randomUUID(),
      sleep: async () => {},
      random: Math.random,
    },
  );
  raw.destroy();
  return { result, written };
}

interface ReconcileJson {
  readonly finished: boolean;
  readonly meshes: number;
  readonly repairs: number;
  readonly byKind: Record<string, number>;
  readonly indexRecordsWritten?: number;
}

/**
 * Fresh tables holding `meshes` x `perMesh` dataplanes written before any stream was read, and
 * the sweep's Lambda entry on them with a fake clock that moves one second per reading.
 */
async function sweepEntryOnFreshTables(meshes: number, perMesh: number) {
  const env: Record<string, string> = {
    ...cli.freshTableEnv(),
    DYNAMODB_ENDPOINT: emulator.endpoint,
  };
  expect((await cli.vips(["tables", "create"], { env })).code).toBe(0);
  const seed = await seedTables(env, meshes, perMesh);
  const config = loadConfig({ ...env, AWS_REGION: "us-east-1" });
  const raw = createDynamoClient(config, { credentials: CREDENTIALS, region: "us-east-1" });
  checkVipWrites(raw, config.tables.vips, schemaErrors);
  let clock = Date.parse("2026-12-01T00:00:00Z");
  const telemetry = new InMemoryTelemetry();
  const handler = createSweepHandler(config, {
    client: raw,
    telemetry,
    now: () => {
      clock += 1_000;
      return clock;
    },
  });
  return { env, seed, raw, telemetry, handler };
}

describe("the sweep's Lambda entry on the local engine", { timeout: 120_000 }, () => {
  it("stops before its remaining time runs out, stores its position, and the next invocation continues the cycle", async () => {
    // Arrange: a fake clock that moves one second per reading; each invocation has 30 s.
    const { env, seed, raw, telemetry, handler } = await sweepEntryOnFreshTables(8, 3);
    const context = { getRemainingTimeInMillis: () => 30_000 };

    // Act
    const summaries = [];
    for (let i = 0; i < 30; i++) {
      const summary = await handler({ vipAllocator: "sweep" }, context);
      summaries.push(summary);
      if (summary.finished) break;
    }
    const next = await handler({ vipAllocator: "sweep" }, context);
    raw.destroy();

    // Assert
    expect(summaries.length).toBeGreaterThan(1);
    expect(summaries.slice(0, -1).every((s) => s.stopped === "deadline")).toBe(true);
    expect(new Set(summaries.map((s) => s.cycle)).size).toBe(1);
    expect(summaries.reduce((n, s) => n + s.meshes, 0)).toBe(8);
    expect(summaries.reduce((n, s) => n + (s.byKind["item-missing"] ?? 0), 0)).toBe(8);
    expect(telemetry.repairs.length).toBe(summaries.reduce((n, s) => n + s.repairs, 0));
    expect(await violations(env, seed)).toEqual([]);
    expect(next.cycle).not.toBe(summaries[0]?.cycle);
    expect(next.repairs).toBe(0);
  });
});

describe("a backfill larger than one invocation, on the local engine", { timeout: 600_000 }, () => {
  it("rebuilds the index of 5,000 dataplanes over several invocations, marked as a backfill throughout, with nothing on the alarm's metric", async () => {
    // Arrange: 5,000 dataplanes in 20 meshes written before any stream was read (an existing
    // table); a fake clock that moves a second per reading; each invocation has 20 s.
    const { env, seed, raw, telemetry, handler } = await sweepEntryOnFreshTables(20, 250);
    const context = { getRemainingTimeInMillis: () => 20_000 };

    // Act: the trigger's backfill, then the schedule's invocations until the cycle ends
    const summaries = [await handler({ vipAllocator: "backfill" }, context)];
    const states = [await storedPhase(env)];
    for (let i = 0; i < 200 && summaries.at(-1)?.finished !== true; i++) {
      summaries.push(await handler({ vipAllocator: "sweep" }, context));
      states.push(await storedPhase(env));
    }
    raw.destroy();

    // Assert
    expect(summaries.at(-1)?.finished).toBe(true);
    expect(summaries[0]?.stopped).toBe("deadline");
    expect(states.filter((state) => state.phase === "index").length).toBeGreaterThan(1);
    expect(new Set(summaries.map((s) => s.cycle)).size).toBe(1);
    expect(states.every((state) => state.backfill === true)).toBe(true);
    const written = summaries.reduce((n, s) => n + (s.indexRecordsWritten ?? 0), 0);
    expect(written).toBe(5_000);
    expect(telemetry.repairs.length).toBeGreaterThan(0);
    expect(telemetry.repairs.every((repair) => repair.expected)).toBe(true);
    expect(telemetry.total("SweepRepairs")).toBe(0);
    expect(await violations(env, seed)).toEqual([]);
  });
});

async function storedPhase(env: Record<string, string>) {
  const doc = new DynamoItemClient(client());
  const item = await doc.get({
    TableName: env.CLAIMS_TABLE as string,
    Key: { pk: "sweep" },
    ConsistentRead: true,
  });
  return { phase: item?.phase, backfill: item?.backfill };
}

describe("the repair sweep on the local engine, through the CLI", { timeout: 240_000 }, () => {
  it("gives 20 meshes of 500 dataplanes written before any stream their VIPs; a second run corrects and writes nothing", async () => {
    // Arrange
    const env: Record<string, string> = {
      ...cli.freshTableEnv(),
      DYNAMODB_ENDPOINT: emulator.endpoint,
    };
    expect((await cli.vips(["tables", "create"], { env })).code).toBe(0);
    const seed = await seedTables(env, 20, 25);

    // Act
    const first = await cli.vips(["reconcile", "--all", "--json"], { env });
    const second = await cli.vips(["reconcile", "--all", "--json"], { env });
    const third = await sweepCountingWrites(env);

    // Assert
    expect(first.code, first.stderr).toBe(0);
    const report = JSON.parse(first.stdout) as ReconcileJson;
    expect(report).toMatchObject({ finished: true, meshes: 20 });
    expect(report.byKind["item-missing"]).toBe(20);
    expect(report.byKind["index-drift"]).toBe(500);
    expect(await violations(env, seed)).toEqual([]);
    expect(JSON.parse(second.stdout)).toMatchObject({ finished: true, meshes: 20, repairs: 0 });
    expect(third.result.repairs).toEqual([]);
    expect(third.written).toEqual([]);
  });

  it("repairs what a drain killed with SIGKILL in the middle of its passes left behind, and counts it", async () => {
    // Arrange: records in the streams, and a drain that is killed once some items exist.
    const env: Record<string, string> = {
      ...cli.freshTableEnv(),
      DYNAMODB_ENDPOINT: emulator.endpoint,
    };
    expect((await cli.vips(["tables", "create"], { env })).code).toBe(0);
    const seed = await seedTables(env, 12, 20);
    const drain = cli.spawnCli(["drain"], env);
    const exited = new Promise((resolve) => drain.on("close", resolve));
    let itemsAtKill = 0;
    for (let i = 0; i < 2_000 && itemsAtKill === 0; i++) {
      await new Promise((resolve) => setTimeout(resolve, 25));
      itemsAtKill = (await scan(env.VIPS_TABLE as string)).length;
    }
    drain.kill("SIGKILL");
    await exited;

    // Act
    const dry = await cli.vips(["reconcile", "--all", "--dry-run", "--json"], { env });
    const repaired = await cli.vips(["reconcile", "--all", "--json"], { env });
    const again = await cli.vips(["reconcile", "--all", "--json"], { env });

    // Assert
    expect(itemsAtKill, "killed before the drain wrote any item").toBeGreaterThan(0);
    expect(itemsAtKill, "the drain finished before it was killed").toBeLessThan(12);
    expect(dry.code).toBe(1);
    const report = JSON.parse(repaired.stdout) as ReconcileJson;
    expect(repaired.code, repaired.stderr).toBe(0);
    expect(report.repairs).toBeGreaterThan(0);
    expect(report.byKind["item-missing"]).toBeGreaterThan(0);
    expect(report.repairs).toBe(Object.values(report.byKind).reduce((a, b) => a + b, 0));
    expect(await violations(env, seed)).toEqual([]);
    expect(JSON.parse(again.stdout)).toMatchObject({ repairs: 0 });
  });
});

describe("the scheduled sweep while the event path is busy, on the local engine", {
  timeout: 240_000,
}, () => {
  it("pages for nothing while dataplanes change continuously, and still counts a real fault", async () => {
    // Arrange: fresh tables, the local poller playing Lambda's event source mapping (the
    // production settings), four meshes with their items.
    const env = { ...prefixedTableEnv(`soak${process.pid}`), DYNAMODB_ENDPOINT: emulator.endpoint };
    const config = loadConfig({ ...env, AWS_REGION: "us-east-1" });
    expect(config.sweepGraceSeconds).toBe(inFlightGraceSeconds());
    const raw = createDynamoClient(config, { credentials: CREDENTIALS, region: "us-east-1" });
    checkVipWrites(raw, config.tables.vips, schemaErrors);
    await createTables(raw, config.tables);
    const doc = new DynamoItemClient(raw);
    const poller = new StreamPoller({
      endpoint: emulator.endpoint,
      region: "us-east-1",
      credentials: CREDENTIALS,
      tables: config.tables,
      handler: createStreamHandler(config, { client: raw, telemetry: new InMemoryTelemetry() }),
      failureFile: join(localDir, "soak-failures.jsonl"),
    });
    const meshes = ["a", "b", "c", "d"];
    for (const mesh of meshes)
      await doc.put({ TableName: config.tables.meshes, Item: { name: mesh } });
    await poller.drain();
    const telemetry = new InMemoryTelemetry();
    const sweepHandler = createSweepHandler(config, { client: raw, telemetry });
    const context = { getRemainingTimeInMillis: () => 60_000 };
    const random = seededRandom(17);

    // Act: for at least 25 s and two whole cycles, a writer puts a dataplane every 50 ms (new
    // ones, changed services, some deletions) while scheduled sweeps run back to back. Nothing
    // is lost or broken.
    poller.start();
    const until = Date.now() + 25_000;
    let done = false;
    const names: string[][] = meshes.map(() => []);
    let writes = 0;
    const writer = (async () => {
      while (!done) {
        const m = Math.floor(random() * meshes.length);
        const mesh = meshes[m] as string;
        const own = names[m] as string[];
        if (own.length > 3 && random() < 0.2) {
          const name = own.splice(Math.floor(random() * own.length), 1)[0] as string;
          await doc.delete({ TableName: config.tables.dataplanes, Key: { mesh, name } });
        } else {
          const name = random() < 0.5 && own.length > 0 ? (own[0] as string) : `dp-${writes}`;
          if (!own.includes(name)) own.push(name);
          const service = `svc-${Math.floor(random() * 40)}`;
          await doc.put({
            TableName: config.tables.dataplanes,
            Item: dataplane(mesh, name, [service]) as unknown as Record<string, unknown>,
          });
        }
        writes++;
        await new Promise((resolve) => setTimeout(resolve, 50));
      }
    })();
    const summaries = [];
    while (Date.now() < until || summaries.filter((summary) => summary.finished).length < 2) {
      summaries.push(await sweepHandler({ vipAllocator: "sweep" }, context));
    }
    done = true;
    await writer;
    await poller.stop();
    await poller.drain();
    // Ordinary traffic resumes: fresh records, until one is delivered within the grace and its
    // batch notes that the stream caught up (decision 134); drift found from then on counts.
    // No note at all (the storm never lagged past the grace) is as good as a catch-up.
    const caughtUp = async () => {
      const note = (await scan(config.tables.claims)).find((item) => item.pk === "stream-lag");
      return note === undefined || Number(note.lagMs) <= config.sweepGraceSeconds * 1000;
    };
    // DynamoDB Local stamps a record's ApproximateCreationDateTime to the minute (seen: a record
    // written 7 s after a full minute read as 7 s old), so a record can only look fresh written
    // just after a minute starts: wait for that when a record delivered at once looked late.
    for (let i = 0; i < 3; i++) {
      if (i > 0)
        await new Promise((resolve) => setTimeout(resolve, 60_200 - (Date.now() % 60_000)));
      await doc.put({
        TableName: config.tables.dataplanes,
        Item: dataplane("a", `after-${i}`, ["svc-0"]) as unknown as Record<string, unknown>,
      });
      await poller.drain();
      if (await caughtUp()) break;
    }
    expect(await caughtUp()).toBe(true);
    const quiet = await sweepHandler({ vipAllocator: "sweep", restart: true }, context);

    // Then a real fault: an index entry lost (as if a write had been dropped).
    const [entry] = (await scan(config.tables.index)).filter((item) =>
      String(item.pk).startsWith("m#"),
    );
    if (entry === undefined) throw new Error("no index entry");
    await raw.send(
      new DeleteItemCommand({
        TableName: config.tables.index,
        Key: { pk: { S: String(entry.pk) }, sk: { S: String(entry.sk) } },
      }),
    );
    const alarmBefore = telemetry.total("SweepRepairs");
    const paged = telemetry.repairs.filter((repair) => !repair.expected);
    const fault = await sweepHandler({ vipAllocator: "sweep", restart: true }, context);
    poller.destroy();
    raw.destroy();

    // Assert: no repair reached the alarm's metric during the soak; the sweeps met the event
    // path's work in flight and left it alone; the real fault is counted after its second look.
    expect(writes).toBeGreaterThan(100);
    expect(summaries.filter((summary) => summary.finished).length).toBeGreaterThanOrEqual(2);
    expect(alarmBefore).toBe(0);
    expect(paged).toEqual([]);
    expect(telemetry.total("SweepInFlight")).toBeGreaterThan(0);
    expect(quiet.repairs).toBe(0);
    expect(fault.byKind["index-drift"]).toBe(1);
    expect(fault.repairs).toBeGreaterThanOrEqual(1);
    expect(telemetry.total("SweepRepairs")).toBe(fault.repairs);
    console.log(
      `soak: ${writes} writes, ${summaries.length} sweep invocations, ` +
        `${telemetry.total("SweepInFlight")} in flight, alarm metric ${alarmBefore}`,
    );
  });
});
