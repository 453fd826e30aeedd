import type { AllocatorConfig } from "../../../functions/allocator/config.ts";
import { createRuntime } from "../../../functions/allocator/runtime.ts";
import { sweep } from "../../../functions/allocator/sweep/sweep.ts";
import type { Repair, SweepResult } from "../../../functions/allocator/sweep/types.ts";
import { summarize } from "../../../functions/allocator/sweep-handler.ts";
import type { Telemetry } from "../../../functions/allocator/telemetry.ts";
import type { CliContext } from "../context.ts";
import { CommandFailedError, type ExitCode } from "../errors.ts";

export interface ReconcileRequest {
  /** The meshes to reconcile; undefined: all of them (`--all`). */
  readonly meshes: readonly string[] | undefined;
  readonly dryRun: boolean;
}

/** Telemetry for a CLI run: warnings and errors on stderr, the rest quiet (the CLI reports). */
export function cliTelemetry(ctx: CliContext): Telemetry {
  const note = (level: string, message: string, data?: Record<string, unknown>) =>
    ctx.out.note(`${level}: ${message}${data === undefined ? "" : ` ${JSON.stringify(data)}`}`);
  return {
    metric() {},
    repair() {},
    badInput(issue) {
      note("bad input skipped", `${issue.table} ${JSON.stringify(issue.key)} ${issue.field}`, {
        reason: issue.reason,
      });
    },
    info() {},
    warn: (message, data) => note("warning", message, data),
    error: (message, data) => note("error", message, data),
  };
}

/** Runs the repair sweep from the CLI: to the end of the cycle, its position kept in memory. */
export async function runSweep(
  ctx: CliContext,
  config: AllocatorConfig,
  request: ReconcileRequest,
  onMesh?: (mesh: string, repairs: readonly Repair[]) => void,
): Promise<SweepResult> {
  const runtime = createRuntime(config, { client: ctx.ddb });
  return await ctx.onTable(ctx.tables.claims, () =>
    sweep(
      {
        ...runtime.ports,
        telemetry: cliTelemetry(ctx),
      },
      runtime.settings,
      {
        dryRun: request.dryRun,
        ...(request.meshes !== undefined ? { meshes: request.meshes } : {}),
        ...(onMesh !== undefined ? { onMesh } : {}),
      },
    ),
  );
}

/** One correction as a line of the readable diff. */
export function describeRepair(repair: Repair): string {
  const detail = repair.detail ?? {};
  const list = (value: unknown) => (Array.isArray(value) ? value.join(", ") : "");
  switch (repair.kind) {
    case "index-drift": {
      const parts = [
        ...(list(detail.missing) !== "" ? [`+ entries ${list(detail.missing)}`] : []),
        ...(list(detail.orphan) !== "" ? [`- entries ${list(detail.orphan)}`] : []),
        ...(detail.staleRecord === true ? ["record rewritten"] : []),
      ];
      return `index: dataplane ${String(detail.dataplaneMesh)}/${String(detail.dataplane)}: ${parts.join("; ")}`;
    }
    case "item-missing":
      return `item: created (it was missing)`;
    case "item-services-added":
      return `item: + ${repair.service}${detail.vip !== undefined ? ` ${String(detail.vip)}` : ""}`;
    case "item-services-removed":
      return `item: - ${repair.service}${detail.vip !== undefined ? ` ${String(detail.vip)}` : ""}`;
    case "item-renumbered":
      return `item: ~ ${repair.service} ${String(detail.from)} -> ${detail.to === undefined ? "(a new VIP in range)" : String(detail.to)}`;
    case "item-of-deleted-mesh":
      return "item: removed (its mesh no longer exists)";
    case "membership-missing":
      return `claims: ${repair.service} ${String(detail.vip)} gets back its membership of ${repair.mesh}`;
    case "membership-leak":
      return `claims: ${repair.service} leaves ${repair.mesh} (${String(detail.why)})`;
    case "claim-unreleased":
      return `claims: ${repair.service} ${String(detail.vip)} released (no mesh uses it)`;
    case "address-orphaned":
      return `claims: address ${String(detail.vip)} of ${repair.service} dropped (its service claim is gone)`;
    case "pool-counter":
      return `claims: range ${String(detail.cidr)} counter ${String(detail.from)} -> ${String(detail.to)}`;
  }
}

/**
 * `reconcile [MESH ...|--all] [--dry-run]`: the repair sweep, now, to the end. Prints a
 * readable diff per mesh (or, with --json, one JSON object); with --dry-run it changes nothing
 * and exits 1 when something would be corrected.
 */
export async function reconcileCommand(
  ctx: CliContext,
  config: AllocatorConfig,
  request: ReconcileRequest,
): Promise<ExitCode> {
  const verb = request.dryRun ? "would correct" : "corrected";
  // Corrections printed with their mesh; the later phases' (items of deleted meshes, claims)
  // are printed after the meshes.
  const shown = new Set<Repair>();
  const result = await runSweep(ctx, config, request, (mesh, repairs) => {
    for (const repair of repairs) shown.add(repair);
    if (ctx.json) return;
    if (repairs.length === 0) {
      ctx.out.line(`${mesh}: ok`);
      return;
    }
    ctx.out.line(`${mesh}: ${verb} ${repairs.length}`);
    for (const repair of repairs) ctx.out.line(`  ${describeRepair(repair)}`);
  });
  const summary = summarize(result);
  if (ctx.json) {
    ctx.out.line(
      JSON.stringify({ dryRun: request.dryRun, ...summary, corrections: result.repairs }),
    );
  } else {
    for (const repair of result.repairs.filter((r) => !shown.has(r))) {
      ctx.out.line(`${repair.mesh ?? "(claims)"}: ${describeRepair(repair)}`);
    }
    ctx.out.line(
      `reconcile: ${summary.meshes} meshes, ${summary.repairs} ${request.dryRun ? "corrections found (dry run: nothing changed)" : "corrections made"}`,
    );
  }
  if (!result.finished) throw new CommandFailedError("the sweep stopped before the end");
  return request.dryRun && result.repairs.length > 0 ? 1 : 0;
}
