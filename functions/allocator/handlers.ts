import type { DynamoDBClient } from "@aws-sdk/client-dynamodb";
import type { DynamoDBBatchResponse, DynamoDBStreamEvent } from "aws-lambda";
import { type BatchSettings, lagNoter, processBatch } from "./batch/process-batch.ts";
import type { AllocatorCommand, AllocatorConfig } from "./config.ts";
import type { InvokerFor } from "./continuation.ts";
import {
  type ContinuedPasses,
  type ContinueEvent,
  continueDeferred,
  continuePasses,
  Handover,
  notHandedOver,
} from "./continuation.ts";
import type { InvocationContext, MeshOutcome } from "./pass/deps.ts";
import { PassBudget } from "./pass/deps.ts";
import { PowertoolsTelemetry } from "./powertools-telemetry.ts";
import { createRuntime, type RuntimeOptions } from "./runtime.ts";
import { sweep } from "./sweep/sweep.ts";
import type { SweepResult } from "./sweep/types.ts";
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

export type { InvocationContext } from "./pass/deps.ts";

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
