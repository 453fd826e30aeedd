import type { AllocatorConfig } from "../../../functions/allocator/config.ts";
import type { DrainReport } from "../../local/poller.ts";
import { allocatorPoller, type CliContext } from "../context.ts";
import { CommandFailedError } from "../errors.ts";

/** "processed 53 records in 2 batches, 3 meshes" (+ invocations when retries happened). */
export function describeDrain(report: DrainReport): string {
  const invocations =
    report.invocations !== report.batches ? ` (${report.invocations} invocations)` : "";
  const plural = (n: number, word: string) => `${n} ${word}${n === 1 ? "" : "s"}`;
  return `processed ${plural(report.records, "record")} in ${plural(report.batches, "batch").replace("batchs", "batches")}${invocations}, ${plural(report.meshesTouched.length, "mesh").replace("meshs", "meshes")}`;
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
 * event source settings of the CDK stack. Checkpoints persist per endpoint, so a second
 * `drain` continues where the first stopped.
 */
export async function drainCommand(ctx: CliContext, config: AllocatorConfig): Promise<0> {
  const poller = allocatorPoller(ctx, config);
  let report: DrainReport;
  try {
    report = await poller.drain();
  } finally {
    poller.destroy();
  }
  ctx.out.line(ctx.json ? JSON.stringify(report) : describeDrain(report));
  failIfGaveUp(report);
  return 0;
}
