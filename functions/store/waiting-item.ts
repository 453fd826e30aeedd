import { type ClaimWrite, copy, type Item, WAITING_KEY } from "./claim-items.ts";
import type { ItemRevision, WaitingRequest } from "./ports.ts";

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
