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
  TrimmedDataAccessException,
} from "@aws-sdk/client-dynamodb-streams";
import type { BatchEntry } from "./batch-delivery.ts";
import { toLambdaRecord } from "./lambda-event.ts";

/** Which input table a stream comes from. */
export type InputTable = "meshes" | "dataplanes";

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
  /** Something worth telling that does not stop reading (a trimmed checkpoint, a bad record). */
  readonly onError: (error: unknown, table: InputTable) => void;
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

  constructor(options: ShardReaderOptions) {
    this.ddb = options.ddb;
    this.streams = options.streams;
    this.region = options.region;
    this.now = options.now;
    this.onError = options.onError;
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

  /** Reads and delivers batches from one shard until it is caught up (or stopped). */

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

  private entryOf(record: _Record, streamArn: string): BatchEntry {
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
}
