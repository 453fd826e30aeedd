import { readFileSync } from "node:fs";
import { resolve } from "node:path";
import { readExternalService } from "../../../functions/domain/external-service.ts";
import type { CliContext } from "../context.ts";
import { CommandFailedError } from "../errors.ts";
import {
  type DataplaneDocument,
  type ExternalServiceDocument,
  parseDataplanes,
  parseExternalServices,
} from "../kuma-dataplane.ts";

function report(ctx: CliContext, result: Record<string, unknown>, text: string): void {
  ctx.out.line(ctx.json ? JSON.stringify(result) : text);
}

/** `mesh put NAME`: creates (or rewrites) a mesh item `{name}`. */
export async function meshPutCommand(ctx: CliContext, name: string): Promise<0> {
  const old = await ctx.onTable(ctx.tables.meshes, () =>
    ctx.doc.put({ TableName: ctx.tables.meshes, Item: { name }, ReturnValues: "ALL_OLD" }),
  );
  const action = old === undefined ? "created" : "updated";
  report(ctx, { mesh: name, action }, `mesh ${name} ${action}`);
  return 0;
}

/** `mesh delete NAME`: idempotent; says when there was nothing to delete. */
export async function meshDeleteCommand(ctx: CliContext, name: string): Promise<0> {
  const old = await ctx.onTable(ctx.tables.meshes, () =>
    ctx.doc.delete({ TableName: ctx.tables.meshes, Key: { name }, ReturnValues: "ALL_OLD" }),
  );
  const action = old === undefined ? "absent" : "deleted";
  report(
    ctx,
    { mesh: name, action },
    action === "deleted" ? `mesh ${name} deleted` : `mesh ${name} did not exist; nothing deleted`,
  );
  return 0;
}

function readSource(file: string, baseDir: string): string {
  try {
    return file === "-" ? readFileSync(0, "utf8") : readFileSync(resolve(baseDir, file), "utf8");
  } catch (error) {
    const code = (error as NodeJS.ErrnoException).code;
    throw new CommandFailedError(
      `cannot read ${file === "-" ? "stdin" : file}: ${code === "ENOENT" ? "no such file" : (error as Error).message}`,
    );
  }
}

/**
 * `dataplane put FILE`: stores each Kuma Dataplane of a YAML or JSON file (`-` = stdin); a
 * relative FILE is read from `baseDir`.
 */
export async function dataplanePutCommand(
  ctx: CliContext,
  file: string,
  baseDir: string,
): Promise<0> {
  let dataplanes: DataplaneDocument[];
  try {
    dataplanes = parseDataplanes(readSource(file, baseDir), file === "-" ? "stdin" : file);
  } catch (error) {
    if (error instanceof CommandFailedError) throw error;
    throw new CommandFailedError((error as Error).message);
  }
  for (const dataplane of dataplanes) {
    const old = await ctx.onTable(ctx.tables.dataplanes, () =>
      ctx.doc.put({
        TableName: ctx.tables.dataplanes,
        Item: { ...dataplane },
        ReturnValues: "ALL_OLD",
      }),
    );
    const action = old === undefined ? "created" : "updated";
    report(
      ctx,
      { mesh: dataplane.mesh, name: dataplane.name, action },
      `dataplane ${dataplane.mesh}/${dataplane.name} ${action}`,
    );
  }
  return 0;
}

/** `dataplane delete MESH NAME`: idempotent; says when there was nothing to delete. */
export async function dataplaneDeleteCommand(
  ctx: CliContext,
  mesh: string,
  name: string,
): Promise<0> {
  const old = await ctx.onTable(ctx.tables.dataplanes, () =>
    ctx.doc.delete({
      TableName: ctx.tables.dataplanes,
      Key: { mesh, name },
      ReturnValues: "ALL_OLD",
    }),
  );
  const action = old === undefined ? "absent" : "deleted";
  report(
    ctx,
    { mesh, name, action },
    action === "deleted"
      ? `dataplane ${mesh}/${name} deleted`
      : `dataplane ${mesh}/${name} did not exist; nothing deleted`,
  );
  return 0;
}

/** The external-services table, or a one-line error when this deployment has none. */
function externalServicesTable(ctx: CliContext): string {
  const table = ctx.tables.externalServices;
  if (table === undefined) {
    throw new CommandFailedError(
      "no external-services table: set EXTERNAL_SERVICES_TABLE (the local runtime has it by default)",
    );
  }
  return table;
}

/**
 * `external-service put FILE`: stores each Kuma ExternalService of a YAML or JSON file (`-` =
 * stdin); what the allocator will skip of it (a bad address, no service tag) is noted on
 * stderr, and it is stored anyway, as `dataplane put` does.
 */
export async function externalServicePutCommand(
  ctx: CliContext,
  file: string,
  baseDir: string,
): Promise<0> {
  const table = externalServicesTable(ctx);
  let services: ExternalServiceDocument[];
  try {
    services = parseExternalServices(readSource(file, baseDir), file === "-" ? "stdin" : file);
  } catch (error) {
    if (error instanceof CommandFailedError) throw error;
    throw new CommandFailedError((error as Error).message);
  }
  for (const service of services) {
    for (const issue of readExternalService({ ...service, item: service }).issues) {
      ctx.out.note(
        `warning: external service ${service.mesh}/${service.name}: ${issue.field}: ${issue.reason}`,
      );
    }
    const old = await ctx.onTable(table, () =>
      ctx.doc.put({ TableName: table, Item: { ...service }, ReturnValues: "ALL_OLD" }),
    );
    const action = old === undefined ? "created" : "updated";
    report(
      ctx,
      { mesh: service.mesh, name: service.name, action },
      `external service ${service.mesh}/${service.name} ${action}`,
    );
  }
  return 0;
}

/** `external-service delete MESH NAME`: idempotent; says when there was nothing to delete. */
export async function externalServiceDeleteCommand(
  ctx: CliContext,
  mesh: string,
  name: string,
): Promise<0> {
  const table = externalServicesTable(ctx);
  const old = await ctx.onTable(table, () =>
    ctx.doc.delete({ TableName: table, Key: { mesh, name }, ReturnValues: "ALL_OLD" }),
  );
  const action = old === undefined ? "absent" : "deleted";
  report(
    ctx,
    { mesh, name, action },
    action === "deleted"
      ? `external service ${mesh}/${name} deleted`
      : `external service ${mesh}/${name} did not exist; nothing deleted`,
  );
  return 0;
}
