import type { AllocatorConfig } from "../../../functions/allocator/config.ts";
import type { LocalFunctionStats } from "../../local/local-function.ts";
import type { DrainReport } from "../../local/poller.ts";
import {
  allocatorFunction,
  allocatorPoller,
  type CliContext,
  parseFunctionTimeout,
} from "../context.ts";
import { CommandFailedError } from "../errors.ts";

/**
 * "processed 53 records in 2 batches, 3 meshes" (+ invocations when retries happened, and the
 * continuations and timeouts of a function with a timeout).
 */
export function describeDrain(report: DrainReport, fn?: LocalFunctionStats): string {
  const invocations =
    report.invocations !== report.batches ? ` (${report.invocations} invocations)` : "";
  const plural = (n: number, word: string) => `${n} ${word}${n === 1 ? "" : "s"}`;
  const continued =
    fn === undefined || fn.continuations + fn.timeouts === 0
      ? ""
      : `; ${plural(fn.continuations, "continuation")}, ${fn.timeouts} timed out`;
  return `processed ${plural(report.records, "record")} in ${plural(report.batches, "batch").replace("batchs", "batches")}${invocations}, ${plural(report.meshesTouched.length, "mesh").replace("meshs", "meshes")}${continued}`;
}

/** Throws (exit 1) when records went to the failure destination. */
export function failIfGaveUp(report: DrainReport): void {
  if (report.failedToDestination === 0) return;
  throw new CommandFailedError(
    `${report.failedToDestination} record(s) gave up and went to the failure destination ${report.failureFile}`,
  );
}

/**
 * `drain`: every record written so far on both streams, through the real handler, with the
 * event source settings of the CDK stack, then every continuation the function started.
 * Checkpoints persist per endpoint, so a second `drain` continues where the first stopped.
 * `--function-timeout SECONDS` emulates the function's timeout.
 */
export async function drainCommand(
  ctx: CliContext,
  config: AllocatorConfig,
  functionTimeout?: string,
): Promise<0> {
  const fn = allocatorFunction(ctx, config, parseFunctionTimeout(functionTimeout));
  const poller = allocatorPoller(ctx, config, {}, fn);
  let report: DrainReport;
  try {
    report = await poller.drain();
    await fn.idle();
  } finally {
    poller.destroy();
  }
  const withFunction = { ...report, function: { ...fn.stats } };
  ctx.out.line(ctx.json ? JSON.stringify(withFunction) : describeDrain(report, fn.stats));
  failIfGaveUp(report);
  if (fn.stats.continuationErrors > 0) {
    throw new CommandFailedError(
      `${fn.stats.continuationErrors} continuation(s) failed after Lambda's retries`,
    );
  }
  return 0;
}
