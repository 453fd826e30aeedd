import { applyPresence } from "../../domain/contributions.ts";
import type { InputIssue } from "../../domain/errors.ts";
import { externalServiceSet } from "../../domain/external-service.ts";
import { compareServices, deriveServiceSet } from "../../domain/service-set.ts";
import type { VipItem } from "../../domain/types.ts";
import type { MembershipIndex, MeshSource, SourceRead } from "../../store/ports.ts";

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

/**
 * The incremental view: the item's services, with only the `touched` ones looked up in the
 * membership index (one `Limit: 1` query each). A mesh with no item, or one whose own record
 * arrived (`touched` = "all"), reads its whole service set from the index (one paged query of
 * its entries), never from the dataplanes table. `named`: the services the batch's records
 * named in the mesh (`touched`, unless that is "all").
 */
export function indexView(
  index: MembershipIndex,
  touched: ReadonlySet<string> | "all",
  known: ReadonlySet<string> = new Set(),
  named: ReadonlySet<string> = touched === "all" ? new Set() : touched,
): ServiceSetView {
  let full = touched === "all";
  /**
   * Which touched services are present. `trusted` are taken as present without asking: what
   * this invocation's own index update wrote. That holds only until another invocation changes
   * the same dataplanes, so it serves the first read alone; a later attempt and the check after
   * a write ask the index about every touched service (a pass that trusted a presence another
   * invocation has since removed finds out there, and goes round again).
   */
  const presence = async (
    mesh: string,
    services: ReadonlySet<string>,
    trusted: ReadonlySet<string>,
  ) => {
    const unknown = [...services].filter((service) => !trusted.has(service));
    const found = unknown.length === 0 ? new Set<string>() : await index.present(mesh, unknown);
    for (const service of services) if (trusted.has(service)) found.add(service);
    return found;
  };
  const none: ReadonlySet<string> = new Set();
  return {
    touched: named,
    async read(mesh, current, attempt) {
      if (touched === "all" || current === undefined) {
        full = true;
        return { services: await index.servicesOf(mesh), issues: [] };
      }
      full = false;
      const present = await presence(mesh, touched, attempt === 1 ? known : none);
      return { services: applyPresence(listedServices(current), touched, present), issues: [] };
    },
    async still(mesh, services) {
      if (full || touched === "all") return same(await index.servicesOf(mesh), services);
      const present = await presence(mesh, touched, none);
      const listed = new Set(services);
      return [...touched].every((service) => present.has(service) === listed.has(service));
    },
  };
}

/**
 * The ingresses as one batch sees them: read once (the adapter scans the whole dataplanes
 * table for them) and shared by every mesh the batch reconciles; a later change to an ingress
 * brings its own stream record. The items that could not be decoded are handed out once, so
 * they are reported once per batch.
 */
export class BatchIngresses {
  private read: Promise<SourceRead> | undefined;
  private issuesHandedOut = false;
  /** How many times the tables were read. */
  reads = 0;

  /** `consistent`: false for the repair sweep's detection reads. */
  constructor(
    private readonly source: MeshSource,
    private readonly consistent = true,
  ) {}

  async get(): Promise<SourceRead> {
    if (this.read === undefined) {
      this.reads++;
      this.read = this.source.ingresses(this.consistent);
    }
    const { records, issues } = await this.read;
    if (this.issuesHandedOut) return { records, issues: [] };
    this.issuesHandedOut = true;
    return { records, issues };
  }
}
