import type { InputIssue } from "../../domain/errors.ts";
import { externalServiceSet } from "../../domain/external-service.ts";
import { compareServices, deriveServiceSet } from "../../domain/service-set.ts";
import type { VipItem } from "../../domain/types.ts";
import type { MeshSource } from "../../store/ports.ts";
import type { BatchIngresses } from "./batch-ingresses.ts";

/**
 * Where mesh passes get service sets: `index`, incremental (an event costs what it changed);
 * `tables`, the full recompute from the dataplanes table (the oracle and repair path).
 */
export type ServiceSetMode = "index" | "tables";

/** Where a mesh pass gets the mesh's service set, and how it checks it after its write. */
export interface ServiceSetView {
  /** The service set now, given the item the pass read (sorted). */
  read(
    mesh: string,
    current: VipItem | undefined,
    attempt: number,
  ): Promise<{ services: string[]; issues: readonly InputIssue[] }>;
  /** Whether the set is still `services` (the post-write check), reading as little as it can. */
  still(mesh: string, services: readonly string[]): Promise<boolean>;
  /**
   * The services the batch's records named in this mesh (absent: not known). Of those the pass
   * finds neither in the set nor in the item, the claims are read for a membership a failed
   * pass asserted and left behind (decision 114).
   */
  readonly touched?: ReadonlySet<string>;
}

/** Whether two sorted service lists are the same. */
export function same(a: readonly string[], b: readonly string[]): boolean {
  return a.length === b.length && a.every((service, i) => service === b[i]);
}

/**
 * The full recompute: every dataplane of the mesh (a Query), every ingress (a Scan of the
 * whole dataplanes table) and, with the optional table, the mesh's external services (a Query). Its cost grows with the mesh and the table; it is the oracle of the
 * incremental view and the repair path.
 */
export function tablesView(source: MeshSource, ingresses?: BatchIngresses): ServiceSetView {
  const read = async (mesh: string, attempt: number) => {
    const [dataplanes, found, external] = await Promise.all([
      source.dataplanesOf(mesh),
      // The batch's shared read on a first attempt; a later attempt follows a change seen
      // after a write, so it reads the tables again.
      ingresses !== undefined && attempt === 1 ? ingresses.get() : source.ingresses(),
      source.externalServices
        ? source.externalServicesOf(mesh)
        : { records: [], issues: [] as InputIssue[] },
    ]);
    const derived = deriveServiceSet(mesh, dataplanes.records, found.records);
    if (external.records.length === 0) {
      return {
        services: derived.services,
        issues: [...dataplanes.issues, ...found.issues, ...derived.issues],
      };
    }
    const externals = externalServiceSet(mesh, external.records);
    return {
      services: [...new Set([...derived.services, ...externals.names])].sort(compareServices),
      issues: [
        ...dataplanes.issues,
        ...found.issues,
        ...derived.issues,
        ...external.issues,
        ...externals.issues,
      ],
    };
  };
  return {
    read: (mesh, _current, attempt) => read(mesh, attempt),
    // Fresh reads, not the batch's view of the ingresses (their issues were reported already).
    still: async (mesh, services) => same((await read(mesh, 2)).services, services),
  };
}

/** The services a VIP item lists: allocated, unallocated, or still pending an address. */
export function listedServices(item: VipItem): string[] {
  return [
    ...Object.keys(item.vips),
    ...Object.keys(item.unallocated ?? {}),
    ...(item.pending ?? []),
  ];
}
