import { configName } from "../../../functions/domain/adopt-entries.ts";
import { recordOf } from "../../../functions/domain/records.ts";
import { compareServices } from "../../../functions/domain/service-set.ts";
import type { CliContext } from "../context.ts";
import { type ExitCode, UsageError } from "../errors.ts";
import { scanVipItems } from "./vips.ts";

/** The namespace of the exported ConfigMaps (Kuma's control-plane namespace by default). */
export const KUMA_NAMESPACE = "kuma-system";

/** Every mesh's VIPs, service -> VIP, meshes and services sorted (records without prototype). */
export function exportedVips(
  items: ReadonlyMap<string, { readonly vips: Readonly<Record<string, string>> }>,
): Record<string, Record<string, string>> {
  const meshes = [...items.keys()].sort(compareServices);
  return recordOf(
    meshes.map((mesh) => {
      const vips = items.get(mesh)?.vips ?? {};
      const services = Object.keys(vips).sort(compareServices);
      return [mesh, recordOf(services.map((service) => [service, vips[service] as string]))];
    }),
  );
}

/**
 * Kuma's origin shape, one ConfigMap per mesh (`kuma-<mesh>-dns-vips`, data key `config`, a
 * flat service -> VIP map), in a `List` that `kubectl apply -f` and `vips adopt` both read.
 */
export function kumaConfigMaps(vips: Record<string, Record<string, string>>) {
  return {
    apiVersion: "v1",
    kind: "List",
    items: Object.keys(vips).map((mesh) => ({
      apiVersion: "v1",
      kind: "ConfigMap",
      metadata: { name: configName(mesh), namespace: KUMA_NAMESPACE },
      data: { config: JSON.stringify(vips[mesh]) },
    })),
  };
}

/**
 * `export [--format kuma|json]`: every mesh's VIPs on stdout, the rollback path (and a way to
 * feed another tool). `json` (default): `{ mesh: { service: vip } }`; `kuma`: ConfigMaps in
 * Kuma's origin shape. Services without a VIP (unallocated) have none to export (noted).
 */
export async function exportCommand(
  ctx: CliContext,
  format: string | undefined,
): Promise<ExitCode> {
  const chosen = format ?? "json";
  if (chosen !== "json" && chosen !== "kuma") {
    throw new UsageError(`--format must be kuma or json, got ${JSON.stringify(format)}`);
  }
  const items = await scanVipItems(ctx);
  const vips = exportedVips(items);
  let unallocated = 0;
  for (const item of items.values()) unallocated += Object.keys(item.unallocated ?? {}).length;
  if (unallocated > 0)
    ctx.out.note(`note: ${unallocated} unallocated services have no VIP to export`);
  const document = chosen === "json" ? vips : kumaConfigMaps(vips);
  ctx.out.line(ctx.json ? JSON.stringify(document) : JSON.stringify(document, null, 2));
  return 0;
}
