import {
  type Contribution,
  type DataplaneImages,
  dataplaneId,
  diffContributions,
  paddedSequence,
  sameContributions,
  servicesByMesh,
} from "../../domain/contributions.ts";
import type { InputIssue } from "../../domain/errors.ts";
import type { IndexWrite, MembershipIndex } from "../../store/ports.ts";

/** A dataplane stream record, as the index needs it: its images as the decoder read them. */
export interface DataplaneChange extends DataplaneImages {
  readonly sequence: string;
}

export interface IndexUpdate {
  /** mesh -> the services whose presence the mesh's pass must look at again */
  readonly touched: Map<string, Set<string>>;
  /** dataplane id -> the meshes it touched (its records are retried if one of them fails) */
  readonly meshesOf: Map<string, Set<string>>;
  /**
   * mesh -> touched services known to be present without asking: a dataplane of the batch
   * contributes them now and its entries are written (entries go before records).
   */
  readonly known: Map<string, Set<string>>;
  readonly issues: readonly InputIssue[];
  /** Dataplane records written (their entries changed). */
  readonly written: number;
}

/**
 * Brings the index up to date with a batch's dataplane records: per dataplane, what its newest
 * image contributes is compared with what the index records for it now (never image against
 * image), so a redelivered, replayed or earlier-lost record converges. One BatchGetItem of the
 * records, batched entry writes, one conditional write per changed record. A record older than
 * the one the index holds changes nothing. A record write lost to a concurrent writer (a
 * rebuild) makes the entries agree with the winner's record.
 *
 * Every service the dataplane contributed before, contributes now, or its images name is
 * returned as touched, whether or not the index changed: after a crash between the index write
 * and the mesh pass, the redelivered record still brings its services to the pass.
 */
export async function updateIndex(
  changes: readonly DataplaneChange[],
  index: MembershipIndex,
): Promise<IndexUpdate> {
  const latest = new Map<string, DataplaneChange>();
  /** Per dataplane: what its other images in the batch contribute (old, and superseded new). */
  const others = new Map<string, Contribution[]>();
  const issues: InputIssue[] = [];
  for (const change of changes) {
    const id = dataplaneId(change.key);
    const list = others.get(id) ?? [];
    const superseded = latest.get(id);
    if (superseded !== undefined) list.push(...superseded.after);
    list.push(...change.before);
    others.set(id, list);
    latest.set(id, change);
  }
  if (latest.size === 0) {
    return { touched: new Map(), meshesOf: new Map(), known: new Map(), issues, written: 0 };
  }
  const stored = await index.getDataplanes([...latest.values()].map((change) => change.key));

  const touchedPairs: Contribution[] = [];
  const meshesOf = new Map<string, Set<string>>();
  const knownPairs: Contribution[] = [];
  const writes: IndexWrite[] = [];
  for (const [id, change] of latest) {
    const next = change.after;
    issues.push(...change.issues);
    const before = stored.get(id);
    const imaged = others.get(id) ?? [];
    const pairs = [...next, ...(before?.contributions ?? []), ...imaged];
    touchedPairs.push(...pairs);
    meshesOf.set(id, new Set(pairs.map((pair) => pair.mesh)));
    const sequence = paddedSequence(change.sequence);
    if (before !== undefined && before.sequence >= sequence) continue; // an older record
    // Entries are written before the record, so an attempt that died in between may have
    // left entries its record does not list: they are among this batch's images (the retried
    // record's, or the next record's old image), and go unless still contributed.
    const { removed } = diffContributions([...(before?.contributions ?? []), ...imaged], next);
    const recordSame =
      before === undefined ? next.length === 0 : sameContributions(before.contributions, next);
    if (recordSame && removed.length === 0) {
      knownPairs.push(...next);
      continue;
    }
    writes.push({
      key: change.key,
      // Every entry it contributes, not just the new ones: idempotent, and it restores any
      // an interrupted attempt removed.
      add: next,
      remove: removed,
      record: {
        contributions: next,
        sequence,
        expectedVersion: before?.version,
      },
    });
  }
  let pending = writes;
  for (let round = 1; pending.length > 0; round++) {
    const lost = await index.write(pending);
    for (const write of pending) {
      if (!lost.has(dataplaneId(write.key))) knownPairs.push(...write.add);
    }
    if (lost.size === 0) break;
    pending = await afterLost(pending, lost, index, round < RECORD_ROUNDS);
  }
  return {
    touched: servicesByMesh(touchedPairs),
    meshesOf,
    known: servicesByMesh(knownPairs),
    issues,
    written: writes.length,
  };
}

/** Rounds of record writes for one batch before the newest record gives way anyway. */
const RECORD_ROUNDS = 5;

/**
 * After record writes lost their condition: a loser whose winner holds a newer (or the same)
 * stream record agrees with it; a loser whose winner is older (an older record of the same
 * dataplane processed beside it, or a rebuild's record) is the newer truth and is written again
 * over the winner: its entries once more (the winner's entries were written before its record,
 * so they cannot land after these), then its record conditional on the winner's version.
 * Returns the writes to make again. A record's version alone said "someone wrote"; the
 * sequence says who is newer, so an older record never wins for good.
 */
async function afterLost(
  writes: readonly IndexWrite[],
  lost: ReadonlySet<string>,
  index: MembershipIndex,
  mayRetry: boolean,
): Promise<IndexWrite[]> {
  const losers = writes.filter((write) => lost.has(dataplaneId(write.key)));
  const winners = await index.getDataplanes(losers.map((write) => write.key));
  const again: IndexWrite[] = [];
  const agree: IndexWrite[] = [];
  for (const write of losers) {
    const winner = winners.get(dataplaneId(write.key));
    const record = write.record;
    const newer =
      record !== undefined &&
      record.sequence !== "" &&
      (winner === undefined || winner.sequence < record.sequence);
    if (!newer || !mayRetry || record === undefined) {
      agree.push(write);
      continue;
    }
    const { removed } = diffContributions(
      [...(winner?.contributions ?? []), ...write.remove],
      record.contributions,
    );
    again.push({
      key: write.key,
      add: record.contributions,
      remove: removed,
      record: { ...record, expectedVersion: winner?.version },
    });
  }
  if (agree.length > 0) await index.write(agreeing(agree, winners));
  return again;
}

/** Entries follow the record that won: add its contributions, remove what we added beyond. */
export async function agreeWithWinners(
  writes: readonly IndexWrite[],
  lost: ReadonlySet<string>,
  index: MembershipIndex,
): Promise<void> {
  const losers = writes.filter((write) => lost.has(dataplaneId(write.key)));
  const winners = await index.getDataplanes(losers.map((write) => write.key));
  await index.write(agreeing(losers, winners));
}

function agreeing(
  losers: readonly IndexWrite[],
  winners: ReadonlyMap<string, { readonly contributions: readonly Contribution[] }>,
): IndexWrite[] {
  return losers.map((write) => {
    const winner = winners.get(dataplaneId(write.key))?.contributions ?? [];
    const { added } = diffContributions(winner, write.add);
    return { key: write.key, add: winner, remove: added };
  });
}
