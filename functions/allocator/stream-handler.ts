import type { DynamoDBBatchResponse, DynamoDBStreamEvent } from "aws-lambda";
import { lagNoter } from "./batch/lag-note.ts";
import { type BatchSettings, processBatch } from "./batch/process-batch.ts";
import type { AllocatorConfig } from "./config.ts";
import { PassBudget } from "./continuation/budget.ts";
import type { InvocationContext, InvokerFor } from "./continuation/context.ts";
import { Handover } from "./continuation/handover.ts";
import type { MeshOutcome } from "./pass/outcome.ts";
import { PowertoolsTelemetry } from "./powertools-telemetry.ts";
import { createRuntime, type RuntimeOptions } from "./runtime.ts";
import type { Telemetry } from "./telemetry.ts";

/** What Lambda (or the local runtime) calls with a batch of stream records from either table. */
export type StreamHandler = (
  event: DynamoDBStreamEvent,
  context?: InvocationContext,
) => Promise<DynamoDBBatchResponse>;

export interface StreamHandlerOptions extends RuntimeOptions {
  readonly telemetry?: Telemetry;
  /** Meshes reconciled at once within one invocation. */
  readonly concurrency?: number;
  /** Called with each mesh's outcome (the local CLI prints them). */
  readonly onOutcome?: (outcome: MeshOutcome) => void;
  /** How a continuation is started (Lambda: the function invokes itself; locally: a queue). */
  readonly invoker?: InvokerFor;
}

/**
 * The stream handler: takes the client, the stores and the pass settings from the
 * {@link createRuntime composition root} once, then runs {@link processBatch} on every event.
 * With a context, the invocation's remaining time bounds its passes (decision 160).
 */
export function createStreamHandler(
  config: AllocatorConfig,
  options: StreamHandlerOptions = {},
): StreamHandler {
  const telemetry = options.telemetry ?? new PowertoolsTelemetry();
  const runtime = createRuntime(config, options);
  const settings: BatchSettings = {
    ...runtime.settings,
    // Lag past the sweep's grace is noted for the sweep (decision 132).
    noteLag: lagNoter(
      runtime.ports.claims,
      config.sweepGraceSeconds * 1000,
      runtime.settings.now,
      telemetry,
    ),
    tables: config.tables,
    concurrency: options.concurrency ?? 4,
    ...(options.onOutcome !== undefined ? { onOutcome: options.onOutcome } : {}),
  };

  return async (event, context) => {
    try {
      const budget =
        context === undefined
          ? undefined
          : PassBudget.of(context.getRemainingTimeInMillis(), runtime.settings.now);
      const handover =
        context === undefined ? undefined : new Handover(options.invoker?.(context), 0, telemetry);
      return await processBatch(
        event,
        { ...runtime.ports, telemetry },
        {
          ...settings,
          ...(budget !== undefined ? { budget } : {}),
          ...(handover !== undefined ? { handover } : {}),
        },
      );
    } finally {
      telemetry.flush?.();
    }
  };
}
