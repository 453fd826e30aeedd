import type {
  _Record,
  AttributeValue as StreamsAttributeValue,
} from "@aws-sdk/client-dynamodb-streams";
import type { AttributeValue, DynamoDBRecord } from "aws-lambda";

/** A value that could not be converted: where (`NewImage.tags.M`) and why. */
export interface ConversionProblem {
  readonly field: string;
  readonly reason: string;
}

/** Where problems go: a list of `"field: reason"` lines, or a function taking each one. */
export type ProblemSink = string[] | ((problem: ConversionProblem) => void);

function report(sink: ProblemSink, path: string, reason: string): void {
  const field = path || "(value)";
  if (Array.isArray(sink)) sink.push(`${field}: ${reason}`);
  else sink({ field, reason });
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
  problems: ProblemSink = [],
  path = "",
): AttributeValue {
  if (typeof value === "string") return { S: value };
  if (typeof value === "number") return { N: String(value) };
  if (typeof value !== "object" || value === null) {
    report(problems, path, `not an attribute value (${typeof value})`);
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
  report(problems, path, `unknown attribute value type ${JSON.stringify(Object.keys(value))}`);
  return { NULL: true };
}

export function toLambdaImage(
  image: Record<string, StreamsAttributeValue> | undefined,
  problems: ProblemSink = [],
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
  problems: ProblemSink = [],
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
