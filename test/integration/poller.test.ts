import { existsSync, mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import {
  DeleteItemCommand,
  DescribeTableCommand,
  DynamoDBClient,
  PutItemCommand,
} from "@aws-sdk/client-dynamodb";
import type { DynamoDBBatchResponse, DynamoDBRecord, DynamoDBStreamEvent } from "aws-lambda";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { EVENT_SOURCE_SETTINGS } from "../../functions/allocator/config.ts";
import { createTables } from "../../functions/store/create-tables.ts";
import {
  prefixedTableEnv,
  resolveTableNames,
  type TableNames,
} from "../../functions/store/table-definitions.ts";
import { clientConfig } from "../../tools/local/aws-clients.ts";
import type { LocalEmulator } from "../../tools/local/emulator.ts";
import {
  type BatchInfo,
  type FailureRecord,
  StreamPoller,
  StreamPollerError,
  type StreamPollerOptions,
} from "../../tools/local/poller.ts";
import { startTestEngine } from "../fixtures/engine.ts";

let emulator: LocalEmulator;
let ddb: DynamoDBClient;
let workDir: string;
let tableCounter = 0;

beforeAll(async () => {
  emulator = await startTestEngine();
  ddb = new DynamoDBClient(clientConfig({ endpoint: emulator.endpoint }));
  workDir = mkdtempSync(join(tmpdir(), "poller-test-"));
});

afterAll(async () => {
  ddb?.destroy();
  await emulator?.stop();
  if (workDir !== undefined) rmSync(workDir, { recursive: true, force: true });
});

/** Fresh tables per test, so each test reads streams of its own. */
async function freshTables(): Promise<TableNames> {
  tableCounter++;
  const prefix = `t${tableCounter}`;
  const tables = resolveTableNames({
    ...prefixedTableEnv(prefix),
  });
  await createTables(ddb, tables);
  return tables;
}

async function putMesh(tables: TableNames, name: string): Promise<void> {
  await ddb.send(new PutItemCommand({ TableName: tables.meshes, Item: { name: { S: name } } }));
}

async function putDataplane(tables: TableNames, mesh: string, name: string): Promise<void> {
  await ddb.send(
    new PutItemCommand({
      TableName: tables.dataplanes,
      Item: {
        mesh: { S: mesh },
        name: { S: name },
        networking: {
          M: {
            address: { S: "10.0.0.1" },
            inbound: {
              L: [{ M: { port: { N: "8080" }, tags: { M: { "kuma.io/service": { S: name } } } } }],
            },
          },
        },
      },
    }),
  );
}

function sequenceNumbers(event: DynamoDBStreamEvent): string[] {
  return event.Records.map((r) => r.dynamodb?.SequenceNumber ?? "?");
}

function dataplaneName(record: DynamoDBRecord): string | undefined {
  return record.dynamodb?.Keys?.name?.S;
}

function readFailures(file: string): FailureRecord[] {
  if (!existsSync(file)) return [];
  return readFileSync(file, "utf8")
    .split("\n")
    .filter((line) => line !== "")
    .map((line) => JSON.parse(line) as FailureRecord);
}

function poller(
  tables: TableNames,
  handler: (event: DynamoDBStreamEvent) => Promise<DynamoDBBatchResponse>,
  options: Partial<StreamPollerOptions> = {},
): StreamPoller {
  tableCounter++;
  return new StreamPoller({
    endpoint: emulator.endpoint,
    tables,
    handler,
    failureFile: join(workDir, `failures-${tableCounter}.jsonl`),
    retryDelayMs: () => 1,
    ...options,
  });
}

const ok = async (): Promise<DynamoDBBatchResponse> => ({ batchItemFailures: [] });

describe("StreamPoller against the local engine", () => {
  it("hands the handler records in Lambda's event shape", async () => {
    const tables = await freshTables();
    const bytes = Uint8Array.from([0, 1, 2, 250, 251, 255]);
    await ddb.send(
      new PutItemCommand({
        TableName: tables.meshes,
        Item: {
          name: { S: "default" },
          blob: { B: bytes },
          spec: { M: { nested: { B: bytes }, list: { L: [{ BS: [bytes] }, { N: "7" }] } } },
        },
      }),
    );
    await ddb.send(
      new DeleteItemCommand({ TableName: tables.meshes, Key: { name: { S: "default" } } }),
    );
    const events: DynamoDBStreamEvent[] = [];
    const before = Math.floor(Date.now() / 1000);

    await poller(tables, async (event) => {
      events.push(event);
      return { batchItemFailures: [] };
    }).drain();

    const described = await ddb.send(new DescribeTableCommand({ TableName: tables.meshes }));
    const records = events.flatMap((e) => e.Records);
    expect(records.map((r) => r.eventName)).toEqual(["INSERT", "REMOVE"]);
    const [insert, remove] = records as [DynamoDBRecord, DynamoDBRecord];
    expect(insert.eventSourceARN).toBe(described.Table?.LatestStreamArn);
    expect(insert.eventSource).toBe("aws:dynamodb");
    // The table's region, as Lambda reports it (moto: us-east-1; DynamoDB Local: "ddblocal").
    expect(insert.awsRegion).toBe(described.Table?.LatestStreamArn?.split(":")[3]);
    expect(insert.eventID).toMatch(/\S+/);
    expect(insert.eventVersion).toMatch(/^1\.\d$/);
    const created = insert.dynamodb?.ApproximateCreationDateTime;
    expect(Number.isInteger(created)).toBe(true);
    // DynamoDB Local rounds it down to the minute (an emulator gap, docs/local.md).
    expect(created).toBeGreaterThanOrEqual(
      before - (emulator.engine === "dynamodb-local" ? 60 : 1),
    );
    expect(created).toBeLessThanOrEqual(Math.ceil(Date.now() / 1000));
    const base64 = Buffer.from(bytes).toString("base64");
    expect(insert.dynamodb?.Keys).toEqual({ name: { S: "default" } });
    expect(insert.dynamodb?.NewImage).toEqual({
      name: { S: "default" },
      blob: { B: base64 },
      spec: { M: { nested: { B: base64 }, list: { L: [{ BS: [base64] }, { N: "7" }] } } },
    });
    expect(insert.dynamodb?.StreamViewType).toBe("NEW_AND_OLD_IMAGES");
    expect(insert.dynamodb?.SequenceNumber).toMatch(/^\d{21,40}$/);
    expect(insert.dynamodb?.SizeBytes).toBeGreaterThan(0);
    expect(remove.dynamodb?.OldImage?.blob).toEqual({ B: base64 });
    expect(remove.dynamodb?.NewImage).toBeUndefined();
    // The event is plain JSON, as Lambda delivers it: no Date, no Uint8Array.
    expect(JSON.parse(JSON.stringify(events[0]))).toEqual(events[0]);
  });

  it("drains both streams, counts what it did, and reads nothing twice", async () => {
    const tables = await freshTables();
    for (const mesh of ["alpha", "beta", "gamma"]) await putMesh(tables, mesh);
    for (let i = 0; i < 7; i++) await putDataplane(tables, i < 4 ? "alpha" : "beta", `dp-${i}`);
    const seen: string[] = [];
    const subject = poller(
      tables,
      async (event) => {
        for (const record of event.Records) {
          seen.push(record.dynamodb?.Keys?.name?.S ?? "?");
        }
        return { batchItemFailures: [] };
      },
      { batchSize: 4 },
    );

    const first = await subject.drain();
    const second = await subject.drain();

    expect(first).toMatchObject({
      records: 10,
      batches: 3, // meshes: 3 records in one batch; dataplanes: 4 + 3
      invocations: 3,
      failedToDestination: 0,
      meshesTouched: ["alpha", "beta", "gamma"],
    });
    expect(seen.filter((name) => name.startsWith("dp-"))).toEqual([
      "dp-0",
      "dp-1",
      "dp-2",
      "dp-3",
      "dp-4",
      "dp-5",
      "dp-6",
    ]);
    expect(second).toMatchObject({ records: 0, batches: 0, invocations: 0 });
  });

  it("resumes from the lowest sequence number the handler reports as failed", async () => {
    const tables = await freshTables();
    for (let i = 1; i <= 5; i++) await putDataplane(tables, "default", `dp-${i}`);
    const invocations: string[][] = [];
    const subject = poller(tables, async (event) => {
      invocations.push(event.Records.map((r) => dataplaneName(r) ?? "?"));
      if (invocations.length > 1) return { batchItemFailures: [] };
      const seq = sequenceNumbers(event);
      // Reported out of order: the poller must pick the lowest (dp-3), comparing as numbers.
      return {
        batchItemFailures: [{ itemIdentifier: seq[4] ?? "" }, { itemIdentifier: seq[2] ?? "" }],
      };
    });

    const report = await subject.drain();

    expect(invocations).toEqual([
      ["dp-1", "dp-2", "dp-3", "dp-4", "dp-5"],
      ["dp-3", "dp-4", "dp-5"],
    ]);
    expect(report).toMatchObject({ records: 5, invocations: 2, failedToDestination: 0 });
    expect(readFailures(subject.failureFile)).toEqual([]);
  });

  it("treats an item identifier that is not in the batch as a failure of the whole batch", async () => {
    const tables = await freshTables();
    for (let i = 1; i <= 3; i++) await putDataplane(tables, "default", `dp-${i}`);
    const invocations: string[][] = [];
    const subject = poller(
      tables,
      async (event) => {
        invocations.push(event.Records.map((r) => dataplaneName(r) ?? "?"));
        return invocations.length === 1
          ? { batchItemFailures: [{ itemIdentifier: "99999999999999999999999" }] }
          : { batchItemFailures: [] };
      },
      { bisectBatchOnError: false },
    );

    await subject.drain();

    expect(invocations).toEqual([
      ["dp-1", "dp-2", "dp-3"],
      ["dp-1", "dp-2", "dp-3"],
    ]);
  });

  it("bisects a failing batch to isolate a poison record, sends it to the failure file after the retries, and processes the records after it", async () => {
    const tables = await freshTables();
    for (let i = 1; i <= 10; i++) await putDataplane(tables, "default", `dp-${i}`);
    const processed: string[] = [];
    const batches: BatchInfo[] = [];
    const subject = poller(
      tables,
      async (event) => {
        const names = event.Records.map((r) => dataplaneName(r) ?? "?");
        if (names.includes("dp-4")) throw new Error("poison: dp-4");
        processed.push(...names);
        return { batchItemFailures: [] };
      },
      {
        batchSize: 10,
        retryAttempts: 2,
        bisectBatchOnError: true,
        retryDelayMs: undefined, // the real backoff, once
        onBatch: (info) => {
          batches.push(info);
        },
      },
    );

    const report = await subject.drain();

    expect(processed.sort()).toEqual(
      ["dp-1", "dp-2", "dp-3", "dp-5", "dp-6", "dp-7", "dp-8", "dp-9", "dp-10"].sort(),
    );
    const failures = readFailures(subject.failureFile);
    expect(failures).toHaveLength(1);
    const [failure] = failures as [FailureRecord];
    expect(failure.requestContext.condition).toBe("RetryAttemptsExhausted");
    // dp-4 was in the batch of 10, then in 1-5, then in 4-5, then alone: 1 try + 2 retries.
    expect(failure.requestContext.approximateInvokeCount).toBe(6);
    expect(failure.responseContext?.functionError).toBe("Unhandled");
    expect(failure.DDBStreamBatchInfo.batchSize).toBe(1);
    expect(failure.DDBStreamBatchInfo.startSequenceNumber).toBe(
      failure.DDBStreamBatchInfo.endSequenceNumber,
    );
    expect(failure.DDBStreamBatchInfo.streamArn).toMatch(/table\/t\d+-dataplanes\/stream\//);
    expect(failure.records.map((r) => r.keys)).toEqual([
      { mesh: { S: "default" }, name: { S: "dp-4" } },
    ]);
    expect(failure.lastError).toContain("poison: dp-4");
    expect(report).toMatchObject({ records: 10, batches: 1, failedToDestination: 1 });
    expect(batches.filter((b) => b.outcome === "gave-up")).toHaveLength(1);
    expect(batches.at(-1)?.records.map(dataplaneName)).toEqual([
      "dp-6",
      "dp-7",
      "dp-8",
      "dp-9",
      "dp-10",
    ]);
  });

  it("without bisect, sends the whole failing batch to the failure file after the retries", async () => {
    const tables = await freshTables();
    for (let i = 1; i <= 3; i++) await putDataplane(tables, "default", `dp-${i}`);
    let calls = 0;
    const subject = poller(
      tables,
      async () => {
        calls++;
        throw new Error("always");
      },
      { retryAttempts: 1, bisectBatchOnError: false },
    );

    const report = await subject.drain();
    const again = await subject.drain();

    expect(calls).toBe(2);
    const [failure] = readFailures(subject.failureFile) as [FailureRecord];
    expect(failure.DDBStreamBatchInfo.batchSize).toBe(3);
    expect(failure.requestContext.approximateInvokeCount).toBe(2);
    expect(report).toMatchObject({ records: 3, failedToDestination: 3 });
    expect(again).toMatchObject({ records: 0, invocations: 0 });
  });

  it("gives up on a partially failed tail that keeps failing, keeping the records before it", async () => {
    const tables = await freshTables();
    for (let i = 1; i <= 4; i++) await putDataplane(tables, "default", `dp-${i}`);
    const invocations: string[][] = [];
    const subject = poller(
      tables,
      async (event) => {
        invocations.push(event.Records.map((r) => dataplaneName(r) ?? "?"));
        const failed = event.Records.find((r) => dataplaneName(r) === "dp-3");
        return {
          batchItemFailures: [{ itemIdentifier: failed?.dynamodb?.SequenceNumber ?? "" }],
        };
      },
      { retryAttempts: 2 },
    );

    const report = await subject.drain();

    expect(invocations).toEqual([
      ["dp-1", "dp-2", "dp-3", "dp-4"],
      ["dp-3", "dp-4"],
      ["dp-3", "dp-4"],
    ]);
    const [failure] = readFailures(subject.failureFile) as [FailureRecord];
    expect(failure.DDBStreamBatchInfo.batchSize).toBe(2);
    expect(failure.responseContext?.functionError).toBeUndefined();
    expect(report).toMatchObject({ records: 4, failedToDestination: 2 });
  });

  it("sends records older than the maximum record age to the failure file without invoking", async () => {
    const tables = await freshTables();
    for (let i = 1; i <= 3; i++) await putDataplane(tables, "default", `dp-${i}`);
    let calls = 0;
    const subject = poller(
      tables,
      async () => {
        calls++;
        return { batchItemFailures: [] };
      },
      { maxRecordAgeSeconds: 60, now: () => Date.now() + 61_000 },
    );

    const report = await subject.drain();

    expect(calls).toBe(0);
    const [failure] = readFailures(subject.failureFile) as [FailureRecord];
    expect(failure.requestContext).toMatchObject({
      condition: "RecordAgeExceeded",
      approximateInvokeCount: 0,
    });
    expect(failure.DDBStreamBatchInfo.batchSize).toBe(3);
    expect(report).toMatchObject({ records: 3, failedToDestination: 3, invocations: 0 });
  });

  it("stops retrying a failing record once it is too old, even with unlimited retries", async () => {
    const tables = await freshTables();
    await putDataplane(tables, "default", "dp-1");
    // The clock starts at the record's creation time as the stream reports it: DynamoDB Local
    // rounds ApproximateCreationDateTime down to the minute (moto and DynamoDB: to the
    // millisecond and the second), so by the wall clock a fresh record can be 59 s old already.
    let clock: number | undefined;
    let calls = 0;
    const subject = poller(
      tables,
      async (event) => {
        calls++;
        clock ??= Number(event.Records[0]?.dynamodb?.ApproximateCreationDateTime) * 1000;
        clock += 50_000;
        throw new Error("still failing");
      },
      { retryAttempts: -1, maxRecordAgeSeconds: 120, now: () => clock ?? Date.now() },
    );

    await subject.drain();

    expect(calls).toBe(3); // ages 0, 50 and 100 s are invoked; at 150 s the record gives up
    const [failure] = readFailures(subject.failureFile) as [FailureRecord];
    expect(failure.requestContext).toMatchObject({
      condition: "RecordAgeExceeded",
      approximateInvokeCount: 3,
    });
  });

  it("keeps checkpoints in a file so a new poller continues where the last one stopped", async () => {
    const tables = await freshTables();
    const checkpointFile = join(workDir, `checkpoints-${tableCounter}.json`);
    await putMesh(tables, "one");
    await putMesh(tables, "two");
    const firstRun = await poller(tables, ok, { checkpointFile }).drain();
    await putMesh(tables, "three");

    const secondRun = await poller(tables, ok, { checkpointFile }).drain();
    const withoutFile = await poller(tables, ok).drain();

    expect(firstRun.records).toBe(2);
    expect(secondRun).toMatchObject({ records: 1, meshesTouched: ["three"] });
    expect(withoutFile.records).toBe(3); // a poller without a file starts at TRIM_HORIZON
    const saved = JSON.parse(readFileSync(checkpointFile, "utf8")) as Record<string, unknown>;
    expect(Object.keys(saved)).toHaveLength(1);
  });

  it("shares a checkpoint file with other pollers without losing their checkpoints", async () => {
    const first = await freshTables();
    const second = await freshTables();
    const checkpointFile = join(workDir, `shared-checkpoints-${tableCounter}.json`);
    await putMesh(first, "one");
    await putMesh(second, "two");
    // Both load the (empty) file before either writes, like two CLI processes started together.
    const a = poller(first, ok, { checkpointFile });
    const b = poller(second, ok, { checkpointFile });

    await Promise.all([a.drain(), b.drain()]);
    const again = await Promise.all([
      poller(first, ok, { checkpointFile }).drain(),
      poller(second, ok, { checkpointFile }).drain(),
    ]);

    expect(again.map((report) => report.records)).toEqual([0, 0]);
  });

  it("delivers new records while polling continuously, and stops cleanly", async () => {
    const tables = await freshTables();
    const delivered: string[] = [];
    const subject = poller(
      tables,
      async (event) => {
        delivered.push(...event.Records.map((r) => r.dynamodb?.Keys?.name?.S ?? "?"));
        return { batchItemFailures: [] };
      },
      { maxBatchingWindowMs: 100, pollIntervalMs: 50 },
    );
    subject.start();
    try {
      await putMesh(tables, "late");
      await putDataplane(tables, "late", "dp-late");
      const deadline = Date.now() + 20_000;
      while (delivered.length < 2 && Date.now() < deadline) {
        await new Promise((resolve) => setTimeout(resolve, 50));
      }
    } finally {
      await subject.stop();
    }

    expect(delivered.sort()).toEqual(["dp-late", "late"]);
    await expect(subject.drain()).resolves.toMatchObject({ records: 0 });
  });

  it("takes its defaults from the event source settings and rejects bad options by name", async () => {
    const tables = resolveTableNames({});
    expect(() => poller(tables, ok, { batchSize: 0 })).toThrowError(
      /batchSize must be a whole number from 1 to 10000, got 0/,
    );
    expect(() => poller(tables, ok, { retryAttempts: 1.5 })).toThrowError(StreamPollerError);
    expect(poller(tables, ok).settings).toEqual({
      batchSize: EVENT_SOURCE_SETTINGS.batchSize,
      maxBatchingWindowMs: EVENT_SOURCE_SETTINGS.maxBatchingWindowSeconds * 1000,
      retryAttempts: EVENT_SOURCE_SETTINGS.retryAttempts,
      maxRecordAgeSeconds: EVENT_SOURCE_SETTINGS.maxRecordAgeSeconds,
      bisectBatchOnError: EVENT_SOURCE_SETTINGS.bisectBatchOnError,
      pollIntervalMs: EVENT_SOURCE_SETTINGS.pollIntervalMs,
    });
  });

  it("names the table when a stream is missing", async () => {
    const tables = resolveTableNames({ MESHES_TABLE: "no-such-table", DATAPLANES_TABLE: "nope" });
    await expect(poller(tables, ok).drain()).rejects.toThrow(
      /table (no-such-table|nope) does not exist/,
    );
  });
});
