/**
 * The items of the membership index table, defined once for the DynamoDB adapter and the
 * in-memory double:
 * - a contributor entry per (mesh, service, dataplane): pk `m#<mesh>`, sk `<service>#<id>`,
 *   where <id> is the dataplane's id (domain/contributions.ts). A service name never holds
 *   `#`, so `begins_with(sk, "<service>#")` finds exactly that service's contributors;
 * - a record per dataplane of what it contributes now: pk `d#<mesh>` (the mesh it is stored
 *   under; `e#<mesh>` for an external service, whose id ends in `"ExternalService"`), sk `<name>`, with `c` (a list of `{ m, s }`), `seq` (fixed-width stream sequence
 *   number) and `v` (version). A mesh's records are one partition, so the repair sweep reads
 *   them with a Query billed by size, not a key at a time. A dataplane that contributes
 *   nothing keeps its record as a tombstone (`c` empty) while the record that emptied it may
 *   still be delivered again: its `seq` fences off older records (a redelivered INSERT of a
 *   deleted dataplane). Tombstones carry `expiresAt` (epoch seconds) for the table's TTL,
 *   {@link TOMBSTONE_TTL_SECONDS} on: far beyond a stream's 24-hour retention. `p` (a list of
 *   `{ m, s }`, absent when empty) names the (mesh, service) pairs whose mesh pass this
 *   dataplane's records require and that has not completed yet (decision 073): set with the
 *   record, cleared after the pass, so a redelivered record that finds the index already up to
 *   date still brings them to their passes.
 */
import {
  type Contribution,
  type ContributorKey,
  type ContributorKind,
  contributorId,
  parseContributorId,
} from "../domain/contributions.ts";
import type { PlainRecord } from "./attribute-values.ts";
import type { IndexEntry, IndexedContributor } from "./ports.ts";

export const ENTRY_PREFIX = "m#";
/** How long a tombstone outlives the record that wrote it: a week (streams keep 24 hours). */
export const TOMBSTONE_TTL_SECONDS = 7 * 24 * 3600;
export const RECORD_PREFIX = "d#";
/** The records of external services (the other contributor kind). */
export const EXTERNAL_RECORD_PREFIX = "e#";

export function meshPartition(mesh: string): string {
  return `${ENTRY_PREFIX}${mesh}`;
}

export function servicePrefix(service: string): string {
  return `${service}#`;
}

export function entryKey(pair: Contribution, dataplane: ContributorKey): PlainRecord {
  return {
    pk: meshPartition(pair.mesh),
    sk: `${servicePrefix(pair.service)}${contributorId(dataplane)}`,
  };
}

export function recordPartition(mesh: string, kind?: ContributorKind): string {
  return `${kind === "external-service" ? EXTERNAL_RECORD_PREFIX : RECORD_PREFIX}${mesh}`;
}

export function recordKey(dataplane: ContributorKey): PlainRecord {
  return { pk: recordPartition(dataplane.mesh, dataplane.kind), sk: dataplane.name };
}

/** The dataplane an entry's sort key names. */
export function dataplaneOfSortKey(sk: string): ContributorKey {
  return parseContributorId(sk.slice(serviceOfSortKey(sk).length + 1));
}

/** The service an entry's sort key names. */
export function serviceOfSortKey(sk: string): string {
  const end = sk.indexOf("#");
  return end < 0 ? sk : sk.slice(0, end);
}

export function encodeRecord(
  dataplane: ContributorKey,
  contributions: readonly Contribution[],
  sequence: string,
  version: number,
  nowMs: number = Date.now(),
  pending: readonly Contribution[] = [],
): PlainRecord {
  return {
    ...recordKey(dataplane),
    c: pairsOut(contributions),
    seq: sequence,
    v: version,
    ...(pending.length > 0 ? { p: pairsOut(pending) } : {}),
    ...(contributions.length === 0
      ? { expiresAt: Math.floor(nowMs / 1000) + TOMBSTONE_TTL_SECONDS }
      : {}),
  };
}

/**
 * Whether a record write keeps an item: a record with contributions, or a tombstone fencing a
 * stream position. A record with neither (a rebuild's, which has no sequence) is deleted.
 */
export function keepsRecord(contributions: readonly unknown[], sequence: string): boolean {
  return contributions.length > 0 || sequence !== "";
}

function text(value: unknown, what: string): string {
  if (typeof value !== "string") throw new Error(`index item: ${what} is not a string`);
  return value;
}

/** Pairs as stored: a list of `{ m, s }`. */
export function pairsOut(pairs: readonly Contribution[]): PlainRecord[] {
  return pairs.map((pair) => ({ m: pair.mesh, s: pair.service }));
}

function pairsIn(value: unknown, field: string): Contribution[] {
  const list = Array.isArray(value) ? value : [];
  return list.map((entry) => {
    const pair = entry as PlainRecord;
    return { mesh: text(pair.m, `${field}[].m`), service: text(pair.s, `${field}[].s`) };
  });
}

export function decodeRecord(item: PlainRecord): IndexedContributor {
  const pk = text(item.pk, "pk");
  const mesh = pk.slice(RECORD_PREFIX.length);
  const name = text(item.sk, "sk");
  return {
    key: pk.startsWith(EXTERNAL_RECORD_PREFIX)
      ? { mesh, name, kind: "external-service" }
      : { mesh, name },
    contributions: pairsIn(item.c, "c"),
    sequence: typeof item.seq === "string" ? item.seq : "",
    version: typeof item.v === "number" ? item.v : Number(item.v ?? 0),
    pending: pairsIn(item.p, "p"),
  };
}

/** An item of the index table as an entry, a record, or neither. */
export function decodeItem(
  item: PlainRecord,
): { entry: IndexEntry } | { record: IndexedContributor } | undefined {
  const pk = text(item.pk, "pk");
  if (pk.startsWith(RECORD_PREFIX) || pk.startsWith(EXTERNAL_RECORD_PREFIX)) {
    return { record: decodeRecord(item) };
  }
  if (!pk.startsWith(ENTRY_PREFIX)) return undefined;
  const sk = text(item.sk, "sk");
  const service = serviceOfSortKey(sk);
  return {
    entry: {
      mesh: pk.slice(ENTRY_PREFIX.length),
      service,
      dataplane: parseContributorId(sk.slice(service.length + 1)),
    },
  };
}
