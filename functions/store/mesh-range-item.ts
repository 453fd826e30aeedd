import type { ClaimWrite, Item } from "./claim-items.ts";

/**
 * The range a mesh's item was last brought into by a completed pass (decision 055): pk
 * `range#<mesh>` in the claims table, `cidr` the pass's `VIP_CIDR`. A batch may skip a mesh's
 * pass (decision 073) only while this equals the range it runs with: after a change of
 * `VIP_CIDR`, the next record touching the mesh still renumbers it, as the contract says.
 */
export const RANGE_PREFIX = "range#";

export function meshRangeKey(mesh: string): string {
  return `${RANGE_PREFIX}${mesh}`;
}

export function meshRangeWrite(mesh: string, cidr: string): ClaimWrite {
  const key = meshRangeKey(mesh);
  const item: Item = { pk: key, kind: "range", mesh, cidr };
  return { key, action: "put", item, holds: () => true, apply: () => ({ ...item }) };
}

/** The mesh and range a `range#` item records; undefined for anything else. */
export function decodeMeshRange(
  item: Item | undefined,
): { mesh: string; cidr: string } | undefined {
  if (item === undefined || typeof item.mesh !== "string" || typeof item.cidr !== "string") {
    return undefined;
  }
  return { mesh: item.mesh, cidr: item.cidr };
}
