import { randomUUID } from "node:crypto";
import { appendFileSync, mkdirSync } from "node:fs";
import { dirname } from "node:path";
import type { AttributeValue } from "aws-lambda";
import type { BatchEntry, FailureCondition, GaveUp } from "./batch-delivery.ts";

export type { FailureCondition } from "./batch-delivery.ts";

/** Where records that gave up go unless told otherwise (git-ignored). */
export const DEFAULT_FAILURE_FILE = ".local/failures.jsonl";

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

/** Lambda's on-failure record for records of one shard that gave up. */
export function failureRecord(
  failure: GaveUp,
  where: { readonly shardId: string; readonly streamArn: string },
  now: number,
): FailureRecord {
  const entries = failure.entries;
  const first = entries[0] as BatchEntry;
  const last = entries[entries.length - 1] as BatchEntry;
  return {
    requestContext: {
      requestId: randomUUID(),
      functionArn: "local:stream-handler",
      condition: failure.condition,
      approximateInvokeCount: failure.invocations,
    },
    ...(failure.invocations > 0
      ? {
          responseContext: {
            statusCode: 200,
            executedVersion: "$LATEST",
            ...(failure.functionError ? { functionError: "Unhandled" as const } : {}),
          },
        }
      : {}),
    version: "1.0",
    timestamp: new Date(now).toISOString(),
    DDBStreamBatchInfo: {
      shardId: where.shardId,
      startSequenceNumber: first.sequenceNumber,
      endSequenceNumber: last.sequenceNumber,
      approximateArrivalOfFirstRecord: new Date(first.createdMs).toISOString(),
      approximateArrivalOfLastRecord: new Date(last.createdMs).toISOString(),
      batchSize: entries.length,
      streamArn: where.streamArn,
    },
    records: entries.map((e) => ({
      eventID: e.record.eventID,
      eventName: e.record.eventName,
      sequenceNumber: e.sequenceNumber,
      keys: e.record.dynamodb?.Keys,
    })),
    ...(failure.lastError !== undefined ? { lastError: failure.lastError } : {}),
  };
}

/** Appends one JSON line to the failure file (its directory is created when missing). */
export function appendFailureRecord(file: string, record: FailureRecord): void {
  mkdirSync(dirname(file), { recursive: true });
  appendFileSync(file, `${JSON.stringify(record)}\n`);
}
