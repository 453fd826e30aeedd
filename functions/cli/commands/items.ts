import { readFileSync } from "node:fs";
import { resolve } from "node:path";
import type { CliContext } from "../context.ts";
import { CommandFailedError } from "../errors.ts";
import { type DataplaneDocument, parseDataplanes } from "../kuma-dataplane.ts";

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
