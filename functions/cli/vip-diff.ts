import { emptyRecord, own } from "../domain/records.ts";
import type { VipItem } from "../domain/types.ts";

/** What changed in one mesh's VIP item between two reads. */
export interface MeshChange {
  readonly mesh: string;
  readonly version: number | undefined;
  readonly previousVersion: number | undefined;
  /** The VIP item appeared (the mesh was created) or disappeared (the mesh was deleted). */
  readonly lifecycle: "created" | "deleted" | "updated";
  readonly added: Readonly<Record<string, string>>;
  readonly removed: Readonly<Record<string, string>>;
  /** service -> [old VIP, new VIP] (renumbered, e.g. after a VIP_CIDR change). */
  readonly changed: Readonly<Record<string, readonly [string, string]>>;
  /** Services newly without a VIP, with the reason. */
  readonly unallocated: Readonly<Record<string, string>>;
}

/** The difference between two reads of a mesh's item; undefined when nothing changed. */
export function diffVipItems(
  mesh: string,
  before: VipItem | undefined,
  after: VipItem | undefined,
): MeshChange | undefined {
  if (before === undefined && after === undefined) return undefined;
  if (before !== undefined && after !== undefined && before.version === after.version) {
    return undefined;
  }
  // Names are data: records without a prototype, lookups of own entries only.
  const oldVips = before?.vips;
  const newVips = after?.vips;
  const added = emptyRecord<string>();
  const removed = emptyRecord<string>();
  const changed = emptyRecord<readonly [string, string]>();
  for (const [service, vip] of Object.entries(newVips ?? {})) {
    const old = own(oldVips, service);
    if (old === undefined) added[service] = vip;
    else if (old !== vip) changed[service] = [old, vip];
  }
  for (const [service, vip] of Object.entries(oldVips ?? {})) {
    if (own(newVips, service) === undefined) removed[service] = vip;
  }
  const unallocated = emptyRecord<string>();
  for (const [service, reason] of Object.entries(after?.unallocated ?? {})) {
    if (own(before?.unallocated, service) === undefined) unallocated[service] = reason;
  }
  return {
    mesh,
    version: after?.version,
    previousVersion: before?.version,
    lifecycle: before === undefined ? "created" : after === undefined ? "deleted" : "updated",
    added,
    removed,
    changed,
    unallocated,
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
  holders: (service: string) => readonly string[],
  quarantineSeconds: number,
): string[] {
  const header =
    change.lifecycle === "deleted"
      ? `mesh ${change.mesh}: deleted (VIP item removed at version ${change.previousVersion})`
      : change.lifecycle === "created"
        ? `mesh ${change.mesh}: version ${change.version} (new)`
        : `mesh ${change.mesh}: version ${change.version} (was ${change.previousVersion})`;
  const lines = [header];
  for (const [service, vip] of byName(change.added)) lines.push(`  + ${service} ${vip}`);
  for (const [service, vip] of byName(change.removed)) {
    const elsewhere = holders(service);
    const fate =
      elsewhere.length > 0
        ? `still in ${elsewhere.join(", ")}`
        : quarantineSeconds > 0
          ? "quarantined"
          : "released";
    lines.push(`  - ${service} ${vip} (${fate})`);
  }
  for (const [service, [from, to]] of byName(change.changed)) {
    lines.push(`  ~ ${service} ${from} -> ${to}`);
  }
  for (const [service, reason] of byName(change.unallocated)) {
    lines.push(`  ! ${service} has no VIP: ${reason}`);
  }
  return lines;
}
