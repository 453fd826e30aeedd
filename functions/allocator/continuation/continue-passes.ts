import { isAllocatorError } from "../../domain/errors.ts";
import { inPool } from "../../domain/in-pool.ts";
import type { MembershipIndex } from "../../store/ports.ts";
import { recordRanges } from "../batch/plan-passes.ts";
import { indexView } from "../membership-index/view.ts";
import type { PassPorts, PassSettings } from "../pass/deps.ts";
import { createInvocation } from "../pass/invocation.ts";
import type { MeshOutcome } from "../pass/outcome.ts";
import { reconcileMesh } from "../pass/reconcile-mesh.ts";
import { passWoken } from "../pass/waiting.ts";
import { METRIC } from "../telemetry-names.ts";
import type { PassBudget } from "./budget.ts";

/** What a continuation of mesh passes did. */
export interface ContinuedPasses {
  /** Meshes whose pass finished in this invocation, leaving an item. */
  readonly finished: readonly string[];
  /** Meshes deferred again (their pass ran out of this invocation's time too). */
  readonly deferred: readonly string[];
  /** Meshes whose pass failed with an error a retry may cure. */
  readonly failed: readonly string[];
}

/**
 * A continuation's passes (decision 160): each mesh an earlier invocation deferred gets an
 * ordinary pass over its whole service set (the index's; the
 * records that caused the first pass are long gone), with this invocation's budget. A pass
 * that finishes records the mesh's range, as a batch's does; one that runs out of time again
 * is deferred in `budget` for the caller to hand over.
 */
export async function continuePasses(
  meshes: readonly string[],
  ports: PassPorts & { readonly index: MembershipIndex },
  settings: PassSettings & {
    readonly budget?: PassBudget;
    readonly concurrency: number;
    readonly onOutcome?: (outcome: MeshOutcome) => void;
  },
): Promise<ContinuedPasses> {
  const { telemetry } = ports;
  const invocation = createInvocation(ports, settings);
  const finished: string[] = [];
  const outcomes: MeshOutcome[] = [];
  const failed: string[] = [];
  const woken = new Set<string>();
  const passOne = async (mesh: string): Promise<void> => {
    if (settings.budget?.expired() === true) return settings.budget.defer(mesh);
    try {
      const deps = { ...invocation.deps, view: indexView(ports.index, "all") };
      const outcome = await reconcileMesh(mesh, deps);
      for (const other of outcome.wake ?? []) woken.add(other);
      settings.onOutcome?.(outcome);
      const left = outcome.action !== "deleted" && outcome.action !== "absent";
      if (outcome.deferred !== true && left) {
        finished.push(mesh);
        // The deferred part of this pass moved the item without recording its range.
        outcomes.push({ ...outcome, rangeChanged: true });
      }
    } catch (error) {
      const retryable = !isAllocatorError(error) || error.retryable;
      telemetry.metric(METRIC.meshFailures, "Count", 1);
      telemetry.error("continued pass failed", {
        mesh,
        code: isAllocatorError(error) ? error.code : "UNEXPECTED",
        retryable,
        error: error instanceof Error ? `${error.name}: ${error.message}` : String(error),
      });
      if (retryable) failed.push(mesh);
    }
  };
  await inPool([...new Set(meshes)].sort(), settings.concurrency, passOne);
  await passWoken(woken, async (wokenMeshes) => {
    await inPool(wokenMeshes, settings.concurrency, passOne);
  });
  // The guard passes a mesh whose recorded range is not the current one (decision 055): a
  // finished pass leaves the item in range, as a batch's completed pass does.
  await recordRanges(ports.claims, outcomes, undefined, telemetry);
  try {
    await invocation.finish();
  } catch (error) {
    telemetry.warn("could not advance the pool cursor", {
      error: error instanceof Error ? error.message : String(error),
    });
  }
  return {
    finished: finished.sort(),
    deferred: [...(settings.budget?.deferred ?? [])].sort(),
    failed: failed.sort(),
  };
}
