import { randomUUID } from "node:crypto";
import { appendFileSync, mkdirSync, readFileSync, renameSync, writeFileSync } from "node:fs";
import { dirname } from "node:path";
import {
  DescribeTableCommand,
  type DescribeTableCommandOutput,
  DynamoDBClient,
  ResourceNotFoundException,
} from "@aws-sdk/client-dynamodb";
import {
  type _Record,
  DescribeStreamCommand,
  DynamoDBStreamsClient,
  GetRecordsCommand,
  GetShardIteratorCommand,
  type Shard,
  type AttributeValue as StreamsAttributeValue,
  TrimmedDataAccessException,
} from "@aws-sdk/client-dynamodb-streams";
import type {
  AttributeValue,
  DynamoDBBatchResponse,
  DynamoDBRecord,
  DynamoDBStreamEvent,
} from "aws-lambda";
import { EVENT_SOURCE_SETTINGS } from "../allocator/event-source-settings.ts";
import type { StreamHandler } from "../allocator/stream-handler.ts";
import { decodeRecord } from "../store/stream-records.ts";
import type { TableNames } from "../store/table-definitions.ts";
import { clientConfig, type StaticCredentials } from "./aws-clients.ts";

/** Which input table a stream comes from. */
export type InputTable = "meshes" | "dataplanes";

/** Where records that gave up go unless told otherwise (git-ignored). */
export const DEFAULT_FAILURE_FILE = ".local/failures.jsonl";

export interface StreamPollerOptions {
  /** moto_server or another DynamoDB-compatible endpoint; unset means real AWS. */
  readonly endpoint?: string | undefined;
  /** @default AWS_REGION, AWS_DEFAULT_REGION or us-east-1 */
  readonly region?: string | undefined;
  /** @default test/test with an endpoint and no credentials in the environment, else the SDK chain */
  readonly credentials?: StaticCredentials | undefined;
  /** Physical table names; the poller reads the `meshes` and `dataplanes` streams. */
  readonly tables: TableNames;
  readonly handler: StreamHandler;
  /** @default EVENT_SOURCE_SETTINGS.batchSize */
  readonly batchSize?: number;
  /** Continuous polling only; `drain()` never waits for more records. @default EVENT_SOURCE_SETTINGS */
  readonly maxBatchingWindowMs?: number;
  /** Retries of a failing batch (-1 = until the records are too old). @default EVENT_SOURCE_SETTINGS */
  readonly retryAttempts?: number;
  /** Records older than this give up (-1 = never). Lambda's minimum is 60; 0 is allowed locally. */
  readonly maxRecordAgeSeconds?: number;
  /** @default EVENT_SOURCE_SETTINGS.bisectBatchOnError */
  readonly bisectBatchOnError?: boolean;
  /** @default EVENT_SOURCE_SETTINGS.pollIntervalMs */
  readonly pollIntervalMs?: number;
  /** Pause before retrying a failed batch: `retry` counts from 1. @default 50 ms doubling, at most 200 ms */
  readonly retryDelayMs?: (retry: number) => number;
  /** JSON lines, one per batch that gave up. @default DEFAULT_FAILURE_FILE */
  readonly failureFile?: string;
  /** When set, checkpoints survive the process: `{streamArn: {shardId: sequenceNumber}}`. */
  readonly checkpointFile?: string | undefined;
  /** Called after every handler invocation and every batch that gave up. */
  readonly onBatch?: (info: BatchInfo) => void | Promise<void>;
  /** Continuous mode: a poll that failed (the loop keeps going). @default one line on stderr */
  readonly onError?: (error: unknown, table: InputTable) => void;
  /** Milliseconds since the epoch, for record age. @default Date.now */
  readonly now?: () => number;
}

/** The event source mapping settings a poller runs with. */
export interface PollerSettings {
  readonly batchSize: number;
  readonly maxBatchingWindowMs: number;
  readonly retryAttempts: number;
  readonly maxRecordAgeSeconds: number;
  readonly bisectBatchOnError: boolean;
  readonly pollIntervalMs: number;
}

export type BatchOutcome = "ok" | "partial" | "error" | "gave-up";

export interface BatchInfo {
  readonly table: InputTable;
  readonly streamArn: string;
  readonly shardId: string;
  /** The records handed to the handler (or, for "gave-up", sent to the failure file). */
  readonly records: readonly DynamoDBRecord[];
  readonly outcome: BatchOutcome;
  /** "partial": sequence number the poller resumes from. */
  readonly resumeFrom?: string;
  /** "error" and "gave-up": what the handler threw or returned. */
  readonly error?: string;
  /** "gave-up": why. */
  readonly condition?: FailureCondition;
  /** Meshes the records touch, as the allocator decodes them (decodeRecord). */
  readonly meshes: readonly string[];
}

export interface DrainReport {
  /** Records consumed from both streams: processed, or sent to the failure file. */
  readonly records: number;
  /** Batches read from the streams and delivered (before any bisect). */
  readonly batches: number;
  /** Handler invocations, retries and bisected halves included. */
  readonly invocations: number;
  /** Records written to the failure file. */
  readonly failedToDestination: number;
  readonly failureFile: string;
  /** Meshes touched by the consumed records, sorted. */
  readonly meshesTouched: readonly string[];
  readonly durationMs: number;
}

export type FailureCondition = "RetryAttemptsExhausted" | "RecordAgeExceeded";

/** One line of the failure file: Lambda's on-failure record for DynamoDB, plus the keys. */
export interface FailureRecord {
  readonly requestContext: {
    readonly requestId: string;
    readonly functionArn: string;
    readonly condition: FailureCondition;
    readonly approximateInvokeCount: number;
  };
  readonly responseContext?: {
    readonly statusCode: number;
    readonly executedVersion: string;
    readonly functionError?: "Unhandled";
  };
  readonly version: "1.0";
  readonly timestamp: string;
  readonly DDBStreamBatchInfo: {
    readonly shardId: string;
    readonly startSequenceNumber: string;
    readonly endSequenceNumber: string;
    readonly approximateArrivalOfFirstRecord: string;
    readonly approximateArrivalOfLastRecord: string;
    readonly batchSize: number;
    readonly streamArn: string;
  };
  /** Not in Lambda's SQS/SNS record: enough to find the items again. */
  readonly records: ReadonlyArray<{
    readonly eventID: string | undefined;
    readonly eventName: string | undefined;
    readonly sequenceNumber: string;
    readonly keys: Record<string, AttributeValue> | undefined;
  }>;
  readonly lastError?: string;
}

export type StreamPollerErrorCode = "INVALID_OPTION" | "NO_TABLE" | "NO_STREAM" | "ALREADY_RUNNING";

export class StreamPollerError extends Error {
  constructor(
    readonly code: StreamPollerErrorCode,
    message: string,
  ) {
    super(message);
    this.name = "StreamPollerError";
  }
}

/** A stream record with what the poller needs to order and age it. */
interface Entry {
  readonly record: DynamoDBRecord;
  readonly sequence: bigint;
  readonly sequenceNumber: string;
  readonly createdMs: number;
}

interface ShardState {
  readonly table: InputTable;
  readonly streamArn: string;
  readonly shardId: string;
  readonly parentShardId: string | undefined;
  /** The shard has an ending sequence number: no record will be added. */
  readonly closed: boolean;
  /** Closed and read to its end. */
  finished: boolean;
}

interface StreamState {
  readonly table: InputTable;
  readonly tableName: string;
  streamArn: string | undefined;
  shards: ShardState[];
}

/** A slice of a delivered batch still to be invoked (bisect splits one into two). */
interface Pending {
  entries: Entry[];
  /** Failed invocations that counted as retries (splits do not, as in Lambda). */
  retries: number;
  /** Invocations that included these records. */
  invocations: number;
  lastError: string | undefined;
  functionError: boolean;
}

interface Counters {
  records: number;
  batches: number;
  invocations: number;
  failedToDestination: number;
  meshes: Set<string>;
}

type Invocation =
  | { readonly kind: "ok" }
  | { readonly kind: "partial"; readonly index: number }
  | { readonly kind: "error"; readonly error: string };

const DESCRIBE_EVERY_POLLS = 8;
const EMPTY_PAGES_ON_CLOSED_SHARD = 5;

function checkRange(name: string, value: number, min: number, max: number): number {
  if (!Number.isInteger(value) || value < min || value > max) {
    throw new StreamPollerError(
      "INVALID_OPTION",
      `${name} must be a whole number from ${min} to ${max}, got ${value}`,
    );
  }
  return value;
}

function describeError(error: unknown): string {
  if (error instanceof Error) return `${error.name}: ${error.message}`;
  return String(error);
}

/**
 * SDK stream AttributeValue (Uint8Array binaries) to Lambda's JSON form (base64 strings).
 *
 * Never throws: moto returns some values mangled (a map entry under the key `""` arrives as a
 * bare string instead of `{S: ...}`). A bare string or number is converted to what it must have
 * been; anything else becomes `NULL` and is named in `problems`, so the handler reads the rest
 * of the record (and reports the field as bad input if it matters) instead of the poller dying.
 */
export function toLambdaAttributeValue(
  value: StreamsAttributeValue,
  problems: string[] = [],
  path = "",
): AttributeValue {
  if (typeof value === "string") return { S: value };
  if (typeof value === "number") return { N: String(value) };
  if (typeof value !== "object" || value === null) {
    problems.push(`${path || "(value)"}: not an attribute value (${typeof value})`);
    return { NULL: true };
  }
  if (value.B !== undefined) return { B: Buffer.from(value.B).toString("base64") };
  if (value.BS !== undefined) {
    return { BS: value.BS.map((b) => Buffer.from(b).toString("base64")) };
  }
  if (value.L !== undefined) {
    return {
      L: value.L.map((entry, i) => toLambdaAttributeValue(entry, problems, `${path}[${i}]`)),
    };
  }
  if (value.M !== undefined) return { M: toLambdaImage(value.M, problems, path) };
  if (value.S !== undefined) return { S: value.S };
  if (value.N !== undefined) return { N: value.N };
  if (value.BOOL !== undefined) return { BOOL: value.BOOL };
  if (value.NULL !== undefined) return { NULL: value.NULL };
  if (value.SS !== undefined) return { SS: [...value.SS] };
  if (value.NS !== undefined) return { NS: [...value.NS] };
  problems.push(
    `${path || "(value)"}: unknown attribute value type ${JSON.stringify(Object.keys(value))}`,
  );
  return { NULL: true };
}

function toLambdaImage(
  image: Record<string, StreamsAttributeValue> | undefined,
  problems: string[] = [],
  path = "",
): Record<string, AttributeValue> {
  // No prototype: a key such as `__proto__` is data.
  const out = Object.create(null) as Record<string, AttributeValue>;
  for (const name of Object.keys(image ?? {})) {
    const value = (image as Record<string, StreamsAttributeValue>)[name] as StreamsAttributeValue;
    out[name] = toLambdaAttributeValue(value, problems, path === "" ? name : `${path}.${name}`);
  }
  return out;
}

/**
 * A GetRecords record in the exact shape Lambda hands to a function: `eventSourceARN` added,
 * `ApproximateCreationDateTime` in epoch seconds, binaries as base64 strings.
 */
export function toLambdaRecord(
  record: _Record,
  streamArn: string,
  fallbackRegion: string,
  problems: string[] = [],
): DynamoDBRecord {
  const source = record.dynamodb ?? {};
  const created = source.ApproximateCreationDateTime;
  const dynamodb: NonNullable<DynamoDBRecord["dynamodb"]> = {
    ...(created !== undefined
      ? { ApproximateCreationDateTime: Math.floor(created.getTime() / 1000) }
      : {}),
    ...(source.Keys !== undefined ? { Keys: toLambdaImage(source.Keys, problems, "Keys") } : {}),
    ...(source.NewImage !== undefined
      ? { NewImage: toLambdaImage(source.NewImage, problems, "NewImage") }
      : {}),
    ...(source.OldImage !== undefined
      ? { OldImage: toLambdaImage(source.OldImage, problems, "OldImage") }
      : {}),
    ...(source.SequenceNumber !== undefined ? { SequenceNumber: source.SequenceNumber } : {}),
    ...(source.SizeBytes !== undefined ? { SizeBytes: source.SizeBytes } : {}),
    ...(source.StreamViewType !== undefined ? { StreamViewType: source.StreamViewType } : {}),
  };
  return {
    eventID: record.eventID,
    eventName: record.eventName,
    eventVersion: record.eventVersion,
    eventSource: record.eventSource ?? "aws:dynamodb",
    awsRegion: record.awsRegion ?? fallbackRegion,
    dynamodb,
    eventSourceARN: streamArn,
    ...(record.userIdentity !== undefined ? { userIdentity: record.userIdentity } : {}),
  };
}

function tableNameOfStreamArn(streamArn: string): string | undefined {
  return /:table\/([^/]+)\/stream\//.exec(streamArn)?.[1];
}

/**
 * Plays Lambda's DynamoDB event source mapping for the `meshes` and `dataplanes` streams:
 * per shard, in order, one batch in flight; `ReportBatchItemFailures` (resume from the lowest
 * reported sequence number), bisect on error, bounded retries and record age, and a JSON-lines
 * failure destination. Defaults come from {@link EVENT_SOURCE_SETTINGS}, as in the CDK stack.
 *
 * Iterators are re-acquired after the last checkpoint on every read: moto's iterator chains
 * can go stale (shared research §5.3), and a fresh iterator costs one local call.
 */
export class StreamPoller {
  private readonly ddb: DynamoDBClient;
  private readonly streams: DynamoDBStreamsClient;
  private readonly region: string;
  private readonly handler: StreamHandler;
  private readonly batchSize: number;
  private readonly maxBatchingWindowMs: number;
  private readonly retryAttempts: number;
  private readonly maxRecordAgeSeconds: number;
  private readonly bisect: boolean;
  private readonly pollIntervalMs: number;
  private readonly retryDelayMs: (retry: number) => number;
  readonly failureFile: string;
  readonly settings: PollerSettings;
  private readonly checkpointFile: string | undefined;
  private readonly onBatch: StreamPollerOptions["onBatch"];
  private readonly onError: (error: unknown, table: InputTable) => void;
  private readonly now: () => number;
  private readonly tables: TableNames;
  private readonly state: StreamState[];
  /** streamArn -> shardId -> last processed sequence number. */
  private checkpoints: Record<string, Record<string, string>> | undefined;
  private running = false;
  private busy = false;
  private loops: Promise<void>[] = [];
  private readonly wakers = new Set<() => void>();

  constructor(options: StreamPollerOptions) {
    const config = clientConfig({
      endpoint: options.endpoint,
      region: options.region,
      credentials: options.credentials,
    });
    this.region = config.region;
    this.ddb = new DynamoDBClient(config);
    this.streams = new DynamoDBStreamsClient(config);
    this.handler = options.handler;
    this.batchSize = checkRange(
      "batchSize",
      options.batchSize ?? EVENT_SOURCE_SETTINGS.batchSize,
      1,
      10_000,
    );
    this.maxBatchingWindowMs = checkRange(
      "maxBatchingWindowMs",
      options.maxBatchingWindowMs ?? EVENT_SOURCE_SETTINGS.maxBatchingWindowSeconds * 1000,
      0,
      300_000,
    );
    this.retryAttempts = checkRange(
      "retryAttempts",
      options.retryAttempts ?? EVENT_SOURCE_SETTINGS.retryAttempts,
      -1,
      10_000,
    );
    this.maxRecordAgeSeconds = checkRange(
      "maxRecordAgeSeconds",
      options.maxRecordAgeSeconds ?? EVENT_SOURCE_SETTINGS.maxRecordAgeSeconds,
      -1,
      604_800,
    );
    this.bisect = options.bisectBatchOnError ?? EVENT_SOURCE_SETTINGS.bisectBatchOnError;
    this.pollIntervalMs = checkRange(
      "pollIntervalMs",
      options.pollIntervalMs ?? EVENT_SOURCE_SETTINGS.pollIntervalMs,
      1,
      60_000,
    );
    this.retryDelayMs = options.retryDelayMs ?? ((retry) => Math.min(200, 50 * 2 ** (retry - 1)));
    this.failureFile = options.failureFile ?? DEFAULT_FAILURE_FILE;
    this.settings = {
      batchSize: this.batchSize,
      maxBatchingWindowMs: this.maxBatchingWindowMs,
      retryAttempts: this.retryAttempts,
      maxRecordAgeSeconds: this.maxRecordAgeSeconds,
      bisectBatchOnError: this.bisect,
      pollIntervalMs: this.pollIntervalMs,
    };
    this.checkpointFile = options.checkpointFile;
    this.onBatch = options.onBatch;
    this.onError =
      options.onError ??
      ((error, table) => {
        process.stderr.write(`poller: ${table} stream: ${describeError(error)}\n`);
      });
    this.now = options.now ?? Date.now;
    this.tables = options.tables;
    this.state = [
      { table: "meshes", tableName: options.tables.meshes, streamArn: undefined, shards: [] },
      {
        table: "dataplanes",
        tableName: options.tables.dataplanes,
        streamArn: undefined,
        shards: [],
      },
    ];
  }

  /**
   * Processes every record written so far on both streams (the streams in parallel, each shard
   * in order), then resolves. Never waits for a batching window: nothing more is coming.
   */
  async drain(): Promise<DrainReport> {
    if (this.running || this.busy) {
      throw new StreamPollerError("ALREADY_RUNNING", "drain() while the poller is running");
    }
    this.busy = true;
    const started = this.now();
    const counters: Counters = {
      records: 0,
      batches: 0,
      invocations: 0,
      failedToDestination: 0,
      meshes: new Set(),
    };
    try {
      const results = await Promise.allSettled(
        this.state.map(async (stream) => {
          for (;;) {
            await this.discover(stream);
            const before = counters.records;
            const finishedBefore = stream.shards.filter((s) => s.finished).length;
            for (const shard of this.readyShards(stream)) {
              await this.consumeShard(shard, counters, false);
            }
            const finishedAfter = stream.shards.filter((s) => s.finished).length;
            if (counters.records === before && finishedAfter === finishedBefore) break;
          }
        }),
      );
      for (const result of results) if (result.status === "rejected") throw result.reason;
    } finally {
      this.busy = false;
    }
    return {
      records: counters.records,
      batches: counters.batches,
      invocations: counters.invocations,
      failedToDestination: counters.failedToDestination,
      failureFile: this.failureFile,
      meshesTouched: [...counters.meshes].sort(),
      durationMs: this.now() - started,
    };
  }

  /** Polls both streams continuously (about every pollIntervalMs when caught up). */
  start(): void {
    if (this.running) return;
    if (this.busy) throw new StreamPollerError("ALREADY_RUNNING", "start() during drain()");
    this.running = true;
    this.loops = this.state.map((stream) => this.run(stream));
  }

  /**
   * Stops polling. Resolves once the invocations in flight have returned; what is left of their
   * batches (retries, bisected halves) is not checkpointed, so it is read again next time.
   */
  async stop(): Promise<void> {
    this.running = false;
    for (const wake of this.wakers) wake();
    await Promise.all(this.loops);
    this.loops = [];
  }

  /** Releases the SDK clients' sockets. */
  destroy(): void {
    this.ddb.destroy();
    this.streams.destroy();
  }

  private async run(stream: StreamState): Promise<void> {
    const counters: Counters = {
      records: 0,
      batches: 0,
      invocations: 0,
      failedToDestination: 0,
      meshes: new Set(),
    };
    let polls = 0;
    let lastError: string | undefined;
    while (this.running) {
      try {
        if (polls % DESCRIBE_EVERY_POLLS === 0 || stream.streamArn === undefined) {
          await this.discover(stream);
        }
        for (const shard of this.readyShards(stream)) {
          if (!this.running) break;
          await this.consumeShard(shard, counters, true);
        }
        lastError = undefined;
      } catch (error) {
        // Report a failing poll once, not four times a second.
        if (describeError(error) !== lastError) this.onError(error, stream.table);
        lastError = describeError(error);
        stream.streamArn = undefined;
      }
      polls++;
      await this.sleep(this.pollIntervalMs);
    }
  }

  private sleep(ms: number): Promise<void> {
    if (ms <= 0) return Promise.resolve();
    return new Promise((resolve) => {
      const done = (): void => {
        clearTimeout(timer);
        this.wakers.delete(done);
        resolve();
      };
      const timer = setTimeout(done, ms);
      this.wakers.add(done);
    });
  }

  /** Finds the table's current stream and its shards (new shards appear as old ones close). */
  private async discover(stream: StreamState): Promise<void> {
    let table: DescribeTableCommandOutput;
    try {
      table = await this.ddb.send(new DescribeTableCommand({ TableName: stream.tableName }));
    } catch (error) {
      if (!(error instanceof ResourceNotFoundException)) throw error;
      throw new StreamPollerError(
        "NO_TABLE",
        `table ${stream.tableName} does not exist; create it with \`tables create\``,
      );
    }
    const streamArn = table.Table?.LatestStreamArn;
    if (streamArn === undefined || table.Table?.StreamSpecification?.StreamEnabled === false) {
      throw new StreamPollerError(
        "NO_STREAM",
        `table ${stream.tableName} has no stream; create it with \`tables create\``,
      );
    }
    if (stream.streamArn !== streamArn) {
      stream.streamArn = streamArn;
      stream.shards = [];
    }
    const shards: Shard[] = [];
    let exclusiveStartShardId: string | undefined;
    do {
      const described = await this.streams.send(
        new DescribeStreamCommand({
          StreamArn: streamArn,
          ...(exclusiveStartShardId !== undefined
            ? { ExclusiveStartShardId: exclusiveStartShardId }
            : {}),
        }),
      );
      shards.push(...(described.StreamDescription?.Shards ?? []));
      exclusiveStartShardId = described.StreamDescription?.LastEvaluatedShardId;
    } while (exclusiveStartShardId !== undefined);
    for (const shard of shards) {
      if (shard.ShardId === undefined) continue;
      const closed = shard.SequenceNumberRange?.EndingSequenceNumber !== undefined;
      const known = stream.shards.find((s) => s.shardId === shard.ShardId);
      if (known === undefined) {
        stream.shards.push({
          table: stream.table,
          streamArn,
          shardId: shard.ShardId,
          parentShardId: shard.ParentShardId,
          closed,
          finished: false,
        });
      } else if (closed && !known.closed) {
        const index = stream.shards.indexOf(known);
        stream.shards[index] = { ...known, closed };
      }
    }
  }

  /** Open or unfinished shards whose parent (if still listed) has been read to its end. */
  private readyShards(stream: StreamState): ShardState[] {
    return stream.shards.filter((shard) => {
      if (shard.finished) return false;
      const parent = stream.shards.find((s) => s.shardId === shard.parentShardId);
      return parent === undefined || parent.finished;
    });
  }

  /** Reads and delivers batches from one shard until it is caught up (or stopped). */
  private async consumeShard(
    shard: ShardState,
    counters: Counters,
    continuous: boolean,
  ): Promise<void> {
    for (;;) {
      if (continuous && !this.running) return;
      let { entries, ended } = await this.read(shard, this.checkpointOf(shard), this.batchSize);
      if (entries.length === 0) {
        if (ended) shard.finished = true;
        return;
      }
      if (continuous && this.maxBatchingWindowMs > 0 && entries.length < this.batchSize && !ended) {
        ({ entries, ended } = await this.fillWindow(shard, entries));
        if (!this.running) return; // nothing checkpointed: read again next time
      }
      counters.batches++;
      const complete = await this.deliver(shard, entries, counters, continuous);
      if (!complete) return;
      if (ended) {
        shard.finished = true;
        return;
      }
    }
  }

  /** Lambda's MaximumBatchingWindow: keep reading until the batch is full or the window ends. */
  private async fillWindow(
    shard: ShardState,
    first: Entry[],
  ): Promise<{ entries: Entry[]; ended: boolean }> {
    const entries = [...first];
    const deadline = this.now() + this.maxBatchingWindowMs;
    while (this.running && entries.length < this.batchSize) {
      const remaining = deadline - this.now();
      if (remaining <= 0) break;
      await this.sleep(Math.min(this.pollIntervalMs, remaining));
      const last = entries[entries.length - 1];
      const more = await this.read(shard, last?.sequenceNumber, this.batchSize - entries.length);
      entries.push(...more.entries);
      if (more.ended) return { entries, ended: true };
    }
    return { entries, ended: false };
  }

  /** One read with a fresh iterator after `after` (or from the trim horizon). */
  private async read(
    shard: ShardState,
    after: string | undefined,
    limit: number,
  ): Promise<{ entries: Entry[]; ended: boolean }> {
    let iterator: string | undefined;
    try {
      iterator = await this.iterator(shard, after);
    } catch (error) {
      if (!(error instanceof TrimmedDataAccessException) || after === undefined) throw error;
      // The checkpoint fell behind the 24 h retention: what it pointed at is gone.
      this.onError(
        new Error(`checkpoint ${after} of ${shard.shardId} was trimmed; reading from TRIM_HORIZON`),
        shard.table,
      );
      iterator = await this.iterator(shard, undefined);
    }
    for (let page = 0; iterator !== undefined; page++) {
      const out = await this.streams.send(
        new GetRecordsCommand({ ShardIterator: iterator, Limit: limit }),
      );
      const records = out.Records ?? [];
      const ended = out.NextShardIterator === undefined || out.NextShardIterator === null;
      if (records.length > 0 || ended) {
        return { entries: records.map((r) => this.entryOf(r, shard.streamArn)), ended };
      }
      // An open shard with nothing new is caught up; a closed one may hold empty pages.
      if (!shard.closed || page >= EMPTY_PAGES_ON_CLOSED_SHARD) break;
      iterator = out.NextShardIterator;
    }
    return { entries: [], ended: false };
  }

  private async iterator(
    shard: ShardState,
    after: string | undefined,
  ): Promise<string | undefined> {
    const out = await this.streams.send(
      new GetShardIteratorCommand({
        StreamArn: shard.streamArn,
        ShardId: shard.shardId,
        ...(after !== undefined
          ? { ShardIteratorType: "AFTER_SEQUENCE_NUMBER", SequenceNumber: after }
          : { ShardIteratorType: "TRIM_HORIZON" }),
      }),
    );
    return out.ShardIterator;
  }

  private entryOf(record: _Record, streamArn: string): Entry {
    const sequenceNumber = record.dynamodb?.SequenceNumber;
    if (sequenceNumber === undefined) {
      throw new Error(`stream record ${record.eventID} has no SequenceNumber`);
    }
    const problems: string[] = [];
    const lambdaRecord = toLambdaRecord(record, streamArn, this.region, problems);
    if (problems.length > 0) {
      // Delivered anyway: the handler reads the item from the table; this names what was lost.
      process.stderr.write(
        `${JSON.stringify({
          level: "WARN",
          message: "stream record converted with values that could not be read",
          streamArn,
          sequenceNumber,
          keys: record.dynamodb?.Keys,
          problems,
        })}\n`,
      );
    }
    return {
      record: lambdaRecord,
      sequence: BigInt(sequenceNumber),
      sequenceNumber,
      createdMs: record.dynamodb?.ApproximateCreationDateTime?.getTime() ?? this.now(),
    };
  }

  /**
   * Delivers one batch the way Lambda does: partial failures resume from the lowest reported
   * sequence number, errors bisect the batch (splits are not retries), each remaining failure
   * is a retry, and records that run out of retries or age go to the failure file.
   */
  private async deliver(
    shard: ShardState,
    entries: Entry[],
    counters: Counters,
    continuous: boolean,
  ): Promise<boolean> {
    const stack: Pending[] = [
      { entries, retries: 0, invocations: 0, lastError: undefined, functionError: false },
    ];
    while (stack.length > 0) {
      // Stopping abandons what is not checkpointed; it is read again after a restart.
      if (continuous && !this.running) return false;
      const head = stack[0] as Pending;
      const expired = this.expiredPrefix(head.entries);
      if (expired > 0) {
        await this.giveUp(
          shard,
          head,
          head.entries.slice(0, expired),
          "RecordAgeExceeded",
          counters,
        );
        head.entries = head.entries.slice(expired);
        if (head.entries.length === 0) stack.shift();
        continue;
      }
      const result = await this.invoke(shard, head, counters);
      if (result.kind === "ok") {
        this.advance(shard, head.entries, counters);
        stack.shift();
        continue;
      }
      if (result.kind === "partial") {
        this.advance(shard, head.entries.slice(0, result.index), counters);
        head.entries = head.entries.slice(result.index);
        head.lastError = "the handler reported batch item failures";
        head.functionError = false;
      } else {
        head.lastError = result.error;
        head.functionError = true;
        if (this.bisect && head.entries.length > 1) {
          const half = Math.ceil(head.entries.length / 2);
          const split = (part: Entry[]): Pending => ({ ...head, entries: part });
          stack.splice(0, 1, split(head.entries.slice(0, half)), split(head.entries.slice(half)));
          continue;
        }
      }
      head.retries++;
      if (this.retryAttempts >= 0 && head.retries > this.retryAttempts) {
        await this.giveUp(shard, head, head.entries, "RetryAttemptsExhausted", counters);
        stack.shift();
        continue;
      }
      await this.sleep(this.retryDelayMs(head.retries));
    }
    return true;
  }

  /** How many leading records are older than maxRecordAgeSeconds. */
  private expiredPrefix(entries: readonly Entry[]): number {
    if (this.maxRecordAgeSeconds < 0) return 0;
    const limitMs = this.maxRecordAgeSeconds * 1000;
    const now = this.now();
    let count = 0;
    while (count < entries.length && now - (entries[count] as Entry).createdMs > limitMs) count++;
    return count;
  }

  private async invoke(
    shard: ShardState,
    pending: Pending,
    counters: Counters,
  ): Promise<Invocation> {
    const records = pending.entries.map((e) => e.record);
    const event: DynamoDBStreamEvent = { Records: records };
    counters.invocations++;
    pending.invocations++;
    let result: Invocation;
    try {
      const response: DynamoDBBatchResponse | undefined | null = await this.handler(event);
      result = this.interpret(response, pending.entries);
    } catch (error) {
      result = { kind: "error", error: describeError(error) };
    }
    const partial = result.kind === "partial" ? pending.entries[result.index] : undefined;
    await this.onBatch?.({
      table: shard.table,
      streamArn: shard.streamArn,
      shardId: shard.shardId,
      records,
      outcome: result.kind,
      ...(partial !== undefined ? { resumeFrom: partial.sequenceNumber } : {}),
      ...(result.kind === "error" ? { error: result.error } : {}),
      meshes: this.meshesOf(pending.entries),
    });
    return result;
  }

  /**
   * Lambda's reading of a `ReportBatchItemFailures` response: none = success; the lowest
   * reported sequence number = resume point; an entry that is empty or names no record of the
   * batch = the whole batch failed.
   */
  private interpret(response: unknown, entries: readonly Entry[]): Invocation {
    if (response === undefined || response === null) return { kind: "ok" };
    const failures = (response as { batchItemFailures?: unknown }).batchItemFailures;
    if (failures === undefined || failures === null) return { kind: "ok" };
    if (!Array.isArray(failures)) {
      return { kind: "error", error: "batchItemFailures is not a list" };
    }
    if (failures.length === 0) return { kind: "ok" };
    let lowest: number | undefined;
    for (const failure of failures) {
      const id = (failure as { itemIdentifier?: unknown } | null)?.itemIdentifier;
      if (typeof id !== "string" || id === "") {
        return { kind: "error", error: `batchItemFailures entry without itemIdentifier` };
      }
      const index = entries.findIndex((e) => e.sequenceNumber === id);
      if (index < 0) {
        return { kind: "error", error: `batchItemFailures names ${id}, not in the batch` };
      }
      const entry = entries[index] as Entry;
      if (lowest === undefined || entry.sequence < (entries[lowest] as Entry).sequence) {
        lowest = index;
      }
    }
    return lowest === undefined ? { kind: "ok" } : { kind: "partial", index: lowest };
  }

  private meshesOf(entries: readonly Entry[]): string[] {
    const meshes = new Set<string>();
    for (const entry of entries) {
      const decoded = decodeRecord(entry.record, this.tables);
      if (decoded.ok) for (const mesh of decoded.meshes) meshes.add(mesh);
    }
    return [...meshes].sort();
  }

  /** Checkpoints past `entries` (already processed) and counts them. */
  private advance(shard: ShardState, entries: readonly Entry[], counters: Counters): void {
    const last = entries[entries.length - 1];
    if (last === undefined) return;
    counters.records += entries.length;
    for (const mesh of this.meshesOf(entries)) counters.meshes.add(mesh);
    this.setCheckpoint(shard, last.sequenceNumber);
  }

  private async giveUp(
    shard: ShardState,
    pending: Pending,
    entries: readonly Entry[],
    condition: FailureCondition,
    counters: Counters,
  ): Promise<void> {
    const first = entries[0] as Entry;
    const last = entries[entries.length - 1] as Entry;
    const line: FailureRecord = {
      requestContext: {
        requestId: randomUUID(),
        functionArn: "local:stream-handler",
        condition,
        approximateInvokeCount: pending.invocations,
      },
      ...(pending.invocations > 0
        ? {
            responseContext: {
              statusCode: 200,
              executedVersion: "$LATEST",
              ...(pending.functionError ? { functionError: "Unhandled" as const } : {}),
            },
          }
        : {}),
      version: "1.0",
      timestamp: new Date(this.now()).toISOString(),
      DDBStreamBatchInfo: {
        shardId: shard.shardId,
        startSequenceNumber: first.sequenceNumber,
        endSequenceNumber: last.sequenceNumber,
        approximateArrivalOfFirstRecord: new Date(first.createdMs).toISOString(),
        approximateArrivalOfLastRecord: new Date(last.createdMs).toISOString(),
        batchSize: entries.length,
        streamArn: shard.streamArn,
      },
      records: entries.map((e) => ({
        eventID: e.record.eventID,
        eventName: e.record.eventName,
        sequenceNumber: e.sequenceNumber,
        keys: e.record.dynamodb?.Keys,
      })),
      ...(pending.lastError !== undefined ? { lastError: pending.lastError } : {}),
    };
    mkdirSync(dirname(this.failureFile), { recursive: true });
    appendFileSync(this.failureFile, `${JSON.stringify(line)}\n`);
    counters.failedToDestination += entries.length;
    this.advance(shard, entries, counters);
    await this.onBatch?.({
      table: shard.table,
      streamArn: shard.streamArn,
      shardId: shard.shardId,
      records: entries.map((e) => e.record),
      outcome: "gave-up",
      condition,
      ...(pending.lastError !== undefined ? { error: pending.lastError } : {}),
      meshes: this.meshesOf(entries),
    });
  }

  /** The checkpoint file's content; {} when it is missing or unreadable. */
  private readCheckpointFile(): Record<string, Record<string, string>> {
    if (this.checkpointFile === undefined) return {};
    try {
      const parsed: unknown = JSON.parse(readFileSync(this.checkpointFile, "utf8"));
      if (parsed !== null && typeof parsed === "object" && !Array.isArray(parsed)) {
        return parsed as Record<string, Record<string, string>>;
      }
    } catch (error) {
      if ((error as NodeJS.ErrnoException).code === "ENOENT") return {};
    }
    this.onError(new Error(`ignoring unreadable checkpoint file ${this.checkpointFile}`), "meshes");
    return {};
  }

  private loadCheckpoints(): Record<string, Record<string, string>> {
    this.checkpoints ??= this.readCheckpointFile();
    return this.checkpoints;
  }

  private checkpointOf(shard: ShardState): string | undefined {
    return this.loadCheckpoints()[shard.streamArn]?.[shard.shardId];
  }

  /**
   * Records progress in memory and, with a checkpoint file, on disk. Other processes may share
   * the file (a `watch` and a `drain` on one endpoint), so each write re-reads it, keeps their
   * entries, takes the higher sequence number where both read the same shard, and replaces the
   * file atomically (rename). Only two writes landing within the same instant can still lose
   * one; the cost of that is reprocessing, which the allocator tolerates.
   */
  private setCheckpoint(shard: ShardState, sequenceNumber: string): void {
    const checkpoints = this.loadCheckpoints();
    checkpoints[shard.streamArn] = {
      ...checkpoints[shard.streamArn],
      [shard.shardId]: sequenceNumber,
    };
    if (this.checkpointFile === undefined) return;
    const merged = this.readCheckpointFile();
    for (const [streamArn, shards] of Object.entries(checkpoints)) {
      const target = { ...merged[streamArn] };
      for (const [shardId, ours] of Object.entries(shards)) {
        const theirs = target[shardId];
        target[shardId] =
          theirs !== undefined && /^\d+$/.test(theirs) && BigInt(theirs) > BigInt(ours)
            ? theirs
            : ours;
      }
      merged[streamArn] = target;
    }
    // Forget older streams of our tables (a recreated table has a new stream).
    const current = new Map(this.state.map((s) => [s.tableName, s.streamArn]));
    for (const streamArn of Object.keys(merged)) {
      const tableName = tableNameOfStreamArn(streamArn);
      const live = tableName !== undefined ? current.get(tableName) : undefined;
      if (live !== undefined && live !== streamArn) {
        delete merged[streamArn];
        delete checkpoints[streamArn];
      }
    }
    mkdirSync(dirname(this.checkpointFile), { recursive: true });
    const temporary = `${this.checkpointFile}.${process.pid}.${randomUUID()}.tmp`;
    writeFileSync(temporary, `${JSON.stringify(merged, null, 2)}\n`);
    renameSync(temporary, this.checkpointFile);
  }
}
