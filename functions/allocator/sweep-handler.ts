import type { DynamoDBClient } from "@aws-sdk/client-dynamodb";
import type { AllocatorConfig } from "./config.ts";
import { PassBudget } from "./continuation/budget.ts";
import type { InvocationContext, InvokerFor } from "./continuation/context.ts";
import { type ContinueEvent, continueDeferred, Handover } from "./continuation/handover.ts";
import { PowertoolsTelemetry } from "./powertools-telemetry.ts";
import { createRuntime } from "./runtime.ts";
import { sweep } from "./sweep/sweep.ts";
import type { SweepResult } from "./sweep/types.ts";
import type { AllocatorCommand } from "./sweep-event.ts";
import type { Telemetry } from "./telemetry.ts";

/** What the sweep invocation returns (shown by the schedule's and the trigger's logs). */
export interface SweepSummary {
  readonly cycle: string;
  readonly finished: boolean;
  readonly stopped?: string;
  readonly meshes: number;
  readonly repairs: number;
  readonly byKind: Record<string, number>;
  /** Backfill only: dataplane records the index rebuild wrote. */
  readonly indexRecordsWritten?: number;
  /** Backfill only: the cycle goes on in a continuation now, not at the next schedule. */
  readonly continued?: boolean;
}

export type { InvocationContext } from "./continuation/context.ts";

export type SweepHandler = (
  event: AllocatorCommand | ContinueEvent,
  context?: InvocationContext,
) => Promise<SweepSummary>;

export interface SweepHandlerOptions {
  readonly telemetry?: Telemetry;
  readonly client?: DynamoDBClient;
  readonly now?: () => number;
  readonly sleep?: (ms: number) => Promise<void>;
  /** How a continuation is started (decision 160). */
  readonly invoker?: InvokerFor;
}

/**
 * The scheduled repair sweep and the backfill: the same ports as the stream path, a position
 * stored in the claims table, and the invocation's remaining time as the budget. A backfill
 * starts a cycle marked as one whose first phase derives the membership index from the
 * dataplanes table, a page at a time (so meshes created later find their dataplanes in it);
 * whatever does not fit in the invocation goes on at once in a continuation, the function
 * invoking itself (decision 160), still marked as a backfill (its corrections stay out of the
 * alarm). A scheduled cycle goes on at the schedule's next invocation. Passes that run out of
 * time hand their meshes to a continuation either way.
 */
export function createSweepHandler(
  config: AllocatorConfig,
  options: SweepHandlerOptions = {},
): SweepHandler {
  const telemetry = options.telemetry ?? new PowertoolsTelemetry();
  const runtime = createRuntime(config, options);
  const now = runtime.settings.now;
  return async (event, context) => {
    try {
      const remaining = context?.getRemainingTimeInMillis();
      const budget = remaining === undefined ? undefined : PassBudget.of(remaining, now);
      const resume = event.vipAllocator === "continue";
      const result = await sweep({ ...runtime.ports, telemetry }, runtime.settings, {
        stored: true,
        restart: event.vipAllocator === "sweep" && event.restart === true,
        backfill: event.vipAllocator === "backfill",
        resumeOnly: resume,
        // A second look before a correction counts (decision 071).
        graceMs: config.sweepGraceSeconds * 1000,
        ...(remaining !== undefined ? { deadline: now() + remaining } : {}),
        ...(budget !== undefined ? { budget } : {}),
      });
      const goOn = result.backfill === true && result.stopped === "deadline";
      let continued = false;
      if (context !== undefined) {
        const hop = resume ? event.hop : 0;
        const handover = new Handover(options.invoker?.(context), hop, telemetry);
        continued = (await continueDeferred(budget, handover, { sweep: goOn }, telemetry)) && goOn;
      }
      const summary = {
        ...summarize(result, result.indexRecordsWritten),
        ...(goOn ? { continued } : {}),
      };
      telemetry.info("sweep invocation finished", { ...summary });
      return summary;
    } finally {
      telemetry.flush?.();
    }
  };
}

export function summarize(result: SweepResult, indexRecordsWritten?: number): SweepSummary {
  const byKind: Record<string, number> = Object.create(null);
  for (const repair of result.repairs) byKind[repair.kind] = (byKind[repair.kind] ?? 0) + 1;
  return {
    cycle: result.cycle,
    finished: result.finished,
    ...(result.stopped !== undefined ? { stopped: result.stopped } : {}),
    meshes: result.meshes,
    repairs: result.repairs.length,
    byKind,
    ...(indexRecordsWritten !== undefined ? { indexRecordsWritten } : {}),
  };
}
