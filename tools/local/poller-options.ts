import type { DynamoDBClient } from "@aws-sdk/client-dynamodb";
import type { DynamoDBRecord } from "aws-lambda";
import { EVENT_SOURCE_SETTINGS } from "../../functions/allocator/config.ts";
import type { StreamHandler } from "../../functions/allocator/handlers.ts";
import type { TableNames } from "../../functions/store/table-definitions.ts";
import type { StaticCredentials } from "./aws-clients.ts";
import type { FailureCondition } from "./batch-delivery.ts";
import {
  type InputTable,
  StreamPollerError,
  type StreamRecordIssue,
  type StreamState,
} from "./shard-reader.ts";

export interface StreamPollerOptions {
  /** moto_server or another DynamoDB-compatible endpoint; unset means real AWS. */
  readonly endpoint?: string | undefined;
  /** @default AWS_REGION, AWS_DEFAULT_REGION or us-east-1 */
  readonly region?: string | undefined;
  /** @default test/test with an endpoint and no credentials in the environment, else the SDK chain */
  readonly credentials?: StaticCredentials | undefined;
  /** A DynamoDB client to share (the caller's); the poller then builds only its streams client. */
  readonly client?: DynamoDBClient | undefined;
  /**
   * Physical table names; the poller reads the `meshes` and `dataplanes` streams, and the
   * `external-services` stream when the names include that table.
   */
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
  /**
   * A stream record, or a value in one, that could not be read: skipped (no sequence number) or
   * delivered with that value as NULL. @default one JSON line (level WARN) on stderr
   */
  readonly onBadInput?: (issue: StreamRecordIssue) => void;
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

function checkRange(name: string, value: number, min: number, max: number): number {
  if (!Number.isInteger(value) || value < min || value > max) {
    throw new StreamPollerError(
      "INVALID_OPTION",
      `${name} must be a whole number from ${min} to ${max}, got ${value}`,
    );
  }
  return value;
}

/** The settings `options` ask for, defaults from EVENT_SOURCE_SETTINGS, each checked. */
export function resolvePollerSettings(options: StreamPollerOptions): PollerSettings {
  const batchSize = checkRange(
    "batchSize",
    options.batchSize ?? EVENT_SOURCE_SETTINGS.batchSize,
    1,
    10_000,
  );
  const maxBatchingWindowMs = checkRange(
    "maxBatchingWindowMs",
    options.maxBatchingWindowMs ?? EVENT_SOURCE_SETTINGS.maxBatchingWindowSeconds * 1000,
    0,
    300_000,
  );
  const retryAttempts = checkRange(
    "retryAttempts",
    options.retryAttempts ?? EVENT_SOURCE_SETTINGS.retryAttempts,
    -1,
    10_000,
  );
  const maxRecordAgeSeconds = checkRange(
    "maxRecordAgeSeconds",
    options.maxRecordAgeSeconds ?? EVENT_SOURCE_SETTINGS.maxRecordAgeSeconds,
    -1,
    604_800,
  );
  const bisectBatchOnError = options.bisectBatchOnError ?? EVENT_SOURCE_SETTINGS.bisectBatchOnError;
  const pollIntervalMs = checkRange(
    "pollIntervalMs",
    options.pollIntervalMs ?? EVENT_SOURCE_SETTINGS.pollIntervalMs,
    1,
    60_000,
  );
  return {
    batchSize,
    maxBatchingWindowMs,
    retryAttempts,
    maxRecordAgeSeconds,
    bisectBatchOnError,
    pollIntervalMs,
  };
}

/** The streams the poller reads: the input tables the names include. */
export function inputStreams(tables: TableNames): StreamState[] {
  const stream = (table: InputTable, tableName: string): StreamState => ({
    table,
    tableName,
    streamArn: undefined,
    shards: [],
  });
  return [
    stream("meshes", tables.meshes),
    stream("dataplanes", tables.dataplanes),
    ...(tables.externalServices !== undefined
      ? [stream("external-services", tables.externalServices)]
      : []),
  ];
}
