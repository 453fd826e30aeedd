import {
  type Contribution,
  contributionsOf,
  type DataplaneKey,
  dataplaneId,
  diffContributions,
  sameContributions,
} from "../../domain/contributions.ts";
import type { InputIssue } from "../../domain/errors.ts";
import type { MembershipIndex, MeshSource } from "../../store/ports.ts";
import type { BatchIngresses } from "../pass/batch-ingresses.ts";
import { reconcileDataplanes } from "./rebuild.ts";

/** Where one dataplane's part of the index disagrees with the dataplanes table. */
export interface IndexDrift {
  readonly dataplane: DataplaneKey;
  /** Entries of the mesh the dataplane should have and has not. */
  readonly missing: readonly Contribution[];
  /** Entries of the mesh the dataplane has and should not. */
  readonly orphan: readonly Contribution[];
  /** Its record does not say what it contributes. */
  readonly staleRecord: boolean;
  /** The version of its record when the drift was read (undefined: no record). */
  readonly recordVersion?: number;
}

interface Truth {
  readonly key: DataplaneKey;
  readonly item: unknown;
}

/**
 * One mesh's part of the membership index against the dataplanes table (the mesh's Query and
 * the ingresses): the dataplanes whose entries in the mesh, or whose record, disagree. Reads
 * only; nothing is changed. With `consistent` false the reads are eventually consistent (half
 * the price): {@link repairIndexDrift} reads what was found again, strongly, before changing it.
 */
export async function meshIndexDrift(
  mesh: string,
  source: MeshSource,
  ingresses: BatchIngresses,
  index: MembershipIndex,
  consistent = true,
): Promise<{ drift: IndexDrift[]; issues: InputIssue[]; services: string[] }> {
  const none = { records: [], issues: [] };
  const [own, ingress, entries, stored, external, externalStored] = await Promise.all([
    source.dataplanesOf(mesh, consistent),
    ingresses.get(),
    index.entriesOf(mesh, consistent),
    index.recordsOf(mesh, consistent),
    // The external services of the mesh and their records, when the deployment has them.
    source.externalServices ? source.externalServicesOf(mesh, consistent) : none,
    source.externalServices ? index.recordsOf(mesh, consistent, "external-service") : [],
  ]);
  const truth = new Map<string, Truth>();
  for (const record of [...own.records, ...external.records])
    truth.set(dataplaneId(record), { key: record, item: record.item });
  for (const record of ingress.records) {
    const id = dataplaneId(record);
    if (truth.has(id)) continue;
    const pairs = contributionsOf(record, record.item).contributions;
    if (pairs.some((pair) => pair.mesh === mesh)) truth.set(id, { key: record, item: record.item });
  }
  const entered = new Map<string, Contribution[]>();
  const keys = new Map<string, DataplaneKey>();
  for (const entry of entries) {
    const id = dataplaneId(entry.dataplane);
    const list = entered.get(id) ?? [];
    list.push({ mesh: entry.mesh, service: entry.service });
    entered.set(id, list);
    keys.set(id, entry.dataplane);
  }
  for (const [id, { key }] of truth) keys.set(id, key);
  for (const record of [...stored, ...externalStored])
    keys.set(dataplaneId(record.key), record.key);
  // The mesh's own records come with its partition; others (ingresses stored elsewhere,
  // dataplanes of other meshes with entries here) are read by key.
  const records = new Map(
    [...stored, ...externalStored].map((record) => [dataplaneId(record.key), record]),
  );
  const elsewhere = [...keys.values()].filter((key) => key.mesh !== mesh);
  for (const [id, record] of await index.getDataplanes(elsewhere, consistent)) {
    records.set(id, record);
  }
  const drift: IndexDrift[] = [];
  for (const [id, key] of keys) {
    const found = driftOf(mesh, key, truth.get(id)?.item, entered.get(id) ?? [], records.get(id));
    if (found !== undefined) drift.push(found);
  }
  // The mesh's service set as the index holds it (what a pass over the index would read).
  const services = [...new Set(entries.map((entry) => entry.service))];
  return { drift, issues: [...own.issues, ...ingress.issues, ...external.issues], services };
}

function driftOf(
  mesh: string,
  key: DataplaneKey,
  item: unknown,
  entered: readonly Contribution[],
  record:
    | { readonly contributions: readonly Contribution[]; readonly version?: number }
    | undefined,
): IndexDrift | undefined {
  const wanted = contributionsOf(key, item).contributions;
  const here = wanted.filter((pair) => pair.mesh === mesh);
  const { added: missing, removed: orphan } = diffContributions(entered, here);
  const staleRecord = !sameContributions(record?.contributions ?? [], wanted);
  if (missing.length === 0 && orphan.length === 0 && !staleRecord) return undefined;
  return {
    dataplane: key,
    missing,
    orphan,
    staleRecord,
    ...(record?.version !== undefined ? { recordVersion: record.version } : {}),
  };
}

/**
 * Repairs drift found by {@link meshIndexDrift}: each dataplane's record is read again, then
 * the dataplane from the table (an event may have changed it since), and only what still
 * disagrees is changed, with the index's own conditional record writes on the version read
 * before the table (a record an event writes meanwhile wins). Returns the drift that was
 * confirmed and repaired.
 */
export async function repairIndexDrift(
  mesh: string,
  drift: readonly IndexDrift[],
  source: MeshSource,
  index: MembershipIndex,
): Promise<IndexDrift[]> {
  if (drift.length === 0) return [];
  const keys = drift.map((found) => found.dataplane);
  // The index first, then the table: a record write conditional on a version read *after* the
  // table read could carry table data older than an event processed in between, and win.
  const [records, entries] = await Promise.all([index.getDataplanes(keys), index.entriesOf(mesh)]);
  const fresh = await source.dataplanes(keys);
  const items = new Map(fresh.records.map((record) => [dataplaneId(record), record.item]));
  const entered = new Map<string, Contribution[]>();
  for (const entry of entries) {
    const id = dataplaneId(entry.dataplane);
    entered.set(id, [...(entered.get(id) ?? []), { mesh: entry.mesh, service: entry.service }]);
  }
  const confirmed: IndexDrift[] = [];
  const removals = new Map<string, Contribution[]>();
  const adds = new Set<string>();
  for (const key of keys) {
    const id = dataplaneId(key);
    const still = driftOf(mesh, key, items.get(id), entered.get(id) ?? [], records.get(id));
    if (still === undefined) continue;
    confirmed.push(still);
    if (still.orphan.length > 0) removals.set(id, [...still.orphan]);
    if (still.missing.length > 0) adds.add(id);
  }
  await reconcileDataplanes(
    confirmed.map((found) => ({
      key: found.dataplane,
      item: items.get(dataplaneId(found.dataplane)),
    })),
    index,
    { stored: records },
    removals,
    adds,
  );
  return confirmed;
}
