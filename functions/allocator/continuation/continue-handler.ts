import type { DynamoDBClient } from "@aws-sdk/client-dynamodb";
import type { AllocatorConfig } from "../config.ts";
import type { MeshOutcome } from "../pass/outcome.ts";
import { PowertoolsTelemetry } from "../powertools-telemetry.ts";
import { createRuntime } from "../runtime.ts";
import type { SweepHandler, SweepSummary } from "../sweep-handler.ts";
import type { Telemetry } from "../telemetry.ts";
import { PassBudget } from "./budget.ts";
import type { InvocationContext, InvokerFor } from "./context.ts";
import { type ContinuedPasses, continuePasses } from "./continue-passes.ts";
import { type ContinueEvent, continueDeferred, Handover, notHandedOver } from "./handover.ts";

export interface ContinueHandlerOptions {
  readonly telemetry?: Telemetry;
  readonly client?: DynamoDBClient;
  readonly now?: () => number;
  readonly invoker?: InvokerFor;
  /** Meshes passed at once. */
  readonly concurrency?: number;
  readonly onOutcome?: (outcome: MeshOutcome) => void;
  /** Where a continuation of the sweep goes (the sweep handler). */
  readonly sweeps: SweepHandler;
}

/** What a continuation of passes returns (in its invocation's log). */
export interface ContinueSummary extends ContinuedPasses {
  readonly hop: number;
}

export type ContinueHandler = (
  event: ContinueEvent,
  context?: InvocationContext,
) => Promise<ContinueSummary | SweepSummary>;

/**
 * A continuation (decision 160): the stored sweep cycle (handed to the sweep handler), or the
 * passes of the meshes an earlier invocation deferred, within this invocation's time, handing
 * over again what is still left. A pass that fails makes the invocation fail once the others
 * are done (Lambda retries an asynchronous invocation twice, then the waiting list and the
 * sweep are the net); running out of time is not a failure.
 */
export function createContinueHandler(
  config: AllocatorConfig,
  options: ContinueHandlerOptions,
): ContinueHandler {
  const telemetry = options.telemetry ?? new PowertoolsTelemetry();
  const runtime = createRuntime(config, options);
  return async (event, context) => {
    if (event.sweep === true) return await options.sweeps(event, context);
    try {
      const remaining = context?.getRemainingTimeInMillis();
      const budget =
        remaining === undefined ? undefined : PassBudget.of(remaining, runtime.settings.now);
      const result = await continuePasses(
        event.meshes ?? [],
        { ...runtime.ports, telemetry },
        {
          ...runtime.settings,
          concurrency: options.concurrency ?? 4,
          ...(budget !== undefined ? { budget } : {}),
          ...(options.onOutcome !== undefined ? { onOutcome: options.onOutcome } : {}),
        },
      );
      const handover =
        context === undefined
          ? undefined
          : new Handover(options.invoker?.(context), event.hop, telemetry);
      const sent = await continueDeferred(budget, handover, {}, telemetry);
      const summary: ContinueSummary = { ...result, hop: event.hop };
      telemetry.info("continuation finished", { ...summary });
      const left = notHandedOver(sent) ? result.deferred : [];
      if (result.failed.length > 0 || left.length > 0) {
        throw new Error(
          `continuation: ${result.failed.length} pass(es) failed, ${left.length} could not be handed over (${[...result.failed, ...left].slice(0, 10).join(", ")})`,
        );
      }
      return summary;
    } finally {
      telemetry.flush?.();
    }
  };
}
