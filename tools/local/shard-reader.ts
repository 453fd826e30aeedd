import {
  DescribeTableCommand,
  type DescribeTableCommandOutput,
  type DynamoDBClient,
  ResourceNotFoundException,
} from "@aws-sdk/client-dynamodb";
import {
  type _Record,
  DescribeStreamCommand,
  type DynamoDBStreamsClient,
  GetRecordsCommand,
  GetShardIteratorCommand,
  type Shard,
  type AttributeValue as StreamsAttributeValue,
  TrimmedDataAccessException,
} from "@aws-sdk/client-dynamodb-streams";
import type { DynamoDBRecord } from "aws-lambda";
import type { InputIssue } from "../../functions/domain/errors.ts";
import { tableNameFromArn } from "../../functions/store/stream-records.ts";
import { type BatchEntry, describeError } from "./batch-delivery.ts";
import { toLambdaRecord } from "./lambda-event.ts";

/** Which input table a stream comes from. */
export type InputTable = "meshes" | "dataplanes" | "external-services";

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

export interface ShardState {
  readonly table: InputTable;
  readonly streamArn: string;
  readonly shardId: string;
  readonly parentShardId: string | undefined;
  /** The shard has an ending sequence number: no record will be added. */
  readonly closed: boolean;
  /** Closed and read to its end. */
  finished: boolean;
}

export interface StreamState {
  readonly table: InputTable;
  readonly tableName: string;
  streamArn: string | undefined;
  shards: ShardState[];
}

const EMPTY_PAGES_ON_CLOSED_SHARD = 5;

export interface ShardReaderOptions {
  readonly ddb: DynamoDBClient;
  readonly streams: DynamoDBStreamsClient;
  /** For records that carry no awsRegion. */
  readonly region: string;
  readonly now: () => number;
  /** Something worth telling that does not stop reading (a trimmed checkpoint). */
  readonly onError: (error: unknown, table: InputTable) => void;
  /** A record, or a value in one, the poller could not read; reading goes on. */
  readonly onBadInput: (issue: StreamRecordIssue) => void;
}

/** Bad input found in a stream record, in the allocator's shape plus where it was read. */
export interface StreamRecordIssue extends InputIssue {
  readonly streamArn: string;
  readonly sequenceNumber: string | undefined;
}

/**
 * Reads DynamoDB stream shards: finds a table's stream and shards, and reads records after a
 * checkpoint with a fresh iterator each time (moto's iterator chains can go stale, and a fresh
 * iterator costs one local call).
 */
export class ShardReader {
  private readonly ddb: DynamoDBClient;
  private readonly streams: DynamoDBStreamsClient;
  private readonly region: string;
  private readonly now: () => number;
  private readonly onError: (error: unknown, table: InputTable) => void;
  private readonly onBadInput: (issue: StreamRecordIssue) => void;

  constructor(options: ShardReaderOptions) {
    this.ddb = options.ddb;
    this.streams = options.streams;
    this.region = options.region;
    this.now = options.now;
    this.onError = options.onError;
    this.onBadInput = options.onBadInput;
  }

  /** Finds the table's current stream and its shards (new shards appear as old ones close). */
  async discover(stream: StreamState): Promise<void> {
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
  readyShards(stream: StreamState): ShardState[] {
    return stream.shards.filter((shard) => {
      if (shard.finished) return false;
      const parent = stream.shards.find((s) => s.shardId === shard.parentShardId);
      return parent === undefined || parent.finished;
    });
  }

  /** One read with a fresh iterator after `after` (or from the trim horizon). */
  async read(
    shard: ShardState,
    after: string | undefined,
    limit: number,
  ): Promise<{ entries: BatchEntry[]; ended: boolean }> {
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
      const entries = records.flatMap((r) => this.entryOf(r, shard) ?? []);
      if (entries.length > 0 || ended) return { entries, ended };
      // A page of records that were all skipped: go on along the iterator chain.
      if (records.length > 0) {
        iterator = out.NextShardIterator;
        continue;
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

  /**
   * The record as Lambda would hand it over, with what delivery needs; undefined (reported as
   * bad input) when it has no numeric sequence number, without which it cannot be ordered or
   * checkpointed. A value that cannot be converted is delivered as NULL and reported: the
   * handler reads the item itself from the table, so the rest of the record still counts.
   */
  private entryOf(record: _Record, shard: ShardState): BatchEntry | undefined {
    const streamArn = shard.streamArn;
    const sequenceNumber = record.dynamodb?.SequenceNumber;
    const issue = (field: string, reason: string): void =>
      this.onBadInput({
        table: tableNameFromArn(streamArn) ?? shard.table,
        key: plainKeys(record.dynamodb?.Keys),
        field,
        reason,
        streamArn,
        sequenceNumber,
      });
    if (sequenceNumber === undefined || !/^\d+$/.test(sequenceNumber)) {
      issue("dynamodb.SequenceNumber", `missing or not numeric: ${JSON.stringify(sequenceNumber)}`);
      return undefined;
    }
    let lambdaRecord: DynamoDBRecord;
    try {
      lambdaRecord = toLambdaRecord(record, streamArn, this.region, ({ field, reason }) =>
        issue(field, `${reason}; delivered as NULL`),
      );
    } catch (error) {
      issue("(record)", `could not be converted: ${describeError(error)}`);
      return undefined;
    }
    return {
      record: lambdaRecord,
      sequence: BigInt(sequenceNumber),
      sequenceNumber,
      createdMs: record.dynamodb?.ApproximateCreationDateTime?.getTime() ?? this.now(),
    };
  }
}

/** The record's keys as plain values, for a bad-input report ({} when unreadable). */
function plainKeys(
  keys: Record<string, StreamsAttributeValue> | undefined,
): Record<string, unknown> {
  const out: Record<string, unknown> = {};
  for (const [name, value] of Object.entries(keys ?? {})) {
    out[name] = value?.S ?? value?.N ?? (value?.B !== undefined ? "(binary)" : "(unreadable)");
  }
  return out;
}
