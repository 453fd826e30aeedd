import { createTables } from "../../../functions/store/create-tables.ts";
import type { CliContext } from "../context.ts";

/**
 * `tables create`: every table from the one definition module; idempotent. On a local engine
 * the vips table has the change feed's stream (what `watch` reads), as a deployment with the
 * construct's `vipsStream` has.
 */
export async function tablesCreateCommand(ctx: CliContext): Promise<0> {
  const results = await createTables(ctx.ddb, ctx.tables, {
    vipsStream: ctx.endpoint !== undefined,
  });
  if (ctx.json) {
    ctx.out.line(JSON.stringify(results));
    return 0;
  }
  for (const table of results) {
    const stream = table.streamArn !== undefined ? " (stream on)" : "";
    ctx.out.line(`table ${table.name}: ${table.created ? "created" : "exists"}${stream}`);
  }
  return 0;
}
