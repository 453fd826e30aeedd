/**
 * Item sizes and capacity units as DynamoDB bills them (the rules: bench/cost-meter.ts), and the
 * totals the meter keeps, and the names and values an expression refers to.
 */
import type { AttributeValue } from "@aws-sdk/client-dynamodb";

export type Item = Record<string, AttributeValue>;

/** The size DynamoDB assigns an attribute value, in bytes. */
export function valueSize(value: AttributeValue): number {
  if (value.S !== undefined) return Buffer.byteLength(value.S, "utf8");
  if (value.N !== undefined) return numberSize(value.N);
  if (value.B !== undefined) return value.B.length;
  if (value.BOOL !== undefined || value.NULL !== undefined) return 1;
  if (value.SS !== undefined) return value.SS.reduce((n, s) => n + Buffer.byteLength(s, "utf8"), 0);
  if (value.NS !== undefined) return value.NS.reduce((n, s) => n + numberSize(s), 0);
  if (value.BS !== undefined) return value.BS.reduce((n, b) => n + b.length, 0);
  if (value.L !== undefined) return 3 + value.L.reduce((n, v) => n + 1 + valueSize(v), 0);
  if (value.M !== undefined) {
    let size = 3;
    for (const [name, v] of Object.entries(value.M)) {
      size += 1 + Buffer.byteLength(name, "utf8") + valueSize(v);
    }
    return size;
  }
  return 0;
}

/** Numbers: about one byte per two significant digits, plus one. */
function numberSize(text: string): number {
  const digits = text.replace(/^-/, "").replace(/e.*$/i, "").replace(".", "").replace(/^0+/, "");
  return Math.ceil(Math.max(1, digits.replace(/0+$/, "").length) / 2) + 1;
}

/** An item's size: attribute names plus values. */
export function itemSize(item: Item | undefined): number {
  if (item === undefined) return 0;
  let size = 0;
  for (const [name, value] of Object.entries(item)) {
    size += Buffer.byteLength(name, "utf8") + valueSize(value);
  }
  return size;
}

export function readUnits(bytes: number, consistent: boolean): number {
  const units = Math.max(1, Math.ceil(bytes / 4096));
  return consistent ? units : units / 2;
}

export function writeUnits(bytes: number): number {
  return Math.max(1, Math.ceil(bytes / 1024));
}

export interface TableCost {
  requests: number;
  readUnits: number;
  writeUnits: number;
}

export interface CostTotals {
  requests: number;
  readUnits: number;
  writeUnits: number;
  byOperation: Map<string, number>;
  byTable: Map<string, TableCost>;
  /** "table prefix" (the text before `#` of a partition key named `pk`) -> cost. */
  byKeyPrefix: Map<string, TableCost>;
  /** Time spent in the meter's own side requests. */
  overheadMs: number;
}

export function emptyTotals(): CostTotals {
  return {
    requests: 0,
    readUnits: 0,
    writeUnits: 0,
    byOperation: new Map(),
    byTable: new Map(),
    byKeyPrefix: new Map(),
    overheadMs: 0,
  };
}

export function add(map: Map<string, TableCost>, key: string, cost: Partial<TableCost>): void {
  const entry = map.get(key) ?? { requests: 0, readUnits: 0, writeUnits: 0 };
  entry.requests += cost.requests ?? 0;
  entry.readUnits += cost.readUnits ?? 0;
  entry.writeUnits += cost.writeUnits ?? 0;
  map.set(key, entry);
}

/** Names and values an expression refers to. */
export function referenced(expression: string | undefined, input: Record<string, unknown>) {
  const text = expression ?? "";
  const names = input.ExpressionAttributeNames as Record<string, string> | undefined;
  const values = input.ExpressionAttributeValues as Item | undefined;
  const pick = <T>(all: Record<string, T> | undefined, pattern: RegExp) => {
    if (all === undefined) return undefined;
    const used = Object.fromEntries(
      Object.entries(all).filter(([token]) => {
        const tokens: string[] = text.match(pattern) ?? [];
        return tokens.includes(token);
      }),
    );
    return Object.keys(used).length > 0 ? used : undefined;
  };
  return { names: pick(names, /#[A-Za-z0-9_]+/g), values: pick(values, /:[A-Za-z0-9_]+/g) };
}
