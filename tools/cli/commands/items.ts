import { meshNameRefusal } from "../../../functions/domain/admission.ts";
import type { CliContext } from "../context.ts";
import { CommandFailedError } from "../errors.ts";

/**
 * `mesh put NAME`: creates (or rewrites) a mesh item `{type: "Mesh", name}`; a name the mesh
 * name rule refuses (functions/domain/admission.ts), e.g. a file path, is not written.
 */
export async function meshPutCommand(ctx: CliContext, name: string): Promise<0> {
  const refusal = meshNameRefusal(name);
  if (refusal !== undefined) {
    const hint = /[/\\]|\.(ya?ml|json)$/i.test(name)
      ? " (to store the Mesh of a file: vips apply -f FILE)"
      : "";
    throw new CommandFailedError(
      `mesh put: ${refusal.field}: ${refusal.reason}${hint}; nothing written`,
    );
  }
  const old = await ctx.onTable(ctx.tables.meshes, () =>
    ctx.doc.put({
      TableName: ctx.tables.meshes,
      Item: { type: "Mesh", name },
      ReturnValues: "ALL_OLD",
    }),
  );
  const action = old === undefined ? "created" : "updated";
  ctx.out.line(ctx.json ? JSON.stringify({ mesh: name, action }) : `mesh ${name} ${action}`);
  return 0;
}
