import { paginateScan } from "@aws-sdk/client-dynamodb";
import type { VipPool } from "../../../functions/domain/pool.ts";
import type { VipItem } from "../../../functions/domain/types.ts";
import { toPlain } from "../../../functions/store/attribute-values.ts";
import { DocumentClient } from "../../../functions/store/document-client.ts";
import { decodeVipItem } from "../../../functions/store/vip-item-codec.ts";
import type { CliContext } from "../context.ts";
import { CommandFailedError } from "../errors.ts";

/** A mesh's VIP item exactly as stored (plain JSON), or undefined. */
export async function readRawVipItem(
  ctx: CliContext,
  mesh: string,
): Promise<Record<string, unknown> | undefined> {
  // Through the project's codec: service names such as `__proto__` are data.
  const doc = new DocumentClient(ctx.ddb);
  return await ctx.onTable(ctx.tables.vips, () =>
    doc.get({ TableName: ctx.tables.vips, Key: { mesh }, ConsistentRead: true }),
  );
}

export async function readVipItem(ctx: CliContext, mesh: string): Promise<VipItem | undefined> {
  const raw = await readRawVipItem(ctx, mesh);
  return raw === undefined ? undefined : decodeVipItem(raw);
}

/** Every item of a table, as plain objects. */
export async function scanTable(
  ctx: CliContext,
  table: string,
): Promise<Record<string, unknown>[]> {
  return await ctx.onTable(table, async () => {
    const items: Record<string, unknown>[] = [];
    for await (const page of paginateScan(
      { client: ctx.ddb },
      { TableName: table, ConsistentRead: true },
    )) {
      for (const item of page.Items ?? []) items.push(toPlain(item));
    }
    return items;
  });
}

export async function scanVipItems(ctx: CliContext): Promise<Map<string, VipItem>> {
  const items = await scanTable(ctx, ctx.tables.vips);
  return new Map(items.map((raw) => [String(raw.mesh), decodeVipItem(raw)]));
}

/** `get MESH`: the VIP item as JSON; exit 1 when the mesh has none. */
export async function getCommand(ctx: CliContext, mesh: string): Promise<0> {
  const item = await readRawVipItem(ctx, mesh);
  if (item === undefined) {
    throw new CommandFailedError(
      `mesh ${mesh} has no VIP item in table ${ctx.tables.vips} (does the mesh exist, and has drain run?)`,
    );
  }
  ctx.out.line(ctx.json ? JSON.stringify(item) : JSON.stringify(item, null, 2));
  return 0;
}

/** Share of the pool, readable at any size (an IPv6 pool is huge: 1 of 2^64 is 5.4e-18%). */
export function formatShare(count: number, pool: VipPool): string {
  if (count === 0) return "0%";
  const percent = (count / Number(pool.size)) * 100;
  return percent >= 0.01 ? `${Number(percent.toFixed(2))}%` : `${percent.toExponential(1)}%`;
}

export interface MeshListing {
  readonly mesh: string;
  /** False for a VIP item whose mesh is gone (an orphan; drain removes it). */
  readonly meshExists: boolean;
  readonly services: number;
  readonly vips: number;
  readonly unallocated: number;
  readonly version: number | undefined;
  readonly poolShare: string;
}

/** `list`: every mesh with its service count, version, unallocated count and pool use. */
export async function listCommand(ctx: CliContext, pool: VipPool): Promise<0> {
  const meshes = (await scanTable(ctx, ctx.tables.meshes)).map((item) => String(item.name));
  const items = await scanVipItems(ctx);
  const names = [...new Set([...meshes, ...items.keys()])].sort();
  const rows: MeshListing[] = names.map((mesh) => {
    const item = items.get(mesh);
    const vips = Object.keys(item?.vips ?? {}).length;
    const unallocated = Object.keys(item?.unallocated ?? {}).length;
    return {
      mesh,
      meshExists: meshes.includes(mesh),
      services: vips + unallocated,
      vips,
      unallocated,
      version: item?.version,
      poolShare: formatShare(vips, pool),
    };
  });
  const distinct = new Set([...items.values()].flatMap((item) => Object.values(item.vips)));
  const total = {
    cidr: pool.cidr,
    poolSize: pool.size.toString(),
    vipsInUse: distinct.size,
    poolShare: formatShare(distinct.size, pool),
  };
  if (ctx.json) {
    ctx.out.line(JSON.stringify({ meshes: rows, pool: total }));
    return 0;
  }
  if (rows.length === 0) {
    ctx.out.line(`no meshes in table ${ctx.tables.meshes}`);
    return 0;
  }
  const table = [
    ["MESH", "SERVICES", "VERSION", "UNALLOCATED", "POOL USE"],
    ...rows.map((row) => [
      row.meshExists ? row.mesh : `${row.mesh} (orphan)`,
      String(row.services),
      row.version === undefined ? "-" : String(row.version),
      String(row.unallocated),
      row.poolShare,
    ]),
  ];
  const widths =
    table[0]?.map((_, column) => Math.max(...table.map((r) => (r[column] ?? "").length))) ?? [];
  for (const row of table) {
    ctx.out.line(
      row
        .map((cell, column) => cell.padEnd(widths[column] ?? 0))
        .join("  ")
        .trimEnd(),
    );
  }
  ctx.out.line(
    `pool ${total.cidr}: ${total.vipsInUse} distinct VIPs in use of ${total.poolSize} (${total.poolShare}; quarantined addresses not counted)`,
  );
  return 0;
}
