/**
 * The vips table's change feed, read by `vips watch` (decision 146): every write of a VIP item
 * as a stream record with the item before and after it, so a change is shown against what the
 * item itself held, whoever wrote it (this process's handler, the Lambda, another `drain`).
 * Reads from the stream's end at start (earlier writes are in the items already), every shard
 * with a chain of iterators; a shard that appears later is read from its start.
 */
import {
  type AttributeValue,
  DescribeTableCommand,
  type DynamoDBClient,
} from "@aws-sdk/client-dynamodb";
import {
  DescribeStreamCommand,
  type DynamoDBStreamsClient,
  ExpiredIteratorException,
  GetRecordsCommand,
  GetShardIteratorCommand,
  type ShardIteratorType,
  TrimmedDataAccessException,
} from "@aws-sdk/client-dynamodb-streams";
import type { VipItem } from "../../functions/domain/types.ts";
import { toPlain } from "../../functions/store/attribute-values.ts";
import { decodeVipItem } from "../../functions/store/vip-item-codec.ts";

/** One write of a mesh's VIP item: the item before (undefined: created) and after (deleted). */
export interface VipWrite {
  readonly mesh: string;
  readonly before: VipItem | undefined;
  readonly after: VipItem | undefined;
}

interface ShardPosition {
  iterator: string | undefined;
  lastSequence: string | undefined;
  readonly start: ShardIteratorType;
  done: boolean;
}

const image = (value: Record<string, unknown> | undefined): VipItem | undefined =>
  value === undefined ? undefined : decodeVipItem(toPlain(value as Record<string, AttributeValue>));

export class VipsFeed {
  private readonly shards = new Map<string, ShardPosition>();
  private polls = 0;

  private constructor(
    private readonly streams: DynamoDBStreamsClient,
    private readonly streamArn: string,
  ) {}

  /** The feed of `table`, from now; undefined when the table has no stream. */
  static async open(
    ddb: DynamoDBClient,
    streams: DynamoDBStreamsClient,
    table: string,
  ): Promise<VipsFeed | undefined> {
    const described = await ddb.send(new DescribeTableCommand({ TableName: table }));
    const arn = described.Table?.LatestStreamArn;
    const spec = described.Table?.StreamSpecification;
    if (arn === undefined || spec?.StreamEnabled === false) return undefined;
    if (spec?.StreamViewType !== "NEW_AND_OLD_IMAGES") return undefined;
    const feed = new VipsFeed(streams, arn);
    await feed.discover("LATEST");
    return feed;
  }

  /** Shards not seen yet: from `start` (LATEST when opening; TRIM_HORIZON for new ones). */
  private async discover(start: ShardIteratorType): Promise<void> {
    let after: string | undefined;
    do {
      const page = await this.streams.send(
        new DescribeStreamCommand({ StreamArn: this.streamArn, ExclusiveStartShardId: after }),
      );
      for (const shard of page.StreamDescription?.Shards ?? []) {
        const id = shard.ShardId as string;
        if (this.shards.has(id)) continue;
        const position: ShardPosition = {
          iterator: undefined,
          lastSequence: undefined,
          start,
          done: false,
        };
        // Anchored now: a write between opening and the first poll is not skipped.
        position.iterator = await this.iteratorFor(id, position);
        this.shards.set(id, position);
      }
      after = page.StreamDescription?.LastEvaluatedShardId;
    } while (after !== undefined);
  }

  /** Reads what was written since the last poll, oldest first per shard. */
  async poll(): Promise<VipWrite[]> {
    if (++this.polls % 20 === 0) await this.discover("TRIM_HORIZON");
    const writes: VipWrite[] = [];
    for (const [shardId, position] of this.shards) {
      if (position.done) continue;
      position.iterator ??= await this.iteratorFor(shardId, position);
      let page: Awaited<ReturnType<typeof this.read>>;
      try {
        page = await this.read(position.iterator);
      } catch (error) {
        const stale =
          error instanceof ExpiredIteratorException || error instanceof TrimmedDataAccessException;
        if (!stale) throw error;
        // A fresh iterator at the same position; if that fails too, the next poll tries again.
        position.iterator = undefined;
        position.iterator = await this.iteratorFor(shardId, position);
        page = await this.read(position.iterator);
      }
      for (const record of page.Records ?? []) {
        position.lastSequence = record.dynamodb?.SequenceNumber ?? position.lastSequence;
        const before = image(record.dynamodb?.OldImage);
        const after = image(record.dynamodb?.NewImage);
        const mesh = after?.mesh ?? before?.mesh;
        if (mesh !== undefined) writes.push({ mesh, before, after });
      }
      position.iterator = page.NextShardIterator;
      if (position.iterator === undefined) position.done = true; // a closed shard, read to its end
    }
    return writes;
  }

  private read(iterator: string | undefined) {
    return this.streams.send(new GetRecordsCommand({ ShardIterator: iterator, Limit: 100 }));
  }

  private async iteratorFor(shardId: string, position: ShardPosition): Promise<string | undefined> {
    const after = position.lastSequence;
    const result = await this.streams.send(
      new GetShardIteratorCommand({
        StreamArn: this.streamArn,
        ShardId: shardId,
        ShardIteratorType: after === undefined ? position.start : "AFTER_SEQUENCE_NUMBER",
        ...(after === undefined ? {} : { SequenceNumber: after }),
      }),
    );
    return result.ShardIterator;
  }
}
