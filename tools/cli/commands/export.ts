import { configName } from "../../../functions/domain/adopt-entries.ts";
import { readExternalService } from "../../../functions/domain/external-service.ts";
import { hostOfEntry, isHostEntry } from "../../../functions/domain/hosts.ts";
import { recordOf } from "../../../functions/domain/records.ts";
import { compareServices, SERVICE_TAG } from "../../../functions/domain/service-set.ts";
import type { DataplaneRecord, VipItem } from "../../../functions/domain/types.ts";
import { DynamoMeshSource } from "../../../functions/store/dynamo-mesh-source.ts";
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
 * Kuma's origin shape (2020), one ConfigMap per mesh (`kuma-<mesh>-dns-vips`, data key
 * `config`, a flat service -> VIP map; no hosts), in a `List` that `kubectl apply -f` and
 * `vips adopt` both read. `--format kuma-origin`.
 */
export function kumaOriginConfigMaps(vips: Record<string, Record<string, string>>) {
  return configMapList(Object.keys(vips).map((mesh) => [mesh, JSON.stringify(vips[mesh])]));
}

function configMapList(configs: readonly (readonly [string, string])[]) {
  return {
    apiVersion: "v1",
    kind: "List",
    items: configs.map(([mesh, config]) => ({
      apiVersion: "v1",
      kind: "ConfigMap",
      metadata: { name: configName(mesh), namespace: KUMA_NAMESPACE },
      data: { config },
    })),
  };
}

/** One outbound of an entry, as Kuma's `OutboundEntry` marshals (no JSON tags: capitalised). */
interface KumaOutbound {
  readonly Port: number;
  readonly TagSet: Record<string, string>;
  readonly Origin: string;
}

/** The port of `host:port` (0 when there is none). */
const portOf = (address: string): number => Number(/:(\d{1,5})$/.exec(address)?.[1] ?? 0);

/**
 * The outbounds of each host's entry: one per port of the mesh's external services on that host
 * (`{Port, TagSet: {kuma.io/service}, Origin: "external-service:<name>"}`), the first by
 * external service name winning a port, as Kuma's view adds them.
 */
export function hostOutbounds(
  externalServices: readonly DataplaneRecord[],
): Map<string, KumaOutbound[]> {
  const byHost = new Map<string, KumaOutbound[]>();
  const sorted = [...externalServices].sort((a, b) => compareServices(a.name, b.name));
  for (const record of sorted) {
    const names = readExternalService({ ...record, kind: "external-service" }).services.get(
      record.mesh,
    );
    const service = [...(names ?? [])].find((name) => !isHostEntry(name));
    const host = [...(names ?? [])].find(isHostEntry);
    if (service === undefined || host === undefined) continue;
    const address = (record.item as { networking?: { address?: string } }).networking?.address;
    const port = portOf(address ?? "");
    const outbounds = byHost.get(hostOfEntry(host)) ?? [];
    if (!outbounds.some((outbound) => outbound.Port === port)) {
      outbounds.push({
        Port: port,
        TagSet: { [SERVICE_TAG]: service },
        Origin: `external-service:${record.name}`,
      });
    }
    byHost.set(
      hostOfEntry(host),
      outbounds.sort((a, b) => a.Port - b.Port),
    );
  }
  return byHost;
}

/**
 * A mesh's config as current Kuma versions persist and read it (the default format since 2021):
 * `"0:<service>": {"address", "outbounds": [{"Port": 0, "TagSet": {"kuma.io/service": ...},
 * "Origin": "service"}]}` for each service, `"1:<host>"` for each host with its external
 * services' outbounds; keys sorted, as Go marshals a map. `--format kuma`.
 */
export function kumaConfig(
  item: Pick<VipItem, "vips" | "hosts">,
  outbounds: ReadonlyMap<string, readonly KumaOutbound[]>,
): string {
  const entries: [string, { address: string; outbounds: readonly KumaOutbound[] }][] = [];
  for (const [service, address] of Object.entries(item.vips)) {
    const outbound = { Port: 0, TagSet: { [SERVICE_TAG]: service }, Origin: "service" };
    entries.push([`0:${service}`, { address, outbounds: [outbound] }]);
  }
  for (const [host, address] of Object.entries(item.hosts ?? {})) {
    // Kuma reads an entry only with an outbound; a host no external service names any more
    // (until the allocator's next pass) gets a bare one.
    const found = outbounds.get(host) ?? [{ Port: 0, TagSet: {}, Origin: "" }];
    entries.push([`1:${host}`, { address, outbounds: found }]);
  }
  entries.sort(([a], [b]) => compareServices(a, b));
  return JSON.stringify(recordOf(entries));
}

export const EXPORT_FORMATS = ["json", "kuma", "kuma-origin"] as const;

/**
 * `export [--format json|kuma|kuma-origin]`: every mesh's VIPs on stdout, the rollback path (and
 * a way to feed another tool). `json` (default): `{ mesh: { service: vip } }`; `kuma`:
 * ConfigMaps in the shape current Kuma versions read, hosts included; `kuma-origin`: Kuma's 2020
 * flat shape (services only). Names without a VIP (unallocated) have none to export (noted).
 */
export async function exportCommand(
  ctx: CliContext,
  format: string | undefined,
): Promise<ExitCode> {
  const chosen = format ?? "json";
  if (!(EXPORT_FORMATS as readonly string[]).includes(chosen)) {
    throw new UsageError(
      `--format must be ${EXPORT_FORMATS.join(", ")}, got ${JSON.stringify(format)}`,
    );
  }
  const items = await scanVipItems(ctx);
  const vips = exportedVips(items);
  let unallocated = 0;
  for (const item of items.values()) {
    unallocated += Object.keys(item.unallocated ?? {}).length;
    unallocated += Object.keys(item.unallocatedHosts ?? {}).length;
  }
  if (unallocated > 0) ctx.out.note(`note: ${unallocated} names without a VIP have none to export`);
  let document: unknown = vips;
  if (chosen === "kuma-origin") document = kumaOriginConfigMaps(vips);
  if (chosen === "kuma") {
    const source = new DynamoMeshSource(ctx.ddb, ctx.tables);
    const configs: [string, string][] = [];
    for (const mesh of [...items.keys()].sort(compareServices)) {
      const item = items.get(mesh) as VipItem;
      const hosts = Object.keys(item.hosts ?? {}).length > 0;
      const read = hosts
        ? await ctx.onTable(ctx.tables.externalServices, () => source.externalServicesOf(mesh))
        : { records: [] };
      configs.push([mesh, kumaConfig(item, hostOutbounds(read.records))]);
    }
    document = configMapList(configs);
  }
  ctx.out.line(ctx.json ? JSON.stringify(document) : JSON.stringify(document, null, 2));
  return 0;
}
