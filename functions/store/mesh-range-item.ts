import type { ClaimWrite, Item } from "./claim-items.ts";
import type { ItemRevision, MeshRange } from "./ports.ts";

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
