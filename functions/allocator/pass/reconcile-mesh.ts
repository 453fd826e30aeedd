import { RetriesExhaustedError, VersionConflictError } from "../../domain/errors.ts";
import { METRIC } from "../telemetry-names.ts";
import { commitItem } from "./commit-item.ts";
import { passDeletedMesh } from "./deleted-mesh.ts";
import type { Attempt, MeshOutcome } from "./deps.ts";
import { backoffMs, type ReconcileDeps, viewOf } from "./deps.ts";
import { type Asserted, type FailureState, retract, settleAfterFailure } from "./memberships.ts";
import { planAndClaim } from "./plan-and-claim.ts";

/**
 * Brings one mesh's VIP item up to date with the tables as they are now.
 *
 * Correctness under concurrency rests on two mechanisms:
 * - global claims (one per service, one per address) written with conditions, so two
 *   invocations can never give one address to two services, nor two VIPs to one service;
 * - the mesh item written with a condition on the version read *before* the computation, so
 *   a writer whose inputs went stale loses, re-reads, recomputes and retries (bounded, with
 *   full jitter).
 * Membership of a service in the mesh is asserted before the item that lists it is written,
 * and retracted only after an item without it is written, conditional on the version: a claim
 * can leak (safe) but a listed VIP can never be released.
 *
 * Each attempt reads the item and the mesh's existence, then runs the steps in order:
 * {@link passDeletedMesh} (a mesh that is gone), or {@link planAndClaim} then
 * {@link commitItem} (write the item, then leave what it no longer lists).
 */
export async function reconcileMesh(mesh: string, deps: ReconcileDeps): Promise<MeshOutcome> {
  const asserted: Asserted = new Map();
  const failure: FailureState = { deleted: undefined };
  try {
    return await attempts(mesh, deps, asserted, failure);
  } catch (error) {
    await settleAfterFailure(mesh, deps, asserted, failure);
    throw error;
  }
}

async function attempts(
  mesh: string,
  deps: ReconcileDeps,
  asserted: Asserted,
  failure: FailureState,
): Promise<MeshOutcome> {
  /** Meshes an attempt that did not settle woke: they are woken whatever the last attempt finds. */
  const woken = new Set<string>();
  let lastError: unknown;
  for (let attempt = 1; attempt <= deps.maxAttempts; attempt++) {
    try {
      const result = await attemptOnce(mesh, deps, asserted, attempt, failure);
      for (const other of result.outcome.wake ?? []) woken.add(other);
      if (result.settled) {
        return woken.size === 0 ? result.outcome : { ...result.outcome, wake: [...woken].sort() };
      }
      lastError = new VersionConflictError(`inputs of mesh ${mesh} (changed during the pass)`);
    } catch (error) {
      if (!(error instanceof VersionConflictError)) throw error;
      lastError = error;
      deps.telemetry.metric(METRIC.conflicts, "Count", 1);
      if (attempt < deps.maxAttempts) await deps.sleep(backoffMs(attempt, deps.random));
    }
  }
  throw new RetriesExhaustedError(mesh, deps.maxAttempts, lastError);
}

async function attemptOnce(
  mesh: string,
  deps: ReconcileDeps,
  asserted: Asserted,
  attempt: number,
  failure: FailureState,
): Promise<Attempt> {
  const [current, exists] = await Promise.all([
    deps.vipItems.get(mesh),
    deps.source.meshExists(mesh),
  ]);
  if (exists && asserted.size > 0) {
    // An earlier attempt of this pass lost its write: settle its memberships against the item
    // that won now, before this attempt writes. (Left for the end, a crash right after this
    // attempt's write would leave memberships of the losing incarnation on listed services,
    // which no later leave could match.)
    await retract(mesh, deps, asserted, current);
  }
  if (!exists) return await passDeletedMesh(mesh, current, deps, asserted, failure, attempt);

  const { services, issues } = await viewOf(deps).read(mesh, current, attempt);
  for (const issue of issues) deps.telemetry.badInput(issue);
  const claimed = await planAndClaim(mesh, current, services, deps, asserted);
  return await commitItem(mesh, current, services, claimed, deps, asserted, attempt);
}
