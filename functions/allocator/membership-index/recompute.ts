import type { MembershipIndex, MeshSource, VipItemStore } from "../../store/ports.ts";
import { listedServices, tablesView } from "../pass/service-set-view.ts";

/** A mesh's service set three ways: from the tables (the truth), the index, and its item. */
export interface MeshComparison {
  readonly mesh: string;
  readonly exists: boolean;
  /** The full recompute from the dataplanes table (empty when the mesh does not exist). */
  readonly fromTables: readonly string[];
  readonly fromIndex: readonly string[];
  /** Undefined when the mesh has no item. */
  readonly fromItem: readonly string[] | undefined;
  /** The index's view of the mesh differs from the tables: [missing, extra]. */
  readonly index: { readonly missing: readonly string[]; readonly extra: readonly string[] };
  /** The item differs from the tables (an absent item of an existing mesh lists nothing). */
  readonly item: { readonly missing: readonly string[]; readonly extra: readonly string[] };
  readonly agrees: boolean;
}

function difference(truth: readonly string[], other: readonly string[]) {
  const has = new Set(other);
  const should = new Set(truth);
  return {
    missing: truth.filter((service) => !has.has(service)),
    extra: other.filter((service) => !should.has(service)),
  };
}

/**
 * The full recompute as an oracle: derives the mesh's service set from the dataplanes table
 * itself (a Query of the mesh and a Scan for the ingresses; never on the event path) and
 * compares it with the membership index and the mesh's VIP item. The repair of a mesh that
 * disagrees is a mesh pass in `tables` mode (reconcileMesh without an index view), and an
 * index rebuild for the mesh.
 */
export async function recomputeMesh(
  mesh: string,
  ports: {
    readonly source: MeshSource;
    readonly index: MembershipIndex;
    readonly vipItems: VipItemStore;
  },
): Promise<MeshComparison> {
  const [exists, item, fromIndex] = await Promise.all([
    ports.source.meshExists(mesh),
    ports.vipItems.get(mesh),
    ports.index.servicesOf(mesh),
  ]);
  const fromTables = exists ? (await tablesView(ports.source).read(mesh, item, 1)).services : [];
  const fromItem = item === undefined ? undefined : listedServices(item).sort();
  const index = exists ? difference(fromTables, fromIndex) : { missing: [], extra: [] };
  const itemDiff = difference(fromTables, fromItem ?? []);
  const agrees =
    index.missing.length + index.extra.length + itemDiff.missing.length + itemDiff.extra.length ===
      0 && (exists ? item !== undefined : item === undefined);
  return { mesh, exists, fromTables, fromIndex, fromItem, index, item: itemDiff, agrees };
}
