import { type ClaimWrite, type Item, STREAM_LAG_KEY, SWEEP_KEY } from "./claim-items.ts";
import type { StreamLagNote, SweepState } from "./ports.ts";

const SWEEP_PHASES = new Set(["index", "meshes", "items", "claims", "done"]);

/** The sweep's state item, or undefined when it is absent or not one. */
export function decodeSweepState(item: Item | undefined): SweepState | undefined {
  if (item === undefined || !SWEEP_PHASES.has(String(item.phase))) return undefined;
  const num = (value: unknown): number => (typeof value === "number" ? value : 0);
  return {
    cycle: String(item.cycle),
    startedAt: num(item.startedAt),
    phase: item.phase as SweepState["phase"],
    after: typeof item.after === "string" ? item.after : undefined,
    meshes: num(item.meshes),
    repairs: num(item.repairs),
    addressesInRange: num(item.addressesInRange),
    counterAtStart: typeof item.counterAtStart === "number" ? item.counterAtStart : undefined,
    ...(typeof item.finishedAt === "number" ? { finishedAt: item.finishedAt } : {}),
    ...(typeof item.counterDelta === "number" ? { counterDelta: item.counterDelta } : {}),
    ...(item.backfill === true ? { backfill: true } : {}),
    ...(typeof item.previousDelta === "number" ? { previousDelta: item.previousDelta } : {}),
    version: num(item.version),
  };
}

/** Writes the sweep's state if the stored one still has `expectedVersion` (undefined: none). */
export function sweepStateWrite(
  state: SweepState,
  expectedVersion: number | undefined,
): ClaimWrite {
  const item: Item = { pk: SWEEP_KEY, kind: "sweep" };
  for (const [name, value] of Object.entries(state)) {
    if (value !== undefined) item[name] = value;
  }
  const stored = (current: Item | undefined) =>
    current === undefined ? undefined : (current.version as number | undefined);
  return {
    key: SWEEP_KEY,
    action: "put",
    item,
    ...(expectedVersion === undefined
      ? { conditionExpression: "attribute_not_exists(pk)" }
      : {
          conditionExpression: "#v = :expected",
          names: { "#v": "version" },
          values: { ":expected": expectedVersion },
        }),
    holds: (current) =>
      expectedVersion === undefined ? current === undefined : stored(current) === expectedVersion,
    apply: () => item,
  };
}

/** The stream-lag note, or undefined when absent or not one. */
export function decodeStreamLag(item: Item | undefined): StreamLagNote | undefined {
  if (item === undefined || typeof item.at !== "number" || typeof item.lagMs !== "number") {
    return undefined;
  }
  return { at: item.at, lagMs: item.lagMs };
}

/** Notes a lag seen at `at`, unless a later note is stored (notes only move forward). */
export function streamLagWrite(note: StreamLagNote): ClaimWrite {
  return {
    key: STREAM_LAG_KEY,
    action: "update",
    updateExpression: "SET #at = :at, #lag = :lag, #kind = :kind",
    conditionExpression: "attribute_not_exists(#at) OR #at < :at",
    names: { "#at": "at", "#lag": "lagMs", "#kind": "kind" },
    values: { ":at": note.at, ":lag": note.lagMs, ":kind": "stream-lag" },
    holds: (current) => typeof current?.at !== "number" || current.at < note.at,
    apply: (current) => ({
      ...(current ?? {}),
      pk: STREAM_LAG_KEY,
      kind: "stream-lag",
      at: note.at,
      lagMs: note.lagMs,
    }),
  };
}
