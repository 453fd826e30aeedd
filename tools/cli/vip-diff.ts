import { emptyRecord, own } from "../../functions/domain/records.ts";
import type { VipItem } from "../../functions/domain/types.ts";
import { diffMesh, type MeshDiff } from "../../functions/reader/diff.ts";
import type { MeshView } from "../../functions/reader/snapshot.ts";

/**
 * What changed in one mesh's VIP item between two reads: the reader's {@link MeshDiff} (`added`:
 * the mesh was created, `removed`: deleted), and the services newly without a VIP.
 */
export interface MeshChange extends MeshDiff {
  /** Services newly without a VIP, with the reason. */
  readonly unallocated: Readonly<Record<string, string>>;
  /** Hosts newly without a VIP, with the reason (present only when some are). */
  readonly unallocatedHosts?: Readonly<Record<string, string>>;
}

/** A VIP item as the reader sees it (only what the diff compares needs to be exact). */
function viewOf(item: VipItem): MeshView {
  return {
    mesh: item.mesh,
    version: item.version,
    incarnation: item.incarnation,
    cidr: item.cidr,
    updatedAt: item.updatedAt,
    vips: new Map(Object.entries(item.vips)),
    unallocated: new Map(Object.entries(item.unallocated ?? {})),
    hosts: new Map(Object.entries(item.hosts ?? {})),
    unallocatedHosts: new Map(Object.entries(item.unallocatedHosts ?? {})),
    pending: item.pending ?? [],
    pendingHosts: item.pendingHosts ?? [],
  };
}

/**
 * The difference between two reads of a mesh's item; undefined when nothing changed. A new
 * version is a change even when no VIP moved (e.g. only `unallocated` did).
 */
export function diffVipItems(
  mesh: string,
  before: VipItem | undefined,
  after: VipItem | undefined,
): MeshChange | undefined {
  if (before === undefined && after === undefined) return undefined;
  if (before !== undefined && after !== undefined && before.version === after.version) {
    return undefined;
  }
  const diff = diffMesh(
    mesh,
    before === undefined ? undefined : viewOf(before),
    after === undefined ? undefined : viewOf(after),
  ) ?? {
    mesh,
    change: "changed",
    version: after?.version,
    previousVersion: before?.version,
    added: [],
    removed: [],
    changed: [],
  };
  // Names are data: records without a prototype, lookups of own entries only.
  const unallocated = emptyRecord<string>();
  for (const [service, reason] of Object.entries(after?.unallocated ?? {})) {
    if (own(before?.unallocated, service) === undefined) unallocated[service] = reason;
  }
  const unallocatedHosts = emptyRecord<string>();
  for (const [host, reason] of Object.entries(after?.unallocatedHosts ?? {})) {
    if (own(before?.unallocatedHosts, host) === undefined) unallocatedHosts[host] = reason;
  }
  return {
    ...diff,
    unallocated,
    ...(Object.keys(unallocatedHosts).length > 0 ? { unallocatedHosts } : {}),
  };
}

const byName = <T>(record: Readonly<Record<string, T>>): [string, T][] =>
  Object.entries(record).sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0));

/**
 * Human lines for a change: a header with the version, then `+ service vip`, `- service vip
 * (quarantined)` (or where the service still lives), `~ service old -> new`, `! service reason`.
 * `holders(service)` names the other meshes that still list a removed service.
 */
export function formatChange(
  change: MeshChange,
  holders: (name: string, host?: boolean) => readonly string[],
  quarantineSeconds: number,
): string[] {
  const header =
    change.change === "removed"
      ? `mesh ${change.mesh}: deleted (VIP item removed at version ${change.previousVersion})`
      : change.change === "added"
        ? `mesh ${change.mesh}: version ${change.version} (new)`
        : `mesh ${change.mesh}: version ${change.version} (was ${change.previousVersion})`;
  const lines = [header];
  for (const { service, vip } of change.added) lines.push(`  + ${service} ${vip}`);
  for (const { service, vip } of change.removed) {
    const elsewhere = holders(service);
    const fate =
      elsewhere.length > 0
        ? `still in ${elsewhere.join(", ")}`
        : quarantineSeconds > 0
          ? "quarantined"
          : "released";
    lines.push(`  - ${service} ${vip} (${fate})`);
  }
  for (const { service, from, to } of change.changed) {
    lines.push(`  ~ ${service} ${from} -> ${to}`);
  }
  for (const [service, reason] of byName(change.unallocated)) {
    lines.push(`  ! ${service} has no VIP: ${reason}`);
  }
  // External services' hosts, under their own names (a host is never a service).
  const hosts = change.hosts;
  for (const { service: host, vip } of hosts?.added ?? []) lines.push(`  + host ${host} ${vip}`);
  for (const { service: host, vip } of hosts?.removed ?? []) {
    const elsewhere = holders(host, true);
    const fate =
      elsewhere.length > 0
        ? `still in ${elsewhere.join(", ")}`
        : quarantineSeconds > 0
          ? "quarantined"
          : "released";
    lines.push(`  - host ${host} ${vip} (${fate})`);
  }
  for (const { service: host, from, to } of hosts?.changed ?? []) {
    lines.push(`  ~ host ${host} ${from} -> ${to}`);
  }
  for (const [host, reason] of byName(change.unallocatedHosts ?? {})) {
    lines.push(`  ! host ${host} has no VIP: ${reason}`);
  }
  return lines;
}
