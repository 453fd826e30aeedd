import {
  type Contribution,
  type ContributorKey,
  contributionsOf,
  contributorId,
  diffContributions,
  parseContributorId,
  sameContributions,
} from "../../domain/contributions.ts";
import type { InputIssue } from "../../domain/errors.ts";
import type {
  IndexedContributor,
  IndexWrite,
  MembershipIndex,
  MeshSource,
  SourceRead,
} from "../../store/ports.ts";
import type { BatchIngresses } from "../pass/service-set-view.ts";
import { agreeWithWinners } from "./update.ts";

export interface RebuildOptions {
  /** Only the dataplanes stored under this mesh, the ingresses, and this mesh's entries. */
  readonly mesh?: string;
  /** After each page of the dataplanes table: how many dataplanes were read so far. */
  readonly onPage?: (read: number) => void;
  readonly onIssue?: (issue: InputIssue) => void;
}

export interface RebuildResult {
  /** Dataplanes read from the dataplanes table. */
  readonly dataplanes: number;
  /** Dataplane records written (created, changed or removed). */
  readonly recordsWritten: number;
  /** Entries added or removed because they disagreed with their dataplane's record. */
  readonly entriesRepaired: number;
}

/**
 * Derives the membership index from the dataplanes table: for deployments onto tables that
 * already hold data, and for recovery. Two passes, both paged:
 * 1. every dataplane (a Scan; with `mesh`, that mesh's Query and the ingresses) is read, what
 *    it contributes is compared with its record, and changed records are written (conditional
 *    on their version: a record an event wrote meanwhile wins, and the entries follow it);
 * 2. the index is scanned: entries that no record lists, records of dataplanes the first pass
 *    did not see, and records whose entries are missing are checked against the table again
 *    (a fresh read of those dataplanes) and repaired.
 * Idempotent: a second run writes nothing. Safe while events flow: every write is either
 * idempotent (entries) or conditional (records), and anything found inconsistent is re-read
 * from the dataplanes table before it is changed.
 */
export async function rebuildIndex(
  source: MeshSource,
  index: MembershipIndex,
  options: RebuildOptions = {},
): Promise<RebuildResult> {
  const seen = new Set<string>();
  let dataplanes = 0;
  let recordsWritten = 0;
  const pages: AsyncIterable<SourceRead> =
    options.mesh === undefined ? source.allDataplanes() : meshPages(source, options.mesh);
  for await (const page of pages) {
    for (const issue of page.issues) options.onIssue?.(issue);
    const fresh = page.records.filter((record) => !seen.has(contributorId(record)));
    for (const record of fresh) seen.add(contributorId(record));
    dataplanes += fresh.length;
    recordsWritten += await reconcileDataplanes(
      fresh.map((record) => ({ key: record, item: record.item })),
      index,
      { ...options, reread: source },
    );
    options.onPage?.(dataplanes);
  }
  const repaired = await repairFromScan(source, index, seen, options);
  return {
    dataplanes,
    recordsWritten: recordsWritten + repaired.records,
    entriesRepaired: repaired.entries,
  };
}

async function* meshPages(source: MeshSource, mesh: string): AsyncIterable<SourceRead> {
  yield await source.dataplanesOf(mesh);
  yield await source.ingresses();
  if (source.externalServices) yield await source.externalServicesOf(mesh);
}

/** How {@link reconcileDataplanes} knows its table reads are not older than its index reads. */
export interface ReconcileOptions extends RebuildOptions {
  /**
   * The records as read *before* the items were read from the table (the caller read them in
   * that order). Absent: they are read here, and then `reread` must be given.
   */
  readonly stored?: ReadonlyMap<string, IndexedContributor>;
  /**
   * Where the dataplanes a write would change are read again, after their records: a table
   * read older than the record read could carry data older than an event that wrote the
   * record in between, and the write, conditional on that record's version, would win.
   */
  readonly reread?: Pick<MeshSource, "dataplanes">;
}

/**
 * Makes each dataplane's record say what its item contributes; returns records written.
 * `extraRemovals`: entries to remove unless the item contributes them; `extraAdds`: dataplanes
 * whose every contribution is written again (idempotent). Every write rests on a table read
 * made after the record read its condition names (see {@link ReconcileOptions}).
 */
export async function reconcileDataplanes(
  read: ReadonlyArray<{ readonly key: ContributorKey; readonly item: unknown }>,
  index: MembershipIndex,
  options: ReconcileOptions,
  extraRemovals: ReadonlyMap<string, readonly Contribution[]> = new Map(),
  extraAdds: ReadonlySet<string> = new Set(),
): Promise<number> {
  if (read.length === 0) return 0;
  const stored =
    options.stored ?? (await index.getContributors(read.map((dataplane) => dataplane.key)));
  let dataplanes = read;
  if (options.stored === undefined) {
    if (options.reread === undefined) throw new Error("reconcileDataplanes needs stored or reread");
    const changing = read.filter(({ key, item }) => {
      const id = contributorId(key);
      const before = stored.get(id)?.contributions ?? [];
      return (
        extraRemovals.has(id) ||
        extraAdds.has(id) ||
        !sameContributions(before, contributionsOf(key, item).contributions)
      );
    });
    if (changing.length === 0) return 0;
    const again = await options.reread.dataplanes(changing.map(({ key }) => key));
    const items = new Map(again.records.map((record) => [contributorId(record), record.item]));
    dataplanes = changing.map(({ key }) => ({ key, item: items.get(contributorId(key)) }));
  }
  const writes: IndexWrite[] = [];
  for (const { key, item } of dataplanes) {
    const id = contributorId(key);
    const desired = contributionsOf(key, item);
    for (const issue of desired.issues) options.onIssue?.(issue);
    const before: IndexedContributor | undefined = stored.get(id);
    const had = [...(before?.contributions ?? []), ...(extraRemovals.get(id) ?? [])];
    const { added, removed } = diffContributions(had, desired.contributions);
    const recordChanged =
      before === undefined
        ? desired.contributions.length > 0
        : !sameContributions(before.contributions, desired.contributions);
    const add = extraAdds.has(id) ? desired.contributions : added;
    if (!recordChanged && add.length === 0 && removed.length === 0) continue;
    writes.push({
      key,
      add,
      remove: removed,
      ...(recordChanged
        ? {
            record: {
              contributions: desired.contributions,
              sequence: before?.sequence ?? "",
              expectedVersion: before?.version,
            },
          }
        : {}),
    });
  }
  if (writes.length === 0) return 0;
  const lost = await index.write(writes);
  if (lost.size > 0) await agreeWithWinners(writes, lost, index);
  return writes.filter((write) => write.record !== undefined && !lost.has(contributorId(write.key)))
    .length;
}

/** Pass 2: what the index holds that its records, or the table, do not agree with. */
async function repairFromScan(
  source: MeshSource,
  index: MembershipIndex,
  seen: ReadonlySet<string>,
  options: RebuildOptions,
): Promise<{ records: number; entries: number }> {
  const entriesOf = new Map<string, Contribution[]>();
  const records = new Map<string, IndexedContributor>();
  for await (const page of index.scan()) {
    for (const entry of page.entries) {
      if (options.mesh !== undefined && entry.mesh !== options.mesh) continue;
      const id = contributorId(entry.dataplane);
      const list = entriesOf.get(id) ?? [];
      list.push({ mesh: entry.mesh, service: entry.service });
      entriesOf.set(id, list);
    }
    for (const record of page.dataplanes) records.set(contributorId(record.key), record);
  }
  const suspects = new Map<string, ContributorKey>();
  const orphanEntries = new Map<string, Contribution[]>();
  const missingEntries = new Set<string>();
  for (const [id, entries] of entriesOf) {
    const listed = records.get(id)?.contributions ?? [];
    const { added: orphans } = diffContributions(listed, entries);
    if (orphans.length > 0) {
      orphanEntries.set(id, orphans);
      suspects.set(id, records.get(id)?.key ?? parseContributorId(id));
    }
  }
  for (const [id, record] of records) {
    const relevant = record.contributions.filter(
      (pair) => options.mesh === undefined || pair.mesh === options.mesh,
    );
    const { added: missing } = diffContributions(entriesOf.get(id) ?? [], relevant);
    if (missing.length > 0) {
      missingEntries.add(id);
      suspects.set(id, record.key);
    }
    // A record of a dataplane the first pass did not read (gone from the table, or written
    // after the pass went by): check it against the table.
    if (!seen.has(id) && (options.mesh === undefined || relevant.length > 0)) {
      suspects.set(id, record.key);
    }
  }
  if (suspects.size === 0) return { records: 0, entries: 0 };
  const keys = [...suspects.values()];
  // Records first, then the table: the writes rest on a table read newer than their records.
  const stored = await index.getContributors(keys);
  const now = await source.dataplanes(keys);
  const items = new Map(now.records.map((record) => [contributorId(record), record.item]));
  const written = await reconcileDataplanes(
    keys.map((key) => ({ key, item: items.get(contributorId(key)) })),
    index,
    { ...options, stored },
    orphanEntries,
    missingEntries,
  );
  let entries = 0;
  for (const list of orphanEntries.values()) entries += list.length;
  return { records: written, entries: entries + missingEntries.size };
}

/** Where one dataplane's part of the index disagrees with the dataplanes table. */
export interface IndexDrift {
  readonly dataplane: ContributorKey;
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
  readonly key: ContributorKey;
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
    truth.set(contributorId(record), { key: record, item: record.item });
  for (const record of ingress.records) {
    const id = contributorId(record);
    if (truth.has(id)) continue;
    const pairs = contributionsOf(record, record.item).contributions;
    if (pairs.some((pair) => pair.mesh === mesh)) truth.set(id, { key: record, item: record.item });
  }
  const entered = new Map<string, Contribution[]>();
  const keys = new Map<string, ContributorKey>();
  for (const entry of entries) {
    const id = contributorId(entry.dataplane);
    const list = entered.get(id) ?? [];
    list.push({ mesh: entry.mesh, service: entry.service });
    entered.set(id, list);
    keys.set(id, entry.dataplane);
  }
  for (const [id, { key }] of truth) keys.set(id, key);
  for (const record of [...stored, ...externalStored])
    keys.set(contributorId(record.key), record.key);
  // The mesh's own records come with its partition; others (ingresses stored elsewhere,
  // dataplanes of other meshes with entries here) are read by key.
  const records = new Map(
    [...stored, ...externalStored].map((record) => [contributorId(record.key), record]),
  );
  const elsewhere = [...keys.values()].filter((key) => key.mesh !== mesh);
  for (const [id, record] of await index.getContributors(elsewhere, consistent)) {
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
  key: ContributorKey,
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
  const [records, entries] = await Promise.all([
    index.getContributors(keys),
    index.entriesOf(mesh),
  ]);
  const fresh = await source.dataplanes(keys);
  const items = new Map(fresh.records.map((record) => [contributorId(record), record.item]));
  const entered = new Map<string, Contribution[]>();
  for (const entry of entries) {
    const id = contributorId(entry.dataplane);
    entered.set(id, [...(entered.get(id) ?? []), { mesh: entry.mesh, service: entry.service }]);
  }
  const confirmed: IndexDrift[] = [];
  const removals = new Map<string, Contribution[]>();
  const adds = new Set<string>();
  for (const key of keys) {
    const id = contributorId(key);
    const still = driftOf(mesh, key, items.get(id), entered.get(id) ?? [], records.get(id));
    if (still === undefined) continue;
    confirmed.push(still);
    if (still.orphan.length > 0) removals.set(id, [...still.orphan]);
    if (still.missing.length > 0) adds.add(id);
  }
  await reconcileDataplanes(
    confirmed.map((found) => ({
      key: found.dataplane,
      item: items.get(contributorId(found.dataplane)),
    })),
    index,
    { stored: records },
    removals,
    adds,
  );
  return confirmed;
}
