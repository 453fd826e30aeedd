import { rebuildIndex } from "../../../functions/allocator/membership-index/rebuild.ts";
import {
  type MeshComparison,
  recomputeMesh,
} from "../../../functions/allocator/membership-index/recompute.ts";
import { DynamoMembershipIndex } from "../../../functions/store/dynamo-membership-index.ts";
import { DynamoMeshSource } from "../../../functions/store/dynamo-mesh-source.ts";
import { DynamoVipItemStore } from "../../../functions/store/dynamo-vip-item-store.ts";
import type { CliContext } from "../context.ts";
import { CommandFailedError } from "../errors.ts";
import { scanTable } from "./vips.ts";

function ports(ctx: CliContext) {
  return {
    source: new DynamoMeshSource(ctx.ddb, ctx.tables),
    index: new DynamoMembershipIndex(ctx.doc, ctx.tables.index),
    vipItems: new DynamoVipItemStore(ctx.doc, ctx.tables.vips),
  };
}

/**
 * `index rebuild [--mesh M]`: derives the membership index from the dataplanes table (paged),
 * for tables that held data before the allocator was deployed, or after a loss. Writes only
 * what differs, so it is idempotent, and a run that was cut off is finished by running it
 * again. Safe while events flow.
 */
export async function indexRebuildCommand(ctx: CliContext, mesh: string | undefined): Promise<0> {
  const { source, index } = ports(ctx);
  let issues = 0;
  const result = await ctx.onTable(ctx.tables.index, () =>
    rebuildIndex(source, index, {
      ...(mesh !== undefined ? { mesh } : {}),
      onPage: (read) => ctx.out.note(`index rebuild: ${read} dataplanes read`),
      onIssue: () => {
        issues++;
      },
    }),
  );
  ctx.out.line(
    ctx.json
      ? JSON.stringify({ ...result, badInput: issues })
      : `index rebuilt${mesh !== undefined ? ` for mesh ${mesh}` : ""}: ${result.dataplanes} dataplanes read, ${result.recordsWritten} dataplane records written, ${result.entriesRepaired} entries repaired, ${issues} pieces of bad input skipped`,
  );
  return 0;
}

function describe(comparison: MeshComparison): string {
  if (comparison.agrees) return `${comparison.mesh}: ok (${comparison.fromTables.length} services)`;
  const parts: string[] = [];
  const list = (names: readonly string[]) => names.slice(0, 10).join(", ");
  if (comparison.index.missing.length > 0)
    parts.push(`index lacks ${list(comparison.index.missing)}`);
  if (comparison.index.extra.length > 0)
    parts.push(`index has extra ${list(comparison.index.extra)}`);
  if (comparison.item.missing.length > 0) parts.push(`item lacks ${list(comparison.item.missing)}`);
  if (comparison.item.extra.length > 0) parts.push(`item has extra ${list(comparison.item.extra)}`);
  if (comparison.exists && comparison.fromItem === undefined) parts.push("no VIP item");
  if (!comparison.exists && comparison.fromItem !== undefined) parts.push("item of a deleted mesh");
  return `${comparison.mesh}: DIFFERS: ${parts.join("; ")}`;
}

/**
 * `index check [--mesh M]`: the full recompute of each mesh from the tables, compared with the
 * index and the VIP item; exit 1 when any differ.
 */
export async function indexCheckCommand(ctx: CliContext, mesh: string | undefined): Promise<0> {
  const meshes =
    mesh !== undefined
      ? [mesh]
      : [
          ...new Set([
            ...(await scanTable(ctx, ctx.tables.meshes)).map((item) => String(item.name)),
            ...(await scanTable(ctx, ctx.tables.vips)).map((item) => String(item.mesh)),
          ]),
        ].sort();
  const all = ports(ctx);
  const comparisons: MeshComparison[] = [];
  for (const name of meshes) comparisons.push(await recomputeMesh(name, all));
  for (const comparison of comparisons) {
    ctx.out.line(ctx.json ? JSON.stringify(comparison) : describe(comparison));
  }
  const differing = comparisons.filter((comparison) => !comparison.agrees);
  if (differing.length > 0) {
    throw new CommandFailedError(
      `${differing.length} of ${comparisons.length} meshes differ from the tables (repair: index rebuild, then touch the mesh)`,
    );
  }
  return 0;
}
