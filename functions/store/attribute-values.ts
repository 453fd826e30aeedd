import type { AttributeValue } from "@aws-sdk/client-dynamodb";
import { emptyRecord } from "../domain/records.ts";

/**
 * Conversion between DynamoDB attribute values and plain values, written for data whose map keys
 * are user names (services, meshes, tags). `@aws-sdk/util-dynamodb` assigns map keys onto `{}`
 * and tells a plain object from a class instance by its `constructor` property, so a key named
 * `__proto__` vanishes and a key named `constructor` makes the whole map "unsupported". Here
 * every map is built without a prototype and every key is copied as an own data property.
 *
 * Reading: numbers that fit a JS number become numbers, others stay strings (the domain then
 * rejects that one field, instead of one huge `port` failing a whole mesh).
 */
export type PlainRecord = Record<string, unknown>;

export function fromAttributeValue(value: AttributeValue | Record<string, unknown>): unknown {
  // moto returns a map entry under the key "" as a bare string: read it as the string it was.
  if (typeof value === "string") return value;
  const v = value as Record<string, unknown>;
  if (v.S !== undefined) return v.S;
  if (v.N !== undefined) return toNumber(String(v.N));
  if (v.BOOL !== undefined) return Boolean(v.BOOL);
  if (v.NULL !== undefined) return null;
  if (v.B !== undefined) return v.B;
  if (v.M !== undefined) return fromAttributeMap(v.M as Record<string, AttributeValue>);
  if (v.L !== undefined) return (v.L as AttributeValue[]).map(fromAttributeValue);
  if (v.SS !== undefined) return new Set(v.SS as string[]);
  if (v.NS !== undefined) return new Set((v.NS as string[]).map(toNumber));
  if (v.BS !== undefined) return new Set(v.BS as Uint8Array[]);
  throw new Error(`unknown attribute value type: ${JSON.stringify(Object.keys(v))}`);
}

export function fromAttributeMap(map: Record<string, AttributeValue>): PlainRecord {
  const out = emptyRecord();
  for (const key of Object.keys(map)) out[key] = fromAttributeValue(map[key] as AttributeValue);
  return out;
}

/** A DynamoDB item as a plain record (maps without prototypes). */
export function toPlain(item: Record<string, AttributeValue>): PlainRecord {
  return fromAttributeMap(item);
}

function toNumber(text: string): number | string {
  const n = Number(text);
  return Number.isFinite(n) && (!Number.isInteger(n) || Number.isSafeInteger(n)) ? n : text;
}

/** A plain value as a DynamoDB attribute value; `undefined` members of maps are left out. */
export function toAttributeValue(value: unknown): AttributeValue {
  if (typeof value === "string") return { S: value };
  if (typeof value === "number") {
    if (!Number.isFinite(value)) throw new Error(`cannot store the number ${value}`);
    return { N: String(value) };
  }
  if (typeof value === "bigint") return { N: value.toString() };
  if (typeof value === "boolean") return { BOOL: value };
  if (value === null) return { NULL: true };
  if (value instanceof Uint8Array) return { B: value };
  if (Array.isArray(value)) return { L: value.map(toAttributeValue) };
  if (value instanceof Map) return { M: toAttributeMap(value) };
  if (value instanceof Set) {
    const members = [...value];
    if (members.every((member) => typeof member === "string")) return { SS: members };
    if (members.every((member) => typeof member === "number")) {
      return { NS: members.map(String) };
    }
    throw new Error("only sets of strings or of numbers can be stored");
  }
  if (typeof value === "object") return { M: toAttributeMap(value as PlainRecord) };
  throw new Error(`cannot store a value of type ${typeof value}`);
}

/** A plain record (or a Map) as a DynamoDB item / map attribute. */
export function toAttributeMap(
  value: PlainRecord | ReadonlyMap<string, unknown>,
): Record<string, AttributeValue> {
  const out = emptyRecord<AttributeValue>();
  const entries =
    value instanceof Map
      ? [...value]
      : Object.keys(value).map((k) => [k, (value as PlainRecord)[k]] as const);
  for (const [key, inner] of entries) {
    if (inner !== undefined) out[key] = toAttributeValue(inner);
  }
  return out;
}

/**
 * Approximate stored size of an item per DynamoDB's rules (names + values; strings as UTF-8;
 * numbers about one byte per two digits plus one; 3 bytes per map or list plus 1 per element).
 */
export function itemSizeBytes(item: Record<string, unknown>): number {
  let size = 0;
  for (const name of Object.keys(item)) size += utf8(name) + valueSize(item[name]);
  return size;
}

function utf8(text: string): number {
  return Buffer.byteLength(text, "utf8");
}

function valueSize(value: unknown): number {
  if (typeof value === "string") return utf8(value);
  if (typeof value === "number")
    return Math.ceil(String(Math.abs(value)).replace(/[.-]/g, "").length / 2) + 1;
  if (typeof value === "boolean" || value === null) return 1;
  if (value instanceof Uint8Array) return value.byteLength;
  if (Array.isArray(value)) return 3 + value.reduce((sum: number, v) => sum + 1 + valueSize(v), 0);
  if (typeof value === "object" && value !== null) {
    let size = 3;
    const record = value as PlainRecord;
    for (const name of Object.keys(record)) size += 1 + utf8(name) + valueSize(record[name]);
    return size;
  }
  return 0;
}
