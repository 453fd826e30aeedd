import { type ClaimWrite, copy, type Item, WAITING_KEY } from "./claim-items.ts";

/** Adds `mesh` to, or removes it from, the meshes waiting for an address. */
export function waitingWrite(mesh: string, waiting: boolean): ClaimWrite {
  return {
    key: WAITING_KEY,
    action: "update",
    updateExpression: waiting ? "SET kind = :kind ADD meshes :m" : "DELETE meshes :m",
    values: waiting ? { ":kind": "waiting", ":m": new Set([mesh]) } : { ":m": new Set([mesh]) },
    holds: () => true,
    apply: (item) => {
      const meshes = new Set(waitingMeshes(item));
      if (waiting) meshes.add(mesh);
      else meshes.delete(mesh);
      const next: Item = { ...copy(item, WAITING_KEY), kind: "waiting" };
      if (meshes.size > 0) next.meshes = meshes;
      else delete next.meshes;
      return next;
    },
  };
}

/** The meshes a `waiting` item lists (a string set; absent when empty). */
export function waitingMeshes(item: Item | undefined): string[] {
  const meshes = item?.meshes;
  return meshes instanceof Set ? [...meshes].filter((m): m is string => typeof m === "string") : [];
}
