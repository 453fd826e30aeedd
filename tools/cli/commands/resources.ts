/**
 * kumactl's habits over the input tables and the VIP items: `get meshes|dataplanes|
 * external-services|vips [NAME] [--mesh M] [-o table|json|yaml]` and `delete mesh|dataplane|
 * external-service NAME [--mesh M]` (exit 1 when there is nothing to delete).
 */
import { readExternalService } from "../../../functions/domain/external-service.ts";
import { readDataplane } from "../../../functions/domain/service-set.ts";
import type { DataplaneRecord, VipItem } from "../../../functions/domain/types.ts";
import { DynamoMeshSource } from "../../../functions/store/dynamo-mesh-source.ts";
import type { CliContext } from "../context.ts";
import { CommandFailedError, type ExitCode } from "../errors.ts";
import type { ResourceType } from "../kuma-resources.ts";
import { listOf, printResources } from "../output.ts";
import { readVipItem, scanTable, scanVipItems } from "./vips.ts";

/** The mesh of one dataplane or external service when `--mesh` is not given (kumactl's). */
export const DEFAULT_MESH = "default";

const count = (record: Readonly<Record<string, unknown>> | undefined): string =>
  String(Object.keys(record ?? {}).length);

const byName = (a: string, b: string): number => (a < b ? -1 : a > b ? 1 : 0);

/** `get meshes [NAME]`: the meshes table, with what each mesh's VIP item holds. */
export async function getMeshes(ctx: CliContext, name: string | undefined): Promise<ExitCode> {
  const table = ctx.tables.meshes;
  const meshes = (await scanTable(ctx, table))
    .filter((item) => name === undefined || item.name === name)
    .sort((a, b) => byName(String(a.name), String(b.name)));
  if (name !== undefined && meshes.length === 0) {
    throw new CommandFailedError(`there is no Mesh ${JSON.stringify(name)} in table ${table}`);
  }
  const items = await scanVipItems(ctx);
  printResources(
    ctx,
    name === undefined ? listOf(meshes) : meshes[0],
    () => [
      ["NAME", "SERVICES", "HOSTS", "UNALLOCATED", "VIP VERSION", "RANGE"],
      ...meshes.map((mesh) => {
        const item = items.get(String(mesh.name));
        return [
          String(mesh.name),
          count(item?.vips),
          count(item?.hosts),
          String(
            Object.keys(item?.unallocated ?? {}).length +
              Object.keys(item?.unallocatedHosts ?? {}).length,
          ),
          item === undefined ? "(no item yet)" : String(item.version),
          item?.cidr ?? "",
        ];
      }),
    ],
    `no meshes in table ${table}`,
  );
  return 0;
}

/** `get dataplanes|external-services [NAME] [--mesh M]`: an input table, by mesh. */
export async function getInputs(
  ctx: CliContext,
  type: Exclude<ResourceType, "Mesh">,
  name: string | undefined,
  mesh: string | undefined,
): Promise<ExitCode> {
  const table = inputTable(ctx, type);
  const inMesh = name !== undefined ? (mesh ?? DEFAULT_MESH) : mesh;
  let records: DataplaneRecord[];
  if (inMesh !== undefined) {
    const source = new DynamoMeshSource(ctx.ddb, ctx.tables);
    const read = await ctx.onTable(table, () =>
      type === "Dataplane" ? source.dataplanesOf(inMesh) : source.externalServicesOf(inMesh),
    );
    records = [...read.records];
  } else {
    records = (await scanTable(ctx, table)).map((item) => ({
      mesh: String(item.mesh),
      name: String(item.name),
      item,
    }));
  }
  records = records
    .filter((record) => name === undefined || record.name === name)
    .sort((a, b) => byName(a.mesh, b.mesh) || byName(a.name, b.name));
  if (name !== undefined && records.length === 0) {
    throw new CommandFailedError(
      `there is no ${type} ${JSON.stringify(name)} in mesh ${JSON.stringify(inMesh)} (table ${table})`,
    );
  }
  const documents = records.map((record) => record.item);
  printResources(
    ctx,
    name === undefined ? listOf(documents) : documents[0],
    () => [
      [
        "MESH",
        "NAME",
        "ADDRESS",
        type === "Dataplane" ? "SERVICES" : "NAMES WITH A VIP",
        "SKIPPED",
      ],
      ...records.map((record) => {
        const read =
          type === "Dataplane"
            ? readDataplane(record)
            : readExternalService({ ...record, kind: "external-service" });
        const names = [...read.services.entries()]
          .flatMap(([inMeshOf, services]) =>
            [...services].map((s) => (inMeshOf === record.mesh ? s : `${inMeshOf}/${s}`)),
          )
          .sort();
        const networking = (record.item as { networking?: { address?: unknown } }).networking;
        return [
          record.mesh,
          record.name,
          typeof networking?.address === "string" ? networking.address : "",
          names.join(","),
          read.issues.map((issue) => `${issue.field}: ${issue.reason}`).join("; "),
        ];
      }),
    ],
    `no ${type === "Dataplane" ? "dataplanes" : "external services"}${inMesh === undefined ? "" : ` in mesh ${inMesh}`} in table ${table}`,
  );
  return 0;
}

/** `get vips [MESH]`: the VIP items (hosts apart, format 2 decoded). */
export async function getVips(ctx: CliContext, mesh: string | undefined): Promise<ExitCode> {
  if (mesh !== undefined) {
    const item = await readVipItem(ctx, mesh);
    if (item === undefined) {
      throw new CommandFailedError(
        `mesh ${mesh} has no VIP item in table ${ctx.tables.vips} (does the mesh exist, and has the allocator passed it?)`,
      );
    }
    printResources(ctx, item, () => vipRows(item));
    return 0;
  }
  const items = [...(await scanVipItems(ctx)).values()].sort((a, b) => byName(a.mesh, b.mesh));
  printResources(
    ctx,
    listOf(items),
    () => [
      ["MESH", "SERVICES", "HOSTS", "UNALLOCATED", "VERSION", "RANGE", "UPDATED"],
      ...items.map((item) => [
        item.mesh,
        count(item.vips),
        count(item.hosts),
        String(
          Object.keys(item.unallocated ?? {}).length +
            Object.keys(item.unallocatedHosts ?? {}).length,
        ),
        String(item.version),
        item.cidr,
        item.updatedAt,
      ]),
    ],
    `no VIP items in table ${ctx.tables.vips}`,
  );
  return 0;
}

/** One mesh's VIPs as rows: services, hosts, then the names without a VIP and why. */
export function vipRows(item: VipItem): string[][] {
  const sorted = (record: Readonly<Record<string, string>> | undefined) =>
    Object.entries(record ?? {}).sort(([a], [b]) => byName(a, b));
  return [
    ["KIND", "NAME", "VIP"],
    ...sorted(item.vips).map(([service, vip]) => ["service", service, vip]),
    ...sorted(item.hosts).map(([host, vip]) => ["host", host, vip]),
    ...sorted(item.unallocated).map(([service, why]) => ["service", service, `(none: ${why})`]),
    ...sorted(item.unallocatedHosts).map(([host, why]) => ["host", host, `(none: ${why})`]),
  ];
}

function inputTable(ctx: CliContext, type: ResourceType): string {
  if (type === "Mesh") return ctx.tables.meshes;
  if (type === "Dataplane") return ctx.tables.dataplanes;
  const table = ctx.tables.externalServices;
  if (table === undefined) {
    throw new CommandFailedError(
      "no external-services table: set EXTERNAL_SERVICES_TABLE (the local runtime has it by default)",
    );
  }
  return table;
}

/**
 * `delete mesh NAME`, `delete dataplane|external-service NAME [--mesh M]`: deletes the item;
 * exit 1 when there was none (nothing deleted).
 */
export async function deleteResource(
  ctx: CliContext,
  type: ResourceType,
  name: string,
  mesh: string | undefined,
): Promise<ExitCode> {
  const table = inputTable(ctx, type);
  const inMesh = type === "Mesh" ? undefined : (mesh ?? DEFAULT_MESH);
  const key = inMesh === undefined ? { name } : { mesh: inMesh, name };
  const old = await ctx.onTable(table, () =>
    ctx.doc.delete({ TableName: table, Key: key, ReturnValues: "ALL_OLD" }),
  );
  const what = `${type} ${inMesh === undefined ? "" : `${inMesh}/`}${name}`;
  if (old === undefined) {
    throw new CommandFailedError(`there is no ${what} in table ${table}; nothing deleted`);
  }
  ctx.out.line(
    ctx.json
      ? JSON.stringify({
          type,
          ...(inMesh !== undefined ? { mesh: inMesh } : {}),
          name,
          action: "deleted",
        })
      : `${what} deleted${type === "Mesh" ? " (its VIP item goes at the allocator's next pass)" : ""}`,
  );
  return 0;
}
