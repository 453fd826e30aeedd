import { readFileSync } from "node:fs";
import { resolve } from "node:path";
import {
  dataplaneRefusals,
  externalServiceRefusals,
  meshNameRefusal,
  type Refusal,
} from "../../../functions/domain/admission.ts";
import type { CliContext } from "../context.ts";
import { CommandFailedError, type ExitCode } from "../errors.ts";
import {
  describeResource,
  type KumaResource,
  parseKumaResources,
  type ResourceType,
} from "../kuma-resources.ts";

/** The text of FILE (relative to `baseDir`), or of stdin for `-`. */
export function readSource(file: string, baseDir: string): string {
  try {
    return file === "-" ? readFileSync(0, "utf8") : readFileSync(resolve(baseDir, file), "utf8");
  } catch (error) {
    const code = (error as NodeJS.ErrnoException).code;
    throw new CommandFailedError(
      `cannot read ${file === "-" ? "stdin" : file}: ${code === "ENOENT" ? "no such file" : (error as Error).message}`,
    );
  }
}

export interface ApplyRequest {
  readonly file: string;
  readonly baseDir: string;
  readonly dryRun: boolean;
  /** The put commands take one type only (`dataplane put` takes Dataplanes). */
  readonly only?: ResourceType;
}

/** The table a resource type is stored in, or undefined when this deployment has none. */
function tableOf(ctx: CliContext, type: ResourceType): string | undefined {
  if (type === "Mesh") return ctx.tables.meshes;
  if (type === "Dataplane") return ctx.tables.dataplanes;
  return ctx.tables.externalServices;
}

/**
 * `apply -f FILE|-`: stores the Kuma resources of a YAML or JSON file (one or many documents,
 * universal format or a `kubectl get -o yaml` list), each in the table its type names. Every
 * resource is checked first with the allocator's own rules (functions/domain/admission.ts):
 * what the allocator would skip is refused, naming the document, the field and the rule, and
 * nothing of a refused file is written (exit 1). Meshes are written first, so a file may bring
 * a mesh with its dataplanes; a dataplane's mesh must exist or be in the file.
 */
export async function applyCommand(ctx: CliContext, request: ApplyRequest): Promise<ExitCode> {
  const source = request.file === "-" ? "stdin" : request.file;
  const parsed = parseKumaResources(readSource(request.file, request.baseDir), source);
  const lines = parsed.problems.map(
    (problem) =>
      `${problem.where}: ${problem.field === undefined ? "" : `${problem.field}: `}${problem.reason}`,
  );
  const resources = parsed.resources;
  for (const resource of resources) {
    for (const refusal of await refusalsOf(ctx, resource, resources, request.only)) {
      lines.push(
        `${resource.where}: ${describeResource(resource)}: ${refusal.field}: ${refusal.reason}`,
      );
    }
  }
  if (lines.length > 0) {
    const count = lines.length === 1 ? "" : ` (${lines.length} problems)`;
    lines[lines.length - 1] = `${lines.at(-1)}; nothing written${count}`;
    throw new CommandFailedError(lines.join("\n"));
  }
  const tables = [...new Set(resources.map((r) => tableOf(ctx, r.type) as string))];
  const missing = await ctx.missingTables(tables);
  if (missing.length > 0) {
    throw new CommandFailedError(
      `table${missing.length === 1 ? "" : "s"} ${missing.join(", ")} ${missing.length === 1 ? "does" : "do"} not exist at ${ctx.where()}; create ${missing.length === 1 ? "it" : "them"} with: tables create; nothing written`,
    );
  }
  const ordered = [...resources].sort(
    (a, b) => Number(b.type === "Mesh") - Number(a.type === "Mesh"),
  );
  for (const resource of ordered) {
    const table = tableOf(ctx, resource.type) as string;
    const action = request.dryRun ? "valid" : await write(ctx, table, resource);
    const result = {
      type: resource.type,
      ...(resource.mesh !== undefined ? { mesh: resource.mesh } : {}),
      name: resource.name,
      action,
    };
    ctx.out.line(
      ctx.json
        ? JSON.stringify(result)
        : `${describeResource(resource)} ${action}${request.dryRun ? " (dry run: not written)" : ""}`,
    );
  }
  return 0;
}

async function write(ctx: CliContext, table: string, resource: KumaResource): Promise<string> {
  const old = await ctx.onTable(table, () =>
    ctx.doc.put({ TableName: table, Item: { ...resource.item }, ReturnValues: "ALL_OLD" }),
  );
  if (old === undefined) return "created";
  return canonical(old) === canonical(resource.item) ? "unchanged" : "configured";
}

/** JSON with keys sorted at every level, to compare two documents. */
function canonical(value: unknown): string {
  return JSON.stringify(value, (_key, inner: unknown) =>
    typeof inner === "object" && inner !== null && !Array.isArray(inner) && !(inner instanceof Set)
      ? Object.fromEntries(
          Object.entries(inner as Record<string, unknown>).sort(([a], [b]) => (a < b ? -1 : 1)),
        )
      : inner instanceof Set
        ? [...inner].sort()
        : inner,
  );
}

/** Why a resource may not be stored: the allocator's rules, its type, its mesh, its table. */
async function refusalsOf(
  ctx: CliContext,
  resource: KumaResource,
  all: readonly KumaResource[],
  only: ResourceType | undefined,
): Promise<Refusal[]> {
  if (only !== undefined && resource.type !== only) {
    return [{ field: "type", reason: `must be "${only}" here (vips apply takes any type)` }];
  }
  if (tableOf(ctx, resource.type) === undefined) {
    return [
      {
        field: "type",
        reason:
          "this deployment has no external-services table: set EXTERNAL_SERVICES_TABLE (the local runtime has it by default)",
      },
    ];
  }
  if (resource.type === "Mesh") {
    const refusal = meshNameRefusal(resource.name);
    return refusal === undefined ? [] : [refusal];
  }
  const mesh = resource.mesh as string;
  const refusals =
    resource.type === "Dataplane"
      ? dataplaneRefusals(mesh, resource.name, resource.item)
      : externalServiceRefusals(mesh, resource.name, resource.item);
  const inFile = all.some((other) => other.type === "Mesh" && other.name === mesh);
  if (!inFile && !(await meshExists(ctx, mesh))) {
    refusals.unshift({
      field: "mesh",
      reason: `mesh ${JSON.stringify(mesh)} does not exist: apply a Mesh named ${mesh} first, or in the same file (the allocator gives a missing mesh's dataplanes no VIP)`,
    });
  }
  return refusals;
}

/** Whether the mesh is in the meshes table (one strongly consistent read, cached per run). */
const known = new WeakMap<CliContext, Map<string, Promise<boolean>>>();
function meshExists(ctx: CliContext, mesh: string): Promise<boolean> {
  let cache = known.get(ctx);
  if (cache === undefined) {
    cache = new Map();
    known.set(ctx, cache);
  }
  let found = cache.get(mesh);
  if (found === undefined) {
    found = ctx
      .onTable(ctx.tables.meshes, () =>
        ctx.doc.get({ TableName: ctx.tables.meshes, Key: { name: mesh }, ConsistentRead: true }),
      )
      .then((item) => item !== undefined);
    cache.set(mesh, found);
  }
  return found;
}
