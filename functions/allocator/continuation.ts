import { isAllocatorError } from "../domain/errors.ts";
import { inPool } from "../domain/records.ts";
import type { MembershipIndex } from "../store/ports.ts";
import { recordRanges } from "./batch/plan-passes.ts";
import { passWoken } from "./pass/commit-item.ts";
import type {
  InvocationContext,
  MeshOutcome,
  PassBudget,
  PassPorts,
  PassSettings,
} from "./pass/deps.ts";
import { createInvocation } from "./pass/invocation.ts";
import { reconcileMesh } from "./pass/reconcile-mesh.ts";
import { indexView } from "./pass/service-set-view.ts";
import type { Telemetry } from "./telemetry.ts";
import { METRIC } from "./telemetry-names.ts";

/**
 * The payload of a continuation (decision 160): the function invokes itself asynchronously
 * with it when an invocation ran out of time with work left. `meshes`: passes to finish (their
 * items list services still pending, or still at VIPs outside the range); `sweep`: the stored
 * sweep cycle (a backfill) to go on with. `hop` counts the continuations since the event that
 * started the chain.
 */
export interface ContinueEvent {
  readonly vipAllocator: "continue";
  readonly meshes?: readonly string[];
  readonly sweep?: true;
  readonly hop: number;
}

/** How an invocation starts another of the same function, asynchronously. */
export interface SelfInvoker {
  invokeAsync(payload: ContinueEvent): Promise<void>;
}

/** How an invocation with this context starts a continuation (undefined: it cannot). */
export type InvokerFor = (context: InvocationContext) => SelfInvoker | undefined;

/**
 * Continuations in one chain. Lambda's recursive loop detection may stop a chain of
 * invocations caused by one event after 16; the chain stops itself before, and what is left
 * waits for the next record of its meshes or the repair sweep (the meshes are on the waiting
 * list, or their range is not recorded).
 */
export const MAX_HOPS = 15;

/** Most meshes in one continuation's payload (Lambda's asynchronous payload limit is 256 KB). */
const MAX_MESHES = 500;

export type HandoverResult = "none" | "sent" | "chain-ended" | "no-invoker";

/**
 * What an invocation hands over to the next: the work its budget left. Failing to send is
 * thrown to the caller, which then leaves the work to the event source's retry (a stream batch
 * reports the deferred meshes' records) or to the sweep.
 */
export class Handover {
  constructor(
    private readonly invoker: SelfInvoker | undefined,
    /** The hop of the invocation handing over (0: a stream batch, a scheduled sweep). */
    private readonly hop: number,
    private readonly telemetry: Telemetry,
  ) {}

  async send(work: { readonly meshes?: Iterable<string>; readonly sweep?: boolean }) {
    const meshes = [...new Set(work.meshes ?? [])].sort();
    if (meshes.length === 0 && work.sweep !== true) return "none" satisfies HandoverResult;
    const fields = { meshes: meshes.slice(0, 50), meshCount: meshes.length, hop: this.hop + 1 };
    if (this.invoker === undefined) {
      this.telemetry.warn(
        "out of time, and no way to continue: left to the next record or the sweep",
        fields,
      );
      return "no-invoker" satisfies HandoverResult;
    }
    if (this.hop >= MAX_HOPS) {
      this.telemetry.warn("continuation chain ended: left to the next record or the sweep", fields);
      return "chain-ended" satisfies HandoverResult;
    }
    const sends: ContinueEvent[] = [];
    for (let i = 0; i < meshes.length; i += MAX_MESHES) {
      sends.push({
        vipAllocator: "continue",
        meshes: meshes.slice(i, i + MAX_MESHES),
        hop: this.hop + 1,
      });
    }
    if (work.sweep === true)
      sends.push({ vipAllocator: "continue", sweep: true, hop: this.hop + 1 });
    for (const payload of sends) await this.invoker.invokeAsync(payload);
    if (meshes.length > 0) this.telemetry.metric(METRIC.passesContinued, "Count", meshes.length);
    this.telemetry.info("out of time: continued in a new invocation", {
      ...fields,
      sweep: work.sweep === true,
    });
    return "sent" satisfies HandoverResult;
  }
}

/** True for a continuation's payload. */
export function isContinueEvent(event: unknown): event is ContinueEvent {
  if (typeof event !== "object" || event === null) return false;
  const { vipAllocator, hop, meshes } = event as Record<string, unknown>;
  return (
    vipAllocator === "continue" &&
    Number.isInteger(hop) &&
    (meshes === undefined ||
      (Array.isArray(meshes) && meshes.every((mesh) => typeof mesh === "string")))
  );
}

/**
 * Hands over what `budget` deferred (and, with `sweep`, the stored sweep cycle). "failed" and
 * "no-invoker" (logged): nothing was sent, and the caller falls back to the event source's
 * retry or the sweep.
 */
export async function continueDeferred(
  budget: PassBudget | undefined,
  handover: Handover | undefined,
  work: { readonly sweep?: boolean },
  telemetry: Telemetry,
): Promise<HandoverResult | "failed"> {
  const meshes = budget?.deferred ?? new Set<string>();
  if (meshes.size === 0 && work.sweep !== true) return "none";
  try {
    return await (handover ?? new Handover(undefined, 0, telemetry)).send({ meshes, ...work });
  } catch (error) {
    telemetry.warn("could not start a continuation", {
      meshes: [...meshes].slice(0, 50),
      error: error instanceof Error ? `${error.name}: ${error.message}` : String(error),
    });
    return "failed";
  }
}

/** Whether a handover's work was left behind (the caller's fallback takes it). */
export function notHandedOver(result: HandoverResult | "failed"): boolean {
  return result === "failed" || result === "no-invoker";
}

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
  await recordRanges(ports.passState, outcomes, undefined, telemetry);
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
