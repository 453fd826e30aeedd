import type { DynamoDBClient } from "@aws-sdk/client-dynamodb";
import type { DynamoDBStreamEvent } from "aws-lambda";
import type { AllocatorCommand, AllocatorConfig } from "../../functions/allocator/config.ts";
import { type ContinueEvent, isContinueEvent } from "../../functions/allocator/continuation.ts";
import {
  createContinueHandler,
  createStreamHandler,
  createSweepHandler,
  type StreamHandler,
  type SweepHandler,
} from "../../functions/allocator/handlers.ts";
import type { InvocationContext, MeshOutcome } from "../../functions/allocator/pass/deps.ts";
import type { Telemetry } from "../../functions/allocator/telemetry.ts";
import { describeError } from "./batch-delivery.ts";

/** What the local function did, for the drain's report. */
export interface LocalFunctionStats {
  /** Invocations by a stream batch (the poller's) and by a continuation. */
  streamInvocations: number;
  continuations: number;
  /** Invocations that ran past the function timeout (Lambda would have stopped them). */
  timeouts: number;
  /**
   * Asynchronous invocations (continuations, sweeps) that failed, after two retries as Lambda
   * retries an asynchronous invocation.
   */
  continuationErrors: number;
}

export interface LocalFunctionOptions {
  readonly client: DynamoDBClient;
  /** The function's timeout, emulated; unset: invocations have no context and no time limit. */
  readonly timeoutSeconds?: number | undefined;
  readonly onOutcome?: (outcome: MeshOutcome) => void;
  /** A line about a timeout or a failed continuation. @default one line on stderr */
  readonly onNote?: (text: string) => void;
  readonly now?: () => number;
  /** The handlers' telemetry. @default Powertools (logs on stdout, as in Lambda) */
  readonly telemetry?: Telemetry;
}

/** Lambda's retries of an asynchronous invocation that failed. */
const ASYNC_RETRIES = 2;

/**
 * The allocator function as Lambda runs it, in this process: each invocation gets a context
 * whose remaining time counts down from the function timeout; an invocation still running at
 * the timeout counts as timed out and fails as Lambda's would (its batch is retried; unlike
 * Lambda, the promise cannot be stopped, so its work finishes in the background and
 * {@link idle} waits for it). The function's continuations (decision 160) go to an in-process
 * queue and run as asynchronous invocations, with Lambda's two retries.
 */
export class LocalFunction {
  readonly stats: LocalFunctionStats = {
    streamInvocations: 0,
    continuations: 0,
    timeouts: 0,
    continuationErrors: 0,
  };
  /** What the poller calls. */
  readonly streamHandler: StreamHandler;
  private readonly running = new Set<Promise<unknown>>();
  private readonly continueHandler: ReturnType<typeof createContinueHandler>;
  private readonly sweeps: SweepHandler;
  private readonly streams: StreamHandler;
  private readonly now: () => number;
  private readonly note: (text: string) => void;

  constructor(
    config: AllocatorConfig,
    private readonly options: LocalFunctionOptions,
  ) {
    this.now = options.now ?? Date.now;
    this.note = options.onNote ?? ((text) => process.stderr.write(`${text}\n`));
    const invoker = () => ({
      invokeAsync: async (payload: ContinueEvent) => this.enqueue(payload),
    });
    const common = {
      client: options.client,
      invoker,
      ...(options.telemetry !== undefined ? { telemetry: options.telemetry } : {}),
    };
    this.streams = createStreamHandler(config, {
      ...common,
      ...(options.onOutcome !== undefined ? { onOutcome: options.onOutcome } : {}),
    });
    const sweeps = createSweepHandler(config, common);
    this.sweeps = sweeps;
    this.continueHandler = createContinueHandler(config, {
      ...common,
      sweeps,
      ...(options.onOutcome !== undefined ? { onOutcome: options.onOutcome } : {}),
    });
    this.streamHandler = async (event: DynamoDBStreamEvent) => {
      this.stats.streamInvocations++;
      return await this.invoke("stream batch", (context) => this.streams(event, context));
    };
  }

  /** Resolves once no continuation is queued or running and no timed-out invocation is left. */
  async idle(): Promise<void> {
    while (this.running.size > 0) await Promise.allSettled([...this.running]);
  }

  /**
   * An asynchronous invocation with a sweep, backfill or continuation payload (as the schedule,
   * the deployment's trigger, or the function itself sends); {@link idle} waits for it.
   */
  invokeAsync(payload: AllocatorCommand | ContinueEvent): void {
    this.enqueue(payload);
  }

  private enqueue(payload: AllocatorCommand | ContinueEvent): void {
    const run = (async () => {
      await new Promise((resolve) => setImmediate(resolve));
      for (let attempt = 0; attempt <= ASYNC_RETRIES; attempt++) {
        if (isContinueEvent(payload)) this.stats.continuations++;
        try {
          await this.invoke(payload.vipAllocator, (context) =>
            isContinueEvent(payload)
              ? this.continueHandler(payload, context)
              : this.sweeps(payload, context),
          );
          return;
        } catch (error) {
          this.note(`${payload.vipAllocator} invocation failed: ${describeError(error)}`);
        }
      }
      this.stats.continuationErrors++;
    })();
    this.track(run);
  }

  /** One invocation with a context; past the timeout it throws, as Lambda reports a timeout. */
  private async invoke<T>(what: string, call: (context?: InvocationContext) => Promise<T>) {
    const seconds = this.options.timeoutSeconds;
    if (seconds === undefined) return await call();
    const deadline = this.now() + seconds * 1000;
    const context: InvocationContext = {
      getRemainingTimeInMillis: () => Math.max(0, deadline - this.now()),
      invokedFunctionArn: "arn:aws:lambda:local:000000000000:function:vip-allocator",
    };
    const work = call(context);
    let timer: NodeJS.Timeout | undefined;
    const timedOut = new Promise<"timeout">((resolve) => {
      timer = setTimeout(() => resolve("timeout"), seconds * 1000);
    });
    try {
      const first = await Promise.race([work, timedOut]);
      if (first !== "timeout") return first as T;
    } finally {
      clearTimeout(timer);
    }
    this.stats.timeouts++;
    this.track(work);
    const message = `Task timed out after ${seconds.toFixed(2)} seconds`;
    this.note(`${what}: ${message}`);
    throw new Error(message);
  }

  private track(work: Promise<unknown>): void {
    const settled = work.then(
      () => undefined,
      () => undefined,
    );
    this.running.add(settled);
    void settled.finally(() => this.running.delete(settled));
  }
}
