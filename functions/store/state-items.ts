import {
  type ClaimWrite,
  copy,
  type Item,
  poolKey,
  STREAM_LAG_KEY,
  SWEEP_KEY,
  WAITING_KEY,
} from "./claim-items.ts";
import type {
  ItemRevision,
  MeshRange,
  StreamLagNote,
  SweepState,
  WaitingRequest,
} from "./ports.ts";

/** Moves a range's next-fit cursor and adds to its claim count (unconditional). */
export function cursorWrite(cidr: string, next: bigint, newlyClaimed: number): ClaimWrite {
  const key = poolKey(cidr);
  return {
    key,
    action: "update",
    updateExpression: "SET #next = :next, kind = :kind ADD claimed :n",
    names: { "#next": "next" },
    values: { ":next": next.toString(), ":n": newlyClaimed, ":kind": "pool" },
    holds: () => true,
    apply: (item) => ({
      ...copy(item, key),
      next: next.toString(),
      kind: "pool",
      claimed: (typeof item?.claimed === "number" ? item.claimed : 0) + newlyClaimed,
    }),
  };
}

/** A range's claim counter as stored (0 when the pool item or its count is absent). */
export function counterOf(item: Item | undefined): number {
  return typeof item?.claimed === "number" ? item.claimed : 0;
}

/** Sets a range's claim counter, if it still holds `expected` (the repair sweep's fix). */
export function counterWrite(cidr: string, expected: number, claimed: number): ClaimWrite {
  const key = poolKey(cidr);
  return {
    key,
    action: "update",
    updateExpression: "SET claimed = :c, kind = :kind",
    conditionExpression:
      expected === 0 ? "attribute_not_exists(claimed) OR claimed = :e" : "claimed = :e",
    values: { ":c": claimed, ":e": expected, ":kind": "pool" },
    holds: (item) => counterOf(item) === expected,
    apply: (item) => ({ ...copy(item, key), kind: "pool", claimed }),
  };
}

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

/**
 * The range of a mesh's VIP item as a completed pass left it (decisions 055, 112): pk
 * `range#<mesh>` in the claims table, `cidr` the item's range, `i` and `v` the incarnation and
 * version of the item it describes. A batch may skip a mesh's pass (decision 073) only while
 * `cidr` equals the range it runs with: after a change of `VIP_CIDR`, the next record touching
 * the mesh still renumbers it, as the contract says. Written only over a record of an older
 * version of the same incarnation, of no incarnation (none yet, or written before 112), or of
 * an incarnation the writer saw before it read the item (a dead one): a pass held since an
 * older version can never overwrite what a newer pass recorded.
 */
export const RANGE_PREFIX = "range#";

export function meshRangeKey(mesh: string): string {
  return `${RANGE_PREFIX}${mesh}`;
}

/**
 * Records that `revision` of `mesh`'s item is in `cidr`, unless the record describes a newer
 * version of the same incarnation, or another incarnation than `seen` (see above).
 */
export function meshRangeWrite(
  mesh: string,
  cidr: string,
  revision: ItemRevision,
  seen?: string,
): ClaimWrite {
  const key = meshRangeKey(mesh);
  const item: Item = {
    pk: key,
    kind: "range",
    mesh,
    cidr,
    i: revision.incarnation,
    v: revision.version,
  };
  const orSeen = seen !== undefined ? " OR #i = :seen" : "";
  return {
    key,
    action: "put",
    item,
    conditionExpression: `attribute_not_exists(#i) OR (#i = :i AND #v <= :v)${orSeen}`,
    names: { "#i": "i", "#v": "v" },
    values: {
      ":i": revision.incarnation,
      ":v": revision.version,
      ...(seen !== undefined ? { ":seen": seen } : {}),
    },
    holds: (stored) => {
      const held = revisionOf(stored);
      if (held === undefined) return true;
      if (held.incarnation === revision.incarnation) return held.version <= revision.version;
      return seen !== undefined && held.incarnation === seen;
    },
    apply: () => ({ ...item }),
  };
}

/** The mesh and range a `range#` item records; undefined for anything else. */
export function decodeMeshRange(
  item: Item | undefined,
): { mesh: string; range: MeshRange } | undefined {
  if (item === undefined || typeof item.mesh !== "string" || typeof item.cidr !== "string") {
    return undefined;
  }
  const revision = revisionOf(item);
  return {
    mesh: item.mesh,
    range: { cidr: item.cidr, ...(revision !== undefined ? { revision } : {}) },
  };
}

/** The item revision `{i, v}` an item carries, if any. */
export function revisionOf(item: Item | undefined): ItemRevision | undefined {
  const incarnation = item?.i;
  const version = item?.v;
  if (typeof incarnation !== "string" || typeof version !== "number") return undefined;
  return { incarnation, version };
}

/**
 * The meshes waiting for an address (decisions 023, 111): one attribute per mesh on the
 * `waiting` item, `w#<mesh>` = `{i, v}`, the incarnation and version of the item that listed
 * unallocated services when the mesh joined. An older pass can never undo a newer one:
 * - joining writes the entry unless it already names a newer version of the same incarnation;
 * - leaving removes it only when it names an older version of the item the pass left, or an
 *   incarnation the pass saw on the list before it read the item (a dead one).
 * Entries of the string set `meshes` (written before decision 111) still count as waiting and
 * are removed by any leave.
 */
export const WAITING_ENTRY_PREFIX = "w#";

function entryName(mesh: string): string {
  return `${WAITING_ENTRY_PREFIX}${mesh}`;
}

/** Adds `mesh` to, or removes it from, the meshes waiting for an address (see above). */
export function waitingWrite(mesh: string, request: WaitingRequest): ClaimWrite {
  const name = entryName(mesh);
  const { item: revision, waiting, seen } = request;
  const names = { "#w": name, "#i": "i", "#v": "v" };
  const rev = { ":i": revision.incarnation, ":v": revision.version };
  if (waiting) {
    return {
      key: WAITING_KEY,
      action: "update",
      updateExpression: "SET kind = :kind, #w = :rev",
      conditionExpression: "attribute_not_exists(#w) OR #w.#i <> :i OR #w.#v <= :v",
      names,
      values: {
        ":kind": "waiting",
        ":rev": { i: revision.incarnation, v: revision.version },
        ...rev,
      },
      holds: (item) => {
        const held = entryOf(item, name);
        return (
          held === undefined ||
          held.incarnation !== revision.incarnation ||
          held.version <= revision.version
        );
      },
      apply: (item) => ({
        ...copy(item, WAITING_KEY),
        kind: "waiting",
        [name]: { i: revision.incarnation, v: revision.version },
      }),
    };
  }
  const orSeen = seen !== undefined ? " OR #w.#i = :seen" : "";
  return {
    key: WAITING_KEY,
    action: "update",
    updateExpression: "REMOVE #w DELETE meshes :m",
    conditionExpression: `attribute_not_exists(#w) OR (#w.#i = :i AND #w.#v < :v)${orSeen}`,
    names,
    values: { ":m": new Set([mesh]), ...rev, ...(seen !== undefined ? { ":seen": seen } : {}) },
    holds: (item) => {
      const held = entryOf(item, name);
      return (
        held === undefined ||
        (held.incarnation === revision.incarnation && held.version < revision.version) ||
        (seen !== undefined && held.incarnation === seen)
      );
    },
    apply: (item) => {
      const next: Item = { ...copy(item, WAITING_KEY) };
      delete next[name];
      const legacy = new Set(legacyMeshes(item));
      legacy.delete(mesh);
      if (legacy.size > 0) next.meshes = legacy;
      else delete next.meshes;
      return next;
    },
  };
}

/**
 * The meshes the `waiting` item lists, each with the item revision its entry names (undefined:
 * an entry of the string set written before decision 111).
 */
export function waitingEntries(item: Item | undefined): Map<string, ItemRevision | undefined> {
  const entries = new Map<string, ItemRevision | undefined>();
  for (const mesh of legacyMeshes(item)) entries.set(mesh, undefined);
  for (const name of Object.keys(item ?? {})) {
    if (!name.startsWith(WAITING_ENTRY_PREFIX)) continue;
    entries.set(name.slice(WAITING_ENTRY_PREFIX.length), entryOf(item, name));
  }
  return entries;
}

/** The meshes a `waiting` item lists. */
export function waitingMeshes(item: Item | undefined): string[] {
  return [...waitingEntries(item).keys()];
}

function legacyMeshes(item: Item | undefined): string[] {
  const meshes = item?.meshes;
  return meshes instanceof Set ? [...meshes].filter((m): m is string => typeof m === "string") : [];
}

function entryOf(item: Item | undefined, name: string): ItemRevision | undefined {
  if (item === undefined || !Object.hasOwn(item, name)) return undefined;
  const value = item[name] as { i?: unknown; v?: unknown } | undefined;
  if (typeof value?.i !== "string" || typeof value.v !== "number") return undefined;
  return { incarnation: value.i, version: value.v };
}
