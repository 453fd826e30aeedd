import {
  type Contribution,
  contributionsOf,
  type DataplaneKey,
  dataplaneId,
  diffContributions,
  parseDataplaneId,
  sameContributions,
} from "../../domain/contributions.ts";
import type { InputIssue } from "../../domain/errors.ts";
import type {
  IndexedDataplane,
  IndexWrite,
  MembershipIndex,
  MeshSource,
  SourceRead,
} from "../../store/ports.ts";
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
    const fresh = page.records.filter((record) => !seen.has(dataplaneId(record)));
    for (const record of fresh) seen.add(dataplaneId(record));
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
  readonly stored?: ReadonlyMap<string, IndexedDataplane>;
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
  read: ReadonlyArray<{ readonly key: DataplaneKey; readonly item: unknown }>,
  index: MembershipIndex,
  options: ReconcileOptions,
  extraRemovals: ReadonlyMap<string, readonly Contribution[]> = new Map(),
  extraAdds: ReadonlySet<string> = new Set(),
): Promise<number> {
  if (read.length === 0) return 0;
  const stored =
    options.stored ?? (await index.getDataplanes(read.map((dataplane) => dataplane.key)));
  let dataplanes = read;
  if (options.stored === undefined) {
    if (options.reread === undefined) throw new Error("reconcileDataplanes needs stored or reread");
    const changing = read.filter(({ key, item }) => {
      const id = dataplaneId(key);
      const before = stored.get(id)?.contributions ?? [];
      return (
        extraRemovals.has(id) ||
        extraAdds.has(id) ||
        !sameContributions(before, contributionsOf(key, item).contributions)
      );
    });
    if (changing.length === 0) return 0;
    const again = await options.reread.dataplanes(changing.map(({ key }) => key));
    const items = new Map(again.records.map((record) => [dataplaneId(record), record.item]));
    dataplanes = changing.map(({ key }) => ({ key, item: items.get(dataplaneId(key)) }));
  }
  const writes: IndexWrite[] = [];
  for (const { key, item } of dataplanes) {
    const id = dataplaneId(key);
    const desired = contributionsOf(key, item);
    for (const issue of desired.issues) options.onIssue?.(issue);
    const before: IndexedDataplane | undefined = stored.get(id);
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
  return writes.filter((write) => write.record !== undefined && !lost.has(dataplaneId(write.key)))
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
  const records = new Map<string, IndexedDataplane>();
  for await (const page of index.scan()) {
    for (const entry of page.entries) {
      if (options.mesh !== undefined && entry.mesh !== options.mesh) continue;
      const id = dataplaneId(entry.dataplane);
      const list = entriesOf.get(id) ?? [];
      list.push({ mesh: entry.mesh, service: entry.service });
      entriesOf.set(id, list);
    }
    for (const record of page.dataplanes) records.set(dataplaneId(record.key), record);
  }
  const suspects = new Map<string, DataplaneKey>();
  const orphanEntries = new Map<string, Contribution[]>();
  const missingEntries = new Set<string>();
  for (const [id, entries] of entriesOf) {
    const listed = records.get(id)?.contributions ?? [];
    const { added: orphans } = diffContributions(listed, entries);
    if (orphans.length > 0) {
      orphanEntries.set(id, orphans);
      suspects.set(id, records.get(id)?.key ?? parseDataplaneId(id));
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
  const stored = await index.getDataplanes(keys);
  const now = await source.dataplanes(keys);
  const items = new Map(now.records.map((record) => [dataplaneId(record), record.item]));
  const written = await reconcileDataplanes(
    keys.map((key) => ({ key, item: items.get(dataplaneId(key)) })),
    index,
    { ...options, stored },
    orphanEntries,
    missingEntries,
  );
  let entries = 0;
  for (const list of orphanEntries.values()) entries += list.length;
  return { records: written, entries: entries + missingEntries.size };
}
