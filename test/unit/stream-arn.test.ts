import { describe, expect, it } from "vitest";
import { parseStreamArn } from "../../functions/store/table-definitions.ts";

// The two parsers this one replaced, kept here to show it answers as they did.
const LENIENT = /:table\/([^/]+)\/stream\//;
const STRICT =
  /^arn:aws[a-z-]*:dynamodb:[a-z0-9-]+:\d{12}:table\/([a-zA-Z0-9_.-]{3,255})\/stream\/[^/\s]+$/;

const SAMPLES = [
  "arn:aws:dynamodb:eu-west-1:123456789012:table/kuma-meshes/stream/2026-01-01T00:00:00.000",
  "arn:aws-cn:dynamodb:cn-north-1:123456789012:table/t.1_x-y/stream/label",
  "arn:aws:dynamodb:us-east-1:123456789012:table/kuma-meshes",
  "arn:aws:dynamodb:us-east-1:1:table/dataplanes/stream/x",
  "arn:aws:dynamodb:US-EAST-1:123456789012:table/meshes/stream/x",
  "arn:aws:dynamodb:us-east-1:123456789012:table/ab/stream/x",
  "arn:aws:dynamodb:us-east-1:123456789012:table/meshes/stream/a/b",
  "arn:aws:dynamodb:us-east-1:123456789012:table/meshes/stream/a b",
  "arn:aws:dynamodb:us-east-1:123456789012:table/meshes/stream/",
  "arn:aws:dynamodb:us-east-1:123456789012:table/meshes/stream/x\n",
  "arn:aws:sqs:us-east-1:123456789012:table/meshes/stream/x",
  "x:table/a/stream/:table/b/stream/c",
  "table/a/stream/x",
  "",
];

describe("parseStreamArn", () => {
  it("reads the table name, label and prefix of a stream ARN", () => {
    expect(
      parseStreamArn("arn:aws:dynamodb:eu-west-1:123456789012:table/kuma-meshes/stream/L1"),
    ).toEqual({
      tableName: "kuma-meshes",
      label: "L1",
      prefix: "arn:aws:dynamodb:eu-west-1:123456789012",
      wellFormed: true,
    });
  });

  it.each(SAMPLES)("finds the table name the allocator's parser found in %j", (arn) => {
    expect(parseStreamArn(arn)?.tableName).toBe(LENIENT.exec(arn)?.[1]);
  });

  it.each(SAMPLES)("calls %j well formed exactly when the construct's pattern did", (arn) => {
    const strict = STRICT.exec(arn);
    const parsed = parseStreamArn(arn);

    expect(parsed?.wellFormed === true).toBe(strict !== null);
    if (strict !== null) expect(parsed?.tableName).toBe(strict[1]);
  });

  it("parses nothing from undefined", () => {
    expect(parseStreamArn(undefined)).toBeUndefined();
  });
});
