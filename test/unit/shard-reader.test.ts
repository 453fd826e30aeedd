import type { DynamoDBClient } from "@aws-sdk/client-dynamodb";
import {
  type _Record,
  type DynamoDBStreamsClient,
  GetRecordsCommand,
  GetShardIteratorCommand,
} from "@aws-sdk/client-dynamodb-streams";
import { describe, expect, it } from "vitest";
import { ShardReader, type ShardState } from "../../tools/local/shard-reader.ts";

const STREAM_ARN = "arn:aws:dynamodb:us-east-1:123456789012:table/t-dataplanes/stream/L";

const SHARD: ShardState = {
  table: "dataplanes",
  streamArn: STREAM_ARN,
  shardId: "shard-1",
  parentShardId: undefined,
  closed: false,
  finished: false,
};

function record(sequenceNumber: string | undefined, newImage: object = {}): _Record {
  return {
    eventID: `e-${sequenceNumber}`,
    eventName: "INSERT",
    dynamodb: {
      ApproximateCreationDateTime: new Date(1_000_000),
      Keys: { mesh: { S: "default" }, name: { S: `dp-${sequenceNumber}` } },
      NewImage: { mesh: { S: "default" }, ...newImage } as never,
      ...(sequenceNumber !== undefined ? { SequenceNumber: sequenceNumber } : {}),
    },
  };
}

/** A reader over a streams client that answers one page of `records` to every read. */
function reader(records: _Record[]) {
  const reported: unknown[] = [];
  const errors: unknown[] = [];
  const streams = {
    send: async (command: unknown) => {
      if (command instanceof GetShardIteratorCommand) return { ShardIterator: "it-1" };
      if (command instanceof GetRecordsCommand) {
        return { Records: records, NextShardIterator: "it-2" };
      }
      throw new Error(`unexpected command ${String(command)}`);
    },
  } as unknown as DynamoDBStreamsClient;
  const shardReader = new ShardReader({
    ddb: {} as DynamoDBClient,
    streams,
    region: "us-east-1",
    now: () => 2_000_000,
    onError: (error) => errors.push(error),
    onBadInput: (issue) => reported.push(issue),
  });
  return { shardReader, reported, errors };
}

describe("ShardReader.read", () => {
  it("skips a record without a usable sequence number, reports it as bad input and returns the others", async () => {
    const { shardReader, reported } = reader([record(undefined), record("x1"), record("20")]);

    const { entries, ended } = await shardReader.read(SHARD, undefined, 100);

    expect(entries.map((e) => e.sequenceNumber)).toEqual(["20"]);
    expect(ended).toBe(false);
    expect(reported).toEqual([
      {
        table: "t-dataplanes",
        key: { mesh: "default", name: "dp-undefined" },
        field: "dynamodb.SequenceNumber",
        reason: "missing or not numeric: undefined",
        streamArn: STREAM_ARN,
        sequenceNumber: undefined,
      },
      {
        table: "t-dataplanes",
        key: { mesh: "default", name: "dp-x1" },
        field: "dynamodb.SequenceNumber",
        reason: 'missing or not numeric: "x1"',
        streamArn: STREAM_ARN,
        sequenceNumber: "x1",
      },
    ]);
  });

  it("delivers a record with a value it cannot read as NULL and reports that field as bad input", async () => {
    // moto's form of `tags: {"": {M: {...}}}`: the entry's type and payload merged into the map,
    // which the SDK reads as an unknown union member.
    const tags = { M: { M: { $unknown: ["a", { S: "b" }] }, "kuma.io/service": { S: "web" } } };
    const { shardReader, reported } = reader([record("7", { tags })]);

    const { entries } = await shardReader.read(SHARD, undefined, 100);

    expect(entries.map((e) => e.sequenceNumber)).toEqual(["7"]);
    expect(entries[0]?.record.dynamodb?.NewImage?.tags).toEqual({
      M: { M: { NULL: true }, "kuma.io/service": { S: "web" } },
    });
    expect(reported).toEqual([
      {
        table: "t-dataplanes",
        key: { mesh: "default", name: "dp-7" },
        field: "NewImage.tags.M",
        reason: 'unknown attribute value type ["$unknown"]; delivered as NULL',
        streamArn: STREAM_ARN,
        sequenceNumber: "7",
      },
    ]);
  });
});
