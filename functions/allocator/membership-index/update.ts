import {
  type Contribution,
  type ContributorImages,
  contributorId,
  diffContributions,
  paddedSequence,
  sameContributions,
  servicesByMesh,
} from "../../domain/contributions.ts";
import type { InputIssue } from "../../domain/errors.ts";
import type { IndexWrite, MembershipIndex, PendingUpdate } from "../../store/ports.ts";

/** One dataplane's entries this batch changed in the index (decision 073). */
export interface EntryChange {
  /** The dataplane's id (domain/contributions.ts). */
  readonly dataplane: string;
  /** Pairs it contributes now and its record did not list (entries written by this batch). */
  readonly added: readonly Contribution[];
  /** Pairs whose entries this batch removed. */
  readonly removed: readonly Contribution[];
  /**
   * Of `removed`, the pairs the dataplane's record did not list: entries an earlier attempt
   * may have written and died before recording (decision 110). Each needs a pass whatever the
   * read finds.
   */
  readonly unrecorded?: readonly Contribution[];
}

export interface PassDecision {
  /** Meshes a presence may have changed in: their pass must run. */
  readonly meshes: Set<string>;
  /** The pairs whose presence may have changed: what those passes must look at. */
  readonly pairs: Contribution[];
  /** Pairs found present (a first contributor exists) by the decision's read. */
  readonly present: Contribution[];
}

/** A dataplane stream record, as the index needs it: its images as the decoder read them. */
export interface DataplaneChange extends ContributorImages {
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
  /** Meshes the decision (`decide`) found a presence may have changed in. */
  readonly decided: Set<string>;
  /** Meshes of pairs a dataplane's record carries as pending (an earlier delivery's pass). */
  readonly carried: Set<string>;
  /** Meshes of dataplanes whose record this batch could not write (their pending pairs too). */
  readonly unrecorded: Set<string>;
  /** Records carrying pending pairs: after the passes, the completed meshes' pairs go. */
  readonly pending: readonly PendingUpdate[];
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
 * returned as touched, whether or not the index changed. Which meshes need a pass at all is
 * decided after the entries are written (`decide`: batch/plan-passes.ts, decision 073); the records
 * carry the pairs whose pass is pending until it completes, so after a crash between the index
 * write and the mesh pass the redelivered record, finding the index up to date, still brings
 * them to the pass.
 */
export async function updateIndex(
  changes: readonly DataplaneChange[],
  index: MembershipIndex,
  decide: (index: MembershipIndex, changes: readonly EntryChange[]) => Promise<PassDecision>,
): Promise<IndexUpdate> {
  const latest = new Map<string, DataplaneChange>();
  /** Per dataplane: what its other images in the batch contribute (old, and superseded new). */
  const others = new Map<string, Contribution[]>();
  /** Per dataplane: what the old image of its first record in the batch contributes. */
  const first = new Map<string, readonly Contribution[]>();
  /** Per dataplane: the new images of its records the batch supersedes. */
  const supersededImages = new Map<string, Array<readonly Contribution[]>>();
  const issues: InputIssue[] = [];
  // In stream order whatever the batch's: a dataplane's newest image is its highest sequence
  // number's (a batch put together after a retry may hold an older record after a newer one).
  const ordered = [...changes].sort((a, b) => {
    const x = paddedSequence(a.sequence);
    const y = paddedSequence(b.sequence);
    return x < y ? -1 : x > y ? 1 : 0;
  });
  for (const change of ordered) {
    const id = contributorId(change.key);
    if (!first.has(id)) first.set(id, change.before);
    const list = others.get(id) ?? [];
    const superseded = latest.get(id);
    if (superseded !== undefined) {
      list.push(...superseded.after);
      supersededImages.set(id, [...(supersededImages.get(id) ?? []), superseded.after]);
    }
    list.push(...change.before);
    others.set(id, list);
    latest.set(id, change);
  }
  if (latest.size === 0) {
    return {
      touched: new Map(),
      meshesOf: new Map(),
      known: new Map(),
      issues,
      written: 0,
      decided: new Set(),
      carried: new Set(),
      unrecorded: new Set(),
      pending: [],
    };
  }
  const stored = await index.getContributors([...latest.values()].map((change) => change.key));

  /**
   * The pairs the passes look at: those whose presence may have changed (the decision's),
   * those pending since an earlier delivery, and every pair of a dataplane whose record write
   * was lost. A pair the decision found needs no pass keeps what the item lists.
   */
  const touchedPairs: Contribution[] = [];
  const allPairs = new Map<string, Contribution[]>();
  const meshesOf = new Map<string, Set<string>>();
  const knownPairs: Contribution[] = [];
  const writes: IndexWrite[] = [];
  const entryChanges: EntryChange[] = [];
  const decided = new Set<string>();
  const carriedMeshes = new Set<string>();
  const unrecorded = new Set<string>();
  /** Records carrying pending pairs that this batch does not rewrite. */
  const pending: PendingUpdate[] = [];
  for (const [id, change] of latest) {
    const next = change.after;
    issues.push(...change.issues);
    const before = stored.get(id);
    const imaged = others.get(id) ?? [];
    const carried = before?.pending ?? [];
    const pairs = [...next, ...(before?.contributions ?? []), ...imaged, ...carried];
    allPairs.set(id, pairs);
    touchedPairs.push(...carried);
    meshesOf.set(id, new Set(pairs.map((pair) => pair.mesh)));
    for (const pair of carried) carriedMeshes.add(pair.mesh);
    const sequence = paddedSequence(change.sequence);
    const unchanged = () => {
      if (before !== undefined && carried.length > 0) {
        pending.push({ key: change.key, version: before.version, pending: carried });
      }
    };
    if (before !== undefined && before.sequence >= sequence) {
      unchanged(); // an older record
      continue;
    }
    // Entries are written before the record, so an attempt that died in between may have
    // left entries its record does not list: they are among this batch's images (the retried
    // record's, or the next record's old image), and go unless still contributed.
    const { removed } = diffContributions([...(before?.contributions ?? []), ...imaged], next);
    // A record with no stream position was written by a repair or a rebuild, whose own pass
    // may never have run: it says what the table said, not what the meshes were passed for.
    // What this batch's images show changed is decided as this batch's own change (113).
    const repaired = before?.sequence === "";
    // And pairs a superseded image of this batch lacked: an attempt that died after writing
    // that image's entries removed theirs while the record still lists them; they are written
    // again and decided as added (decision 110).
    const restored = (supersededImages.get(id) ?? []).flatMap(
      (image) => diffContributions(image, next).added,
    );
    const { added } = diffContributions(
      repaired ? (first.get(id) ?? []) : (before?.contributions ?? []),
      next,
    );
    added.push(...diffContributions(added, restored).added);
    const recordSame =
      before === undefined ? next.length === 0 : sameContributions(before.contributions, next);
    const undecided = (repaired || restored.length > 0) && added.length > 0;
    if (recordSame && removed.length === 0 && !undecided) {
      knownPairs.push(...next);
      unchanged();
      continue;
    }
    // Removed entries the record did not list: an earlier attempt's, which may have died after
    // writing them, with others skipping their pass because of them (decision 110).
    const { added: unrecorded } = diffContributions(before?.contributions ?? [], removed);
    entryChanges.push({ dataplane: id, added, removed, unrecorded });
    writes.push({
      key: change.key,
      // Every entry it contributes, not just the new ones: idempotent, and it restores any
      // an interrupted attempt removed.
      add: next,
      remove: removed,
      record: { contributions: next, sequence, expectedVersion: before?.version, pending: carried },
    });
  }
  if (writes.length === 0) return { ...result(), written: 0 };
  // The entries first, then the decision read, then the records carrying the pairs whose
  // pass is pending: a crash anywhere after the entries leaves either a record that does not
  // list them (the redelivered record writes and decides again) or one whose pending pairs
  // bring the redelivered record to the pass.
  await index.write(writes.map(({ key, add, remove }) => ({ key, add, remove })));
  const decision = await decide(index, entryChanges);
  for (const mesh of decision.meshes) decided.add(mesh);
  touchedPairs.push(...decision.pairs);
  knownPairs.push(...decision.present);
  const triggering = new Set(decision.pairs.map(pairKey));
  let round: IndexWrite[] = writes.map((write, i) =>
    withPending(write, entryChanges[i] as EntryChange, triggering),
  );
  for (let attempt = 1; round.length > 0; attempt++) {
    // The first round writes the records alone (their entries are written above).
    const lost = await index.write(
      attempt === 1
        ? round.map(({ key, record }) => ({ key, add: [], remove: [], record }))
        : round,
    );
    for (const write of round) {
      const id = contributorId(write.key);
      const record = write.record;
      if (lost.has(id) || record === undefined) {
        // Its pending pairs were not recorded: this invocation passes its meshes anyway (a
        // crash before they complete is left to the sweep, decision 073).
        for (const mesh of meshesOf.get(id) ?? []) unrecorded.add(mesh);
        touchedPairs.push(...(allPairs.get(id) ?? []));
        continue;
      }
      knownPairs.push(...write.add);
      const pairs = record.pending ?? [];
      if (pairs.length > 0) {
        pending.push({
          key: write.key,
          version: (record.expectedVersion ?? 0) + 1,
          pending: pairs,
        });
      }
    }
    if (lost.size === 0) break;
    round = await afterLost(round, lost, index, attempt < RECORD_ROUNDS);
  }
  return { ...result(), written: writes.length };

  function result() {
    return {
      touched: servicesByMesh(touchedPairs),
      meshesOf,
      known: servicesByMesh(knownPairs),
      issues,
      decided,
      carried: carriedMeshes,
      unrecorded,
      pending,
    };
  }
}

function pairKey(pair: Contribution): string {
  return JSON.stringify([pair.mesh, pair.service]);
}

/** The write with its record carrying its changed pairs that need a pass. */
function withPending(
  write: IndexWrite,
  change: EntryChange,
  triggering: ReadonlySet<string>,
): IndexWrite {
  const record = write.record;
  if (record === undefined) return write;
  const pairs = [...(record.pending ?? [])];
  const seen = new Set(pairs.map(pairKey));
  for (const pair of [...change.added, ...change.removed]) {
    const id = pairKey(pair);
    if (!triggering.has(id) || seen.has(id)) continue;
    seen.add(id);
    pairs.push(pair);
  }
  return { ...write, record: { ...record, pending: pairs } };
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
  const losers = writes.filter((write) => lost.has(contributorId(write.key)));
  const winners = await index.getContributors(losers.map((write) => write.key));
  const again: IndexWrite[] = [];
  const agree: IndexWrite[] = [];
  for (const write of losers) {
    const winner = winners.get(contributorId(write.key));
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
  const losers = writes.filter((write) => lost.has(contributorId(write.key)));
  const winners = await index.getContributors(losers.map((write) => write.key));
  await index.write(agreeing(losers, winners));
}

function agreeing(
  losers: readonly IndexWrite[],
  winners: ReadonlyMap<string, { readonly contributions: readonly Contribution[] }>,
): IndexWrite[] {
  return losers.map((write) => {
    const winner = winners.get(contributorId(write.key))?.contributions ?? [];
    const { added } = diffContributions(winner, write.add);
    return { key: write.key, add: winner, remove: added };
  });
}
