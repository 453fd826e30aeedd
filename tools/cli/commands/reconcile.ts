import type { AllocatorConfig } from "../../../functions/allocator/config.ts";
import { summarize } from "../../../functions/allocator/handlers.ts";
import { createRuntime } from "../../../functions/allocator/runtime.ts";
import { sweep } from "../../../functions/allocator/sweep/sweep.ts";
import type { Repair, SweepResult } from "../../../functions/allocator/sweep/types.ts";
import type { Telemetry } from "../../../functions/allocator/telemetry.ts";
import { hostEntry, hostOfEntry, isHostEntry } from "../../../functions/domain/hosts.ts";
import { exhaustedReason } from "../../../functions/domain/plan.ts";
import type { CliContext } from "../context.ts";
import { CommandFailedError, type ExitCode } from "../errors.ts";
import { readVipItem, scanVipItems } from "./vips.ts";

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
  return await ctx.onTable(undefined, () =>
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
      return `item: created (it was missing)${typeof detail.services === "number" ? `, ${detail.services} service${detail.services === 1 ? "" : "s"}` : ""}`;
    case "item-services-added":
      return `item: + ${repair.service}${
        detail.vip !== undefined
          ? ` ${String(detail.vip)}`
          : detail.unallocated !== undefined
            ? ` (no VIP: ${String(detail.unallocated)})`
            : ""
      }`;
    case "item-services-removed":
      return `item: - ${repair.service}${detail.vip !== undefined ? ` ${String(detail.vip)}` : ""}`;
    case "item-renumbered":
      return `item: ~ ${repair.service} ${String(detail.from)} -> ${
        detail.to !== undefined
          ? String(detail.to)
          : detail.unallocated !== undefined
            ? `(no VIP: ${String(detail.unallocated)})`
            : "(a new VIP in range)"
      }`;
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

/** Names left without a VIP, by mesh: name (a host as `host NAME`) -> why. */
export type LeftWithoutVip = Map<string, Map<string, string>>;

/**
 * The names the meshes' items leave without a VIP: after a run, what the items say; after a dry
 * run, what they would say: the items' unallocated names the run would neither give a VIP nor
 * remove, and the names it predicts no VIP for (decision 145).
 */
export async function leftWithoutVip(
  ctx: CliContext,
  request: ReconcileRequest,
  repairs: readonly Repair[],
  /** Why a name of a mesh the run would create an item for would get none. */
  exhausted: string,
): Promise<LeftWithoutVip> {
  const items =
    request.meshes === undefined
      ? [...(await scanVipItems(ctx)).values()]
      : (await Promise.all(request.meshes.map((mesh) => readVipItem(ctx, mesh)))).filter(
          (item) => item !== undefined,
        );
  const left: LeftWithoutVip = new Map();
  const add = (mesh: string, name: string, why: string) => {
    const shown = isHostEntry(name) ? `host ${hostOfEntry(name)}` : name;
    left.set(mesh, (left.get(mesh) ?? new Map()).set(shown, why));
  };
  const changed = new Set(
    request.dryRun
      ? repairs
          .filter((r) => r.kind === "item-services-added" || r.kind === "item-services-removed")
          .map((r) => JSON.stringify([r.mesh, r.service]))
      : [],
  );
  const gone = new Set(
    request.dryRun
      ? repairs.filter((r) => r.kind === "item-of-deleted-mesh").map((r) => r.mesh)
      : [],
  );
  for (const item of items) {
    if (gone.has(item.mesh)) continue;
    const names = [
      ...Object.entries(item.unallocated ?? {}),
      ...Object.entries(item.unallocatedHosts ?? {}).map(([host, why]) => [hostEntry(host), why]),
    ];
    for (const [name, why] of names) {
      if (!changed.has(JSON.stringify([item.mesh, name])))
        add(item.mesh, name as string, why as string);
    }
  }
  if (request.dryRun) {
    for (const repair of repairs) {
      const detail = repair.detail ?? {};
      if (repair.mesh === undefined) continue;
      if (repair.service !== undefined && typeof detail.unallocated === "string") {
        add(repair.mesh, repair.service, detail.unallocated);
      }
      if (repair.kind === "item-missing" && Array.isArray(detail.unallocated)) {
        for (const name of detail.unallocated) add(repair.mesh, String(name), exhausted);
      }
    }
  }
  return left;
}

/**
 * `reconcile [MESH ...|--all] [--dry-run]`: the repair sweep, now, to the end. Prints a
 * readable diff per mesh (or, with --json, one JSON object). Exit 1 when names are left without
 * a VIP (the range is full); with --dry-run it changes nothing and exits 1 when something would
 * be corrected or would be left without a VIP.
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
  const left = await leftWithoutVip(ctx, request, result.repairs, exhaustedReason(config.pool));
  const unallocated = Object.fromEntries(
    [...left].map(([mesh, names]) => [mesh, Object.fromEntries(names)]),
  );
  const count = [...left.values()].reduce((sum, names) => sum + names.size, 0);
  if (ctx.json) {
    ctx.out.line(
      JSON.stringify({
        dryRun: request.dryRun,
        ...summary,
        corrections: result.repairs,
        withoutVip: unallocated,
      }),
    );
  } else {
    for (const repair of result.repairs.filter((r) => !shown.has(r))) {
      ctx.out.line(`${repair.mesh ?? "(claims)"}: ${describeRepair(repair)}`);
    }
    ctx.out.line(
      `reconcile: ${summary.meshes} meshes, ${summary.repairs} ${request.dryRun ? "corrections found (dry run: nothing changed)" : "corrections made"}`,
    );
    for (const [mesh, names] of [...left].sort(([a], [b]) => (a < b ? -1 : 1))) {
      for (const [name, why] of [...names].sort(([a], [b]) => (a < b ? -1 : 1))) {
        ctx.out.line(`${mesh}: ! ${name} ${request.dryRun ? "would have" : "has"} no VIP: ${why}`);
      }
    }
  }
  if (!result.finished) throw new CommandFailedError("the sweep stopped before the end");
  if (count > 0) {
    const meshes = left.size === 1 ? "1 mesh" : `${left.size} meshes`;
    throw new CommandFailedError(
      `${count} name${count === 1 ? "" : "s"} of ${meshes} ${request.dryRun ? "would be" : "are"} left without a VIP (the range is full; see above)`,
    );
  }
  return request.dryRun && result.repairs.length > 0 ? 1 : 0;
}
