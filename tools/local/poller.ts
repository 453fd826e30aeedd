import { DynamoDBClient } from "@aws-sdk/client-dynamodb";
import { DynamoDBStreamsClient } from "@aws-sdk/client-dynamodb-streams";
import type { StreamHandler } from "../../functions/allocator/handlers.ts";
import { decodeRecord } from "../../functions/store/stream-records.ts";
import type { TableNames } from "../../functions/store/table-definitions.ts";
import { clientConfig, resolveRegion } from "./aws-clients.ts";
import { type BatchEntry, deliverBatch, describeError, type GaveUp } from "./batch-delivery.ts";
import { Checkpoints } from "./checkpoint-file.ts";
import { appendFailureRecord, DEFAULT_FAILURE_FILE, failureRecord } from "./failure-destination.ts";
import {
  type DrainReport,
  inputStreams,
  type PollerSettings,
  resolvePollerSettings,
  type StreamPollerOptions,
} from "./poller-options.ts";
import {
  type InputTable,
  ShardReader,
  type ShardState,
  StreamPollerError,
  type StreamState,
} from "./shard-reader.ts";

// What other modules import from the poller.
export type { BatchEntry, FailureCondition } from "./batch-delivery.ts";
export { DEFAULT_FAILURE_FILE, type FailureRecord } from "./failure-destination.ts";
export { toLambdaAttributeValue, toLambdaRecord } from "./lambda-event.ts";
export type {
  BatchInfo,
  BatchOutcome,
  DrainReport,
  PollerSettings,
  StreamPollerOptions,
} from "./poller-options.ts";
export {
  type InputTable,
  StreamPollerError,
  type StreamPollerErrorCode,
  type StreamRecordIssue,
} from "./shard-reader.ts";

interface Counters {
  records: number;
  batches: number;
  invocations: number;
  failedToDestination: number;
  meshes: Set<string>;
}

const DESCRIBE_EVERY_POLLS = 8;

/**
 * Plays Lambda's DynamoDB event source mapping for the `meshes` and `dataplanes` streams:
 * per shard, in order, one batch in flight; `ReportBatchItemFailures` (resume from the lowest
 * reported sequence number), bisect on error, bounded retries and record age, and a JSON-lines
 * failure destination. Defaults come from {@link EVENT_SOURCE_SETTINGS}, as in the CDK stack.
 *
 * The composition of its parts: the shard reader (`shard-reader.ts`), the Lambda event shape
 * (`lambda-event.ts`), batch delivery (`batch-delivery.ts`), the failure destination
 * (`failure-destination.ts`) and the checkpoints (`checkpoint-file.ts`).
 */
export class StreamPoller {
  private readonly ddb: DynamoDBClient;
  private readonly streams: DynamoDBStreamsClient;
  private readonly reader: ShardReader;
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
  private readonly checkpoints: Checkpoints;
  private readonly onBatch: StreamPollerOptions["onBatch"];
  private readonly onError: (error: unknown, table: InputTable) => void;
  private readonly now: () => number;
  private readonly tables: TableNames;
  private readonly state: StreamState[];
  private running = false;
  private busy = false;
  private loops: Promise<void>[] = [];
  private readonly wakers = new Set<() => void>();
  private readonly ownsClient: boolean;

  constructor(options: StreamPollerOptions) {
    const config = clientConfig({
      endpoint: options.endpoint,
      region: options.region,
      credentials: options.credentials,
    });
    this.ownsClient = options.client === undefined;
    this.ddb = options.client ?? new DynamoDBClient(config);
    this.streams = new DynamoDBStreamsClient(config);
    this.handler = options.handler;
    this.settings = resolvePollerSettings(options);
    this.batchSize = this.settings.batchSize;
    this.maxBatchingWindowMs = this.settings.maxBatchingWindowMs;
    this.retryAttempts = this.settings.retryAttempts;
    this.maxRecordAgeSeconds = this.settings.maxRecordAgeSeconds;
    this.bisect = this.settings.bisectBatchOnError;
    this.pollIntervalMs = this.settings.pollIntervalMs;
    this.retryDelayMs = options.retryDelayMs ?? ((retry) => Math.min(200, 50 * 2 ** (retry - 1)));
    this.failureFile = options.failureFile ?? DEFAULT_FAILURE_FILE;
    this.onBatch = options.onBatch;
    this.onError =
      options.onError ??
      ((error, table) => {
        process.stderr.write(`poller: ${table} stream: ${describeError(error)}\n`);
      });
    this.now = options.now ?? Date.now;
    this.tables = options.tables;
    this.state = inputStreams(options.tables);
    this.reader = new ShardReader({
      ddb: this.ddb,
      streams: this.streams,
      // By now the CLI has settled the region (from --region, the environment or the profile).
      region: config.region ?? resolveRegion(),
      now: () => this.now(),
      onError: (error, table) => this.onError(error, table),
      onBadInput:
        options.onBadInput ??
        ((issue) => {
          process.stderr.write(
            `${JSON.stringify({ level: "WARN", message: "bad input in a stream record", ...issue })}\n`,
          );
        }),
    });
    this.checkpoints = new Checkpoints(
      options.checkpointFile,
      (error) => this.onError(error, "meshes"),
      () => new Map(this.state.map((s) => [s.tableName, s.streamArn])),
    );
  }

  /**
   * Processes every record written so far on every stream (the dataplanes and external-services
   * streams first, so the membership index is complete when the meshes' own records are
   * handled; each shard in order), then resolves. Never waits for a batching window: nothing more is coming.
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
      let failure: { error: unknown } | undefined;
      // Contributors (dataplanes, external services) before the meshes.
      const byTable = [...this.state].sort(
        (a, b) => Number(a.table === "meshes") - Number(b.table === "meshes"),
      );
      for (const stream of byTable) {
        try {
          for (;;) {
            await this.reader.discover(stream);
            const before = counters.records;
            const finishedBefore = stream.shards.filter((s) => s.finished).length;
            for (const shard of this.reader.readyShards(stream)) {
              await this.consumeShard(shard, counters, false);
            }
            const finishedAfter = stream.shards.filter((s) => s.finished).length;
            if (counters.records === before && finishedAfter === finishedBefore) break;
          }
        } catch (error) {
          failure ??= { error };
        }
      }
      if (failure !== undefined) throw failure.error;
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
    if (this.ownsClient) this.ddb.destroy();
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
          await this.reader.discover(stream);
        }
        for (const shard of this.reader.readyShards(stream)) {
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
    first: BatchEntry[],
  ): Promise<{ entries: BatchEntry[]; ended: boolean }> {
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

  private checkpointOf(shard: ShardState): string | undefined {
    return this.checkpoints.get(shard.streamArn, shard.shardId);
  }

  private read(
    shard: ShardState,
    after: string | undefined,
    limit: number,
  ): Promise<{ entries: BatchEntry[]; ended: boolean }> {
    return this.reader.read(shard, after, limit);
  }

  /** One batch through {@link deliverBatch}, checkpointing and reporting as it goes. */
  private async deliver(
    shard: ShardState,
    entries: BatchEntry[],
    counters: Counters,
    continuous: boolean,
  ): Promise<boolean> {
    const result = await deliverBatch(entries, {
      invoke: (event) => this.handler(event),
      settings: {
        retryAttempts: this.retryAttempts,
        maxRecordAgeSeconds: this.maxRecordAgeSeconds,
        bisectBatchOnError: this.bisect,
      },
      now: this.now,
      sleep: (ms) => this.sleep(ms),
      retryDelayMs: this.retryDelayMs,
      stopped: () => continuous && !this.running,
      hooks: {
        invoked: async (invoked, result) => {
          counters.invocations++;
          const partial = result.kind === "partial" ? invoked[result.index] : undefined;
          await this.onBatch?.({
            table: shard.table,
            streamArn: shard.streamArn,
            shardId: shard.shardId,
            records: invoked.map((e) => e.record),
            outcome: result.kind,
            ...(partial !== undefined ? { resumeFrom: partial.sequenceNumber } : {}),
            ...(result.kind === "error" ? { error: result.error } : {}),
            meshes: this.meshesOf(invoked),
          });
        },
        delivered: (slice) => this.advance(shard, slice, counters),
        gaveUp: (failure) => this.giveUp(shard, failure, counters),
      },
    });
    return result.complete;
  }

  private meshesOf(entries: readonly BatchEntry[]): string[] {
    const meshes = new Set<string>();
    for (const entry of entries) {
      const decoded = decodeRecord(entry.record, this.tables);
      if (decoded.ok) for (const mesh of decoded.meshes) meshes.add(mesh);
    }
    return [...meshes].sort();
  }

  /** Checkpoints past `entries` (already processed) and counts them. */
  private advance(shard: ShardState, entries: readonly BatchEntry[], counters: Counters): void {
    const last = entries[entries.length - 1];
    if (last === undefined) return;
    counters.records += entries.length;
    for (const mesh of this.meshesOf(entries)) counters.meshes.add(mesh);
    this.checkpoints.set(shard.streamArn, shard.shardId, last.sequenceNumber);
  }

  /** Writes the failure record, checkpoints past the records and reports them. */
  private async giveUp(shard: ShardState, failure: GaveUp, counters: Counters): Promise<void> {
    appendFailureRecord(this.failureFile, failureRecord(failure, shard, this.now()));
    counters.failedToDestination += failure.entries.length;
    this.advance(shard, failure.entries, counters);
    await this.onBatch?.({
      table: shard.table,
      streamArn: shard.streamArn,
      shardId: shard.shardId,
      records: failure.entries.map((e) => e.record),
      outcome: "gave-up",
      condition: failure.condition,
      ...(failure.lastError !== undefined ? { error: failure.lastError } : {}),
      meshes: this.meshesOf(failure.entries),
    });
  }
}
