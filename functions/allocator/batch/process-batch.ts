import type { DynamoDBBatchResponse, DynamoDBStreamEvent } from "aws-lambda";
import { isAllocatorError } from "../../domain/errors.ts";
import { inPool } from "../../domain/records.ts";
import type { MembershipIndex, PendingUpdate, SweepPositionPort } from "../../store/ports.ts";
import { compareSequenceNumbers, decodeRecord } from "../../store/stream-records.ts";
import type { TableNames } from "../../store/table-definitions.ts";
import { continueDeferred, type Handover, notHandedOver } from "../continuation.ts";
import type { DataplaneChange } from "../membership-index/update.ts";
import { passWoken } from "../pass/commit-item.ts";
import type { MeshOutcome, PassBudget, PassPorts, PassSettings } from "../pass/deps.ts";
import { createInvocation } from "../pass/invocation.ts";
import { reconcileMesh } from "../pass/reconcile-mesh.ts";
import type { Telemetry } from "../telemetry.ts";
import { METRIC } from "../telemetry-names.ts";
import { addSequence, type PassPlan, planPasses, recordRanges } from "./plan-passes.ts";

/** The stores one batch works on (the batch reads the ingresses once, for all its passes). */
export interface BatchPorts extends PassPorts {
  /** The membership index; without it every touched mesh is passed over the tables (the
   * full recompute: the tests' and the benches' oracle, never the function's wiring). */
  readonly index?: MembershipIndex;
}

export interface BatchSettings extends PassSettings {
  readonly tables: TableNames;
  /** Meshes reconciled at once within one invocation. */
  readonly concurrency: number;
  /** Called with each mesh's outcome (the local CLI prints them). */
  readonly onOutcome?: (outcome: MeshOutcome) => void;
  /** Called with each mesh that failed and is reported back to the event source. */
  readonly onFailure?: (mesh: string, error: unknown) => void;
  /** Called with the batch's lag (its oldest record's age, ms) before any pass. */
  readonly noteLag?: (lagMs: number) => Promise<void>;
  /** This invocation's time for claims, and how it hands over what it defers (decision 160). */
  readonly budget?: PassBudget;
  readonly handover?: Handover;
}

/**
 * One batch of stream records from either table: groups the records by the meshes they touch,
 * reconciles each touched mesh once (a few at a time, sharing one address finder so they never
 * race each other for an address), and reports back the lowest sequence number among the
 * records of meshes that failed, so the event source retries from there (redelivery is
 * harmless: reconcile is idempotent). Bad records are reported and skipped; they never fail
 * the batch.
 */
export async function processBatch(
  event: DynamoDBStreamEvent | null | undefined,
  ports: BatchPorts,
  settings: BatchSettings,
): Promise<DynamoDBBatchResponse> {
  const { telemetry } = ports;
  const records: unknown = event?.Records;
  if (!Array.isArray(records)) {
    telemetry.badInput({
      table: "(unknown)",
      key: {},
      field: "Records",
      reason: event === null || event === undefined ? "no event" : "missing or not a list",
    });
    return { batchItemFailures: [] };
  }
  const byMesh = new Map<string, string[]>();
  const changes: DataplaneChange[] = [];
  /** Meshes whose own record is in the batch: their passes read the whole service set. */
  const meshRecords = new Set<string>();
  let oldest: number | undefined;
  for (const record of records as DynamoDBStreamEvent["Records"]) {
    const decoded = decodeRecord(record, settings.tables);
    if (!decoded.ok) {
      telemetry.badInput(decoded.issue);
      continue;
    }
    if (decoded.createdAtMs !== undefined) {
      oldest = Math.min(oldest ?? decoded.createdAtMs, decoded.createdAtMs);
    }
    for (const mesh of decoded.meshes) addSequence(byMesh, mesh, decoded.sequenceNumber);
    if (decoded.table === "meshes") for (const mesh of decoded.meshes) meshRecords.add(mesh);
    if (decoded.dataplane !== undefined) {
      changes.push({ ...decoded.dataplane, sequence: decoded.sequenceNumber });
    }
  }
  if (oldest !== undefined) {
    const lagMs = Math.max(0, settings.now() - oldest);
    telemetry.metric(METRIC.streamLagMs, "Milliseconds", lagMs);
    await settings.noteLag?.(lagMs);
  }

  let plan: PassPlan;
  try {
    plan = await planPasses({ byMesh, changes, meshRecords }, ports, settings.pool.cidr);
  } catch (error) {
    // Nothing is lost: the records are delivered again from the first one.
    telemetry.metric(METRIC.meshFailures, "Count", 1);
    telemetry.error("planning the batch's passes failed; the batch is reported for retry", {
      code: isAllocatorError(error) ? error.code : "UNEXPECTED",
      error: error instanceof Error ? `${error.name}: ${error.message}` : String(error),
    });
    const all = [...byMesh.values()].flat();
    if (all.length === 0) return { batchItemFailures: [] };
    return { batchItemFailures: [{ itemIdentifier: lowestOf(all) }] };
  }
  for (const issue of plan.issues) telemetry.badInput(issue);
  if (plan.indexWrites > 0) telemetry.metric(METRIC.indexWrites, "Count", plan.indexWrites);
  if (plan.skipped > 0) telemetry.metric(METRIC.passesSkipped, "Count", plan.skipped);
  const { guard, viewFor } = plan;
  let meshes = [...plan.meshes];

  // One address finder for the whole invocation: its meshes never race each other for an
  // address, and the cursor is written once.
  const invocation = createInvocation(ports, settings);
  const { deps } = invocation;
  const failedSequences: string[] = [];
  const completed = new Set<string>();
  const outcomes: MeshOutcome[] = [];
  const woken = new Set<string>();
  const passOne = async (mesh: string): Promise<void> => {
    // Out of time before it starts: the whole pass goes to the continuation (decision 160).
    if (settings.budget?.expired() === true) return settings.budget.defer(mesh);
    try {
      const view = viewFor(mesh);
      // The guard read the waiting list before any pass read an item (decision 111).
      const listed = guard?.state.waiting;
      const result = await reconcileMesh(mesh, {
        ...deps,
        ...(view !== undefined ? { view } : {}),
        ...(listed?.has(mesh) === true ? { waitingEntry: { revision: listed.get(mesh) } } : {}),
      });
      for (const other of result.wake ?? []) woken.add(other);
      completed.add(mesh);
      outcomes.push(result);
      settings.onOutcome?.(result);
    } catch (error) {
      // Unknown errors (the SDK's, after its own retries) may pass; ours say if they can.
      const retryable = !isAllocatorError(error) || error.retryable;
      telemetry.metric(METRIC.meshFailures, "Count", 1);
      telemetry.error(
        retryable
          ? "mesh failed; its records are reported for retry"
          : "mesh failed and a retry cannot help; its records are not retried",
        {
          mesh,
          code: isAllocatorError(error) ? error.code : "UNEXPECTED",
          retryable,
          error: error instanceof Error ? `${error.name}: ${error.message}` : String(error),
        },
      );
      settings.onFailure?.(mesh, error);
      if (retryable) failedSequences.push(...(byMesh.get(mesh) ?? []));
    }
  };
  const run = async (): Promise<void> => {
    await inPool(meshes, settings.concurrency, passOne);
  };
  await run();
  // Meshes waiting for an address, woken because this batch freed some (no quarantine): a
  // bounded number of extra rounds. Their failures are logged, not retried (they have no
  // record in this batch); the next freed address wakes them again.
  await passWoken(woken, async (wokenMeshes) => {
    meshes = [...wokenMeshes];
    await run();
  });
  if (ports.index !== undefined) {
    await clearPending(ports.index, plan.pending, completed, telemetry);
    await recordRanges(ports.passState, outcomes, guard, telemetry);
  }
  try {
    await invocation.finish();
  } catch (error) {
    // The cursor is only where the next probe starts; the claims are already safe.
    telemetry.warn("could not advance the pool cursor", {
      error: error instanceof Error ? error.message : String(error),
    });
  }

  // What ran out of time goes on in a continuation; if it cannot be sent, the records of those
  // meshes are retried by the event source instead.
  const handedOver = await continueDeferred(settings.budget, settings.handover, {}, telemetry);
  if (notHandedOver(handedOver)) {
    for (const mesh of settings.budget?.deferred ?? []) {
      failedSequences.push(...(byMesh.get(mesh) ?? []));
    }
  }
  if (failedSequences.length === 0) return { batchItemFailures: [] };
  return { batchItemFailures: [{ itemIdentifier: lowestOf(failedSequences) }] };
}

/**
 * After the passes: the pending pairs of the meshes whose pass completed leave their records
 * (conditional on the record's version). Failing here costs a pass again later, nothing more.
 */
async function clearPending(
  index: MembershipIndex,
  pending: readonly PendingUpdate[],
  completed: ReadonlySet<string>,
  telemetry: BatchPorts["telemetry"],
): Promise<void> {
  const updates: PendingUpdate[] = [];
  for (const record of pending) {
    const left = record.pending.filter((pair) => !completed.has(pair.mesh));
    if (left.length < record.pending.length) updates.push({ ...record, pending: left });
  }
  if (updates.length === 0) return;
  try {
    await index.setPending(updates);
  } catch (error) {
    telemetry.warn("could not clear the pending passes; they run again with the next record", {
      error: error instanceof Error ? error.message : String(error),
    });
  }
}

function lowestOf(sequences: readonly string[]): string {
  return sequences.reduce((a, b) => (compareSequenceNumbers(a, b) <= 0 ? a : b));
}

/** At most one lag note per this long from one execution environment. */
export const LAG_NOTE_EVERY_MS = 10_000;

/**
 * What the stream handler does with each batch's lag (the age of its oldest record): past the
 * sweep's grace, the lag is noted in the claims table (`stream-lag`), at most once per
 * {@link LAG_NOTE_EVERY_MS} per execution environment, so the repair sweep counts nothing as a
 * fault while records may still be in flight (decision 132). The first batch within the grace
 * after an environment noted a lag notes that it caught up (a note whose `lagMs` is within the
 * grace): the lag episode is over, and drift found after it counts again (decision 134).
 * Otherwise, within the grace (ordinary traffic), nothing is written. A failed note is logged,
 * never fails the batch.
 */
export function lagNoter(
  claims: SweepPositionPort,
  graceMs: number,
  now: () => number,
  telemetry: Telemetry,
): (lagMs: number) => Promise<void> {
  let lastAt = Number.NEGATIVE_INFINITY;
  let noted = false;
  return async (lagMs) => {
    if (graceMs <= 0) return;
    const at = now();
    if (lagMs <= graceMs) {
      if (!noted) return;
      noted = false;
    } else {
      if (noted && at - lastAt < LAG_NOTE_EVERY_MS) return;
      noted = true;
    }
    lastAt = at;
    try {
      await claims.noteStreamLag({ at, lagMs });
    } catch (error) {
      telemetry.warn("could not note the stream's lag; the sweep may count drift in flight", {
        lagMs,
        error: error instanceof Error ? error.message : String(error),
      });
    }
  };
}
