import type { AttributeValue } from "@aws-sdk/client-dynamodb";
import { NumberValueImpl as NumberValue, unmarshall } from "@aws-sdk/util-dynamodb";

/**
 * Converts a DynamoDB item to a plain object without ever throwing on a number: numbers that
 * fit a JS number become numbers, others stay strings (the domain then rejects that one field,
 * instead of one huge `port` failing the whole mesh query).
 */
export function toPlain(item: Record<string, AttributeValue>): Record<string, unknown> {
  return normalise(unmarshall(item, { wrapNumbers: true })) as Record<string, unknown>;
}

function normalise(value: unknown): unknown {
  if (value instanceof NumberValue) {
    const n = Number(value.value);
    return Number.isFinite(n) && (!Number.isInteger(n) || Number.isSafeInteger(n))
      ? n
      : value.value;
  }
  if (Array.isArray(value)) return value.map(normalise);
  if (value instanceof Set) return new Set([...value].map(normalise));
  if (value instanceof Uint8Array) return value;
  if (typeof value === "object" && value !== null) {
    const out: Record<string, unknown> = {};
    for (const [key, inner] of Object.entries(value)) out[key] = normalise(inner);
    return out;
  }
  return value;
}

/**
 * Approximate stored size of an item per DynamoDB's rules (names + values; strings as UTF-8;
 * numbers about one byte per two digits plus one; 3 bytes per map or list plus 1 per element).
 */
export function itemSizeBytes(item: Record<string, unknown>): number {
  let size = 0;
  for (const [name, value] of Object.entries(item)) size += utf8(name) + valueSize(value);
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
    for (const [name, inner] of Object.entries(value)) size += 1 + utf8(name) + valueSize(inner);
    return size;
  }
  return 0;
}
