import type { DynamoDBBatchResponse, DynamoDBStreamEvent } from "aws-lambda";
import { lagNoter } from "./batch/lag-note.ts";
import { type BatchSettings, processBatch } from "./batch/process-batch.ts";
import type { AllocatorConfig } from "./config.ts";
import type { MeshOutcome } from "./pass/outcome.ts";
import { PowertoolsTelemetry } from "./powertools-telemetry.ts";
import { createRuntime, type RuntimeOptions } from "./runtime.ts";
import type { Telemetry } from "./telemetry.ts";

/** What Lambda (or the local poller) calls with a batch of stream records from either table. */
export type StreamHandler = (event: DynamoDBStreamEvent) => Promise<DynamoDBBatchResponse>;

export interface StreamHandlerOptions extends RuntimeOptions {
  readonly telemetry?: Telemetry;
  /** Meshes reconciled at once within one invocation. */
  readonly concurrency?: number;
  /** Called with each mesh's outcome (the local CLI prints them). */
  readonly onOutcome?: (outcome: MeshOutcome) => void;
}

/**
 * The stream handler: takes the client, the stores and the pass settings from the
 * {@link createRuntime composition root} once, then runs {@link processBatch} on every event.
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

  return async (event) => {
    try {
      return await processBatch(event, { ...runtime.ports, telemetry }, settings);
    } finally {
      telemetry.flush?.();
    }
  };
}
