import {
  type Contribution,
  contributionsOf,
  type DataplaneKey,
  dataplaneId,
  diffContributions,
  paddedSequence,
  sameContributions,
  servicesByMesh,
} from "../domain/contributions.ts";
import type { InputIssue } from "../domain/errors.ts";
import type { IndexWrite, MembershipIndex } from "../store/ports.ts";

/** A dataplane stream record, as the index needs it. */
export interface DataplaneChange {
  readonly key: DataplaneKey;
  readonly sequence: string;
  /** The item after the change; undefined when it was removed (or cannot be decoded). */
  readonly newImage: unknown;
  readonly oldImage: unknown;
}

export interface IndexUpdate {
  /** mesh -> the services whose presence the mesh's pass must look at again */
  readonly touched: Map<string, Set<string>>;
  readonly issues: readonly InputIssue[];
  /** Dataplane records written (their entries changed). */
  readonly written: number;
}

/**
 * Brings the index up to date with a batch's dataplane records: per dataplane, what its newest
 * image contributes is diffed against what the index records for it now (never image against
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
  const touchedPairs: Contribution[] = [];
  const issues: InputIssue[] = [];
  for (const change of changes) {
    latest.set(dataplaneId(change.key), change);
    touchedPairs.push(...contributionsOf(change.key, change.oldImage).contributions);
  }
  if (latest.size === 0) return { touched: new Map(), issues, written: 0 };
  const stored = await index.getDataplanes([...latest.values()].map((change) => change.key));

  const writes: IndexWrite[] = [];
  for (const [id, change] of latest) {
    const next = contributionsOf(change.key, change.newImage);
    issues.push(...next.issues);
    const before = stored.get(id);
    touchedPairs.push(...next.contributions, ...(before?.contributions ?? []));
    const sequence = paddedSequence(change.sequence);
    if (before !== undefined && before.sequence >= sequence) continue; // an older record
    if (before !== undefined && sameContributions(before.contributions, next.contributions)) {
      continue;
    }
    const { added, removed } = diffContributions(before?.contributions ?? [], next.contributions);
    writes.push({
      key: change.key,
      add: added,
      remove: removed,
      record: {
        contributions: next.contributions,
        sequence,
        expectedVersion: before?.version,
      },
    });
  }
  if (writes.length > 0) {
    const lost = await index.write(writes);
    if (lost.size > 0) await agreeWithWinners(writes, lost, index);
  }
  return { touched: servicesByMesh(touchedPairs), issues, written: writes.length };
}

/** Entries follow the record that won: add its contributions, remove what we added beyond. */
async function agreeWithWinners(
  writes: readonly IndexWrite[],
  lost: ReadonlySet<string>,
  index: MembershipIndex,
): Promise<void> {
  const losers = writes.filter((write) => lost.has(dataplaneId(write.key)));
  const winners = await index.getDataplanes(losers.map((write) => write.key));
  await index.write(
    losers.map((write) => {
      const winner = winners.get(dataplaneId(write.key))?.contributions ?? [];
      const { added } = diffContributions(winner, write.add);
      return { key: write.key, add: winner, remove: added };
    }),
  );
}
