import { paginateScan } from "@aws-sdk/client-dynamodb";
import { VipPool } from "../../../functions/domain/pool.ts";
import type { VipItem } from "../../../functions/domain/types.ts";
import { toPlain } from "../../../functions/store/attribute-values.ts";
import { DynamoItemClient } from "../../../functions/store/dynamo-item-client.ts";
import { decodeVipItem } from "../../../functions/store/vip-item-codec.ts";
import type { CliContext } from "../context.ts";
import { formatTable } from "../output.ts";

/** A mesh's VIP item exactly as stored (plain JSON), or undefined. */
export async function readRawVipItem(
  ctx: CliContext,
  mesh: string,
): Promise<Record<string, unknown> | undefined> {
  // Through the project's codec: service names such as `__proto__` are data.
  const doc = new DynamoItemClient(ctx.ddb);
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
  /** The range the mesh's item records (undefined: no item yet). */
  readonly cidr: string | undefined;
  readonly poolShare: string;
}

/** A range's pool, or undefined when an item records a range that does not parse. */
function poolOf(cidr: string, pools: Map<string, VipPool | undefined>): VipPool | undefined {
  if (!pools.has(cidr)) {
    let pool: VipPool | undefined;
    try {
      pool = VipPool.parse(cidr);
    } catch {
      pool = undefined;
    }
    pools.set(cidr, pool);
  }
  return pools.get(cidr);
}

/**
 * `list`: every mesh with its service count, version, unallocated count and use of the range
 * its item records (`cidr`: the range its VIPs came from, whatever this shell's VIP_CIDR says);
 * then, per range, the distinct VIPs in use.
 */
export async function listCommand(ctx: CliContext): Promise<0> {
  const meshes = (await scanTable(ctx, ctx.tables.meshes)).map((item) => String(item.name));
  const items = await scanVipItems(ctx);
  const names = [...new Set([...meshes, ...items.keys()])].sort();
  const pools = new Map<string, VipPool | undefined>();
  const rows: MeshListing[] = names.map((mesh) => {
    const item = items.get(mesh);
    const vips = Object.keys(item?.vips ?? {}).length;
    const unallocated = Object.keys(item?.unallocated ?? {}).length;
    const hosts = Object.keys(item?.hosts ?? {}).length;
    const pool = item === undefined ? undefined : poolOf(item.cidr, pools);
    return {
      mesh,
      meshExists: meshes.includes(mesh),
      services: vips + unallocated,
      vips,
      unallocated,
      version: item?.version,
      cidr: item?.cidr,
      poolShare: pool === undefined ? "-" : formatShare(vips + hosts, pool),
    };
  });
  // Per range: the distinct VIPs (services and hosts) of the items that record it.
  const inUse = new Map<string, Set<string>>();
  for (const item of items.values()) {
    const set = inUse.get(item.cidr) ?? new Set<string>();
    for (const vip of [...Object.values(item.vips), ...Object.values(item.hosts ?? {})]) {
      set.add(vip);
    }
    inUse.set(item.cidr, set);
  }
  const ranges = [...inUse.keys()].sort().map((cidr) => {
    const pool = poolOf(cidr, pools);
    const used = inUse.get(cidr)?.size ?? 0;
    return {
      cidr,
      poolSize: pool?.size.toString() ?? "?",
      vipsInUse: used,
      poolShare: pool === undefined ? "-" : formatShare(used, pool),
    };
  });
  if (ctx.json) {
    ctx.out.line(JSON.stringify({ meshes: rows, ranges }));
    return 0;
  }
  if (rows.length === 0) {
    ctx.out.line(`no meshes in table ${ctx.tables.meshes}`);
    return 0;
  }
  const table = [
    ["MESH", "SERVICES", "VERSION", "UNALLOCATED", "RANGE", "POOL USE"],
    ...rows.map((row) => [
      row.meshExists ? row.mesh : `${row.mesh} (orphan)`,
      String(row.services),
      row.version === undefined ? "-" : String(row.version),
      String(row.unallocated),
      row.cidr ?? "-",
      row.poolShare,
    ]),
  ];
  for (const line of formatTable(table)) ctx.out.line(line);
  for (const range of ranges) {
    ctx.out.line(
      `pool ${range.cidr}: ${range.vipsInUse} distinct VIPs in use of ${range.poolSize} (${range.poolShare}; quarantined addresses not counted)`,
    );
  }
  return 0;
}
