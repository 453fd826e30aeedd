import { readFileSync } from "node:fs";
import { resolve } from "node:path";
import type { AllocatorConfig } from "../../../functions/allocator/config.ts";
import { createRuntime } from "../../../functions/allocator/runtime.ts";
import {
  type AdoptEntry,
  AdoptInputError,
  type AdoptNote,
} from "../../../functions/domain/adopt-entries.ts";
import {
  type AdoptPlan,
  alreadyAdopted,
  planAdoption,
} from "../../../functions/domain/adopt-plan.ts";
import { recordOf } from "../../../functions/domain/records.ts";
import { parseAdoptFile } from "../adopt-input.ts";
import { type AdoptionResult, applyAdoption, readAdoptState } from "../adoption.ts";
import type { CliContext } from "../context.ts";
import { CommandFailedError, type ExitCode } from "../errors.ts";
import { cliTelemetry } from "./reconcile.ts";

export interface AdoptRequest {
  readonly files: readonly string[];
  /** The mesh of a bare config (`--mesh`). */
  readonly mesh: string | undefined;
  readonly dryRun: boolean;
  readonly renumberOutside: boolean;
  /** Where relative file names are resolved (the user's directory). */
  readonly cwd: string;
}

/** Every file read and parsed before anything else: one malformed file stops it all. */
export function readAdoptFiles(
  files: readonly string[],
  cwd: string,
  mesh: string | undefined,
): { entries: AdoptEntry[]; notes: AdoptNote[] } {
  const entries: AdoptEntry[] = [];
  const notes: AdoptNote[] = [];
  for (const file of files) {
    let text: string;
    try {
      text = readFileSync(resolve(cwd, file), "utf8");
    } catch (error) {
      throw new CommandFailedError(
        `${file}: cannot read it (${(error as NodeJS.ErrnoException).code ?? String(error)}); nothing written`,
      );
    }
    try {
      const parsed = parseAdoptFile(text, file, mesh);
      entries.push(...parsed.entries);
      notes.push(...parsed.notes);
    } catch (error) {
      if (error instanceof AdoptInputError) {
        throw new CommandFailedError(`${error.message}; nothing written`);
      }
      throw error;
    }
  }
  return { entries, notes };
}

/** The plan, one line per entry grouped by mesh, then a summary line. */
function printPlan(ctx: CliContext, plan: AdoptPlan, notes: readonly AdoptNote[]): void {
  for (const mesh of plan.meshes) {
    ctx.out.line(`${mesh}:`);
    for (const d of plan.decisions.filter((x) => x.entry.mesh === mesh)) {
      const name = d.entry.kind === "service" ? d.entry.name : `${d.entry.kind} ${d.entry.name}`;
      const label = d.conflict === undefined ? d.outcome : `${d.outcome} (${d.conflict})`;
      const detail = d.outcome === "adopt" || d.outcome === "in-place" ? "" : `: ${d.reason}`;
      ctx.out.line(
        `  ${name} ${d.entry.vip} ${label}${detail} [${d.entry.source}: ${d.entry.key}]`,
      );
    }
  }
  for (const note of notes) {
    ctx.out.line(
      `note: ${note.source}${note.key === undefined ? "" : ` ${note.key}`}: ${note.note}`,
    );
  }
  const count = (outcome: string) => plan.decisions.filter((d) => d.outcome === outcome).length;
  ctx.out.line(
    `plan: ${plan.claims.size} claims to write, ${count("in-place")} in place, ${count("renumber")} renumbered, ${count("refuse")} refused, ${count("skip")} not adopted (FQDNs, Kubernetes hosts)`,
  );
}

function printResult(ctx: CliContext, result: AdoptionResult, quarantine: number): void {
  for (const w of result.writes) {
    if (w.written) continue;
    ctx.out.line(
      w.lost === "service"
        ? `lost: ${w.service} was claimed meanwhile at ${w.now ?? "?"} (a pass ran first); ${w.vip} not adopted`
        : `lost: ${w.vip} was claimed meanwhile for ${w.owner ?? "another service"}; ${w.service} gets a fresh VIP`,
    );
  }
  for (const mesh of result.meshes) {
    const missing = mesh.exists ? "" : " (not in the meshes table: no item until it is)";
    ctx.out.line(
      `${mesh.mesh}: ${mesh.listed.size} listed${missing}${mesh.notListed.length > 0 ? `, not listed (no dataplane provides them yet): ${mesh.notListed.join(", ")}` : ""}`,
    );
  }
  if (result.released.length > 0) {
    ctx.out.line(
      `held: ${result.released.length} adopted claims no mesh lists yet are quarantined (their VIPs go to no other service for ${quarantine} s; a service that appears meanwhile gets its VIP): ${result.released.slice(0, 20).join(", ")}${result.released.length > 20 ? ", ..." : ""}`,
    );
  }
  const written = result.writes.filter((w) => w.written).length;
  ctx.out.line(
    `adopt: ${written} claims written, ${result.writes.length - written} lost to concurrent passes, ${result.meshes.length} meshes passed (${result.repairs} corrections)`,
  );
}

function planJson(plan: AdoptPlan) {
  return {
    meshes: plan.meshes,
    claims: [...plan.claims].map(([service, vip]) => ({ service, vip })),
    refused: plan.refused,
    entries: plan.decisions.map((d) => ({
      source: d.entry.source,
      key: d.entry.key,
      mesh: d.entry.mesh,
      kind: d.entry.kind,
      name: d.entry.name,
      vip: d.entry.vip,
      outcome: d.outcome,
      ...(d.vip !== undefined ? { to: d.vip } : {}),
      ...(d.conflict !== undefined ? { conflict: d.conflict } : {}),
      ...(d.with !== undefined ? { with: d.with } : {}),
      reason: d.reason,
    })),
  };
}

/**
 * `adopt FILE... [--mesh M] [--dry-run] [--renumber-outside]`: makes another allocator's VIPs
 * (Kuma's `kuma-<mesh>-dns-vips`, or a plain map) this allocator's state. Every file is parsed
 * and every conflict decided before anything is written. `--dry-run` prints the plan and exits
 * 1 unless the state already holds every adoptable entry as the files say (decision 100).
 */
export async function adoptCommand(
  ctx: CliContext,
  config: AllocatorConfig,
  request: AdoptRequest,
): Promise<ExitCode> {
  const { entries, notes } = readAdoptFiles(request.files, request.cwd, request.mesh);
  const runtime = createRuntime(config, { client: ctx.ddb });
  const ports = { ...runtime.ports, telemetry: cliTelemetry(ctx) };
  const state = await ctx.onTable(ctx.tables.claims, () =>
    readAdoptState(ports.claims, entries, config.pool),
  );
  const plan = planAdoption(entries, state, {
    pool: config.pool,
    renumberOutside: request.renumberOutside,
  });
  const json = ctx.json ? planJson(plan) : undefined;
  if (!ctx.json) printPlan(ctx, plan, notes);
  if (plan.refused) {
    if (json !== undefined) ctx.out.line(JSON.stringify({ dryRun: request.dryRun, ...json }));
    const count = plan.decisions.filter((d) => d.outcome === "refuse").length;
    throw new CommandFailedError(
      `adoption refused: ${count} VIPs outside VIP_CIDR ${config.pool.cidr} (widen VIP_CIDR, or --renumber-outside gives those services fresh VIPs); nothing written`,
    );
  }
  if (request.dryRun) {
    if (json !== undefined) ctx.out.line(JSON.stringify({ dryRun: true, ...json }));
    else ctx.out.line("dry run: nothing written");
    return alreadyAdopted(plan) ? 0 : 1;
  }
  const result = await ctx.onTable(ctx.tables.claims, () =>
    applyAdoption(ports, runtime.settings, plan),
  );
  if (json !== undefined) {
    ctx.out.line(
      JSON.stringify({
        dryRun: false,
        ...json,
        writes: result.writes,
        released: result.released,
        meshes: result.meshes.map((m) => ({
          mesh: m.mesh,
          exists: m.exists,
          listed: recordOf(m.listed),
          notListed: m.notListed,
        })),
        repairs: result.repairs,
      }),
    );
  } else {
    printResult(ctx, result, config.quarantineSeconds);
  }
  return 0;
}
