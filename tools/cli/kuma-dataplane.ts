import { parseAllDocuments } from "yaml";

/** A Kuma `Dataplane` as kumactl users write it; stored as-is, keyed by mesh and name. */
export interface DataplaneDocument {
  readonly type: "Dataplane";
  readonly mesh: string;
  readonly name: string;
  readonly networking: Record<string, unknown>;
  readonly [field: string]: unknown;
}

function isObject(value: unknown): value is Record<string, unknown> {
  return typeof value === "object" && value !== null && !Array.isArray(value);
}

/** A Kuma `ExternalService` as kumactl users write it; stored as-is, keyed by mesh and name. */
export interface ExternalServiceDocument {
  readonly type: "ExternalService";
  readonly mesh: string;
  readonly name: string;
  readonly networking: Record<string, unknown>;
  readonly [field: string]: unknown;
}

/**
 * Parses one or more `Dataplane` documents (YAML, `---`-separated, or JSON) and checks what
 * the table needs: `type: Dataplane`, a `mesh` and a `name` (the item's key), and a
 * `networking` object. The rest is left to the allocator, which tolerates bad shapes.
 * Throws an Error naming the source, the document and the field.
 */
export function parseDataplanes(text: string, source: string): DataplaneDocument[] {
  return parseResources(text, source, "Dataplane") as DataplaneDocument[];
}

/** As {@link parseDataplanes}, for `ExternalService` documents (the same checks). */
export function parseExternalServices(text: string, source: string): ExternalServiceDocument[] {
  return parseResources(text, source, "ExternalService") as ExternalServiceDocument[];
}

function parseResources(
  text: string,
  source: string,
  type: "Dataplane" | "ExternalService",
): Record<string, unknown>[] {
  const documents = parseAllDocuments(text);
  const list = Array.isArray(documents) ? documents : [documents];
  const resources: Record<string, unknown>[] = [];
  list.forEach((document, index) => {
    const where = list.length > 1 ? `${source} (document ${index + 1})` : source;
    const [error] = document.errors;
    if (error !== undefined) {
      throw new Error(`${where}: not valid YAML or JSON: ${error.message.split("\n")[0]}`);
    }
    const value: unknown = document.toJS();
    if (value === null || value === undefined) return; // an empty document, e.g. a trailing ---
    if (!isObject(value)) throw new Error(`${where}: expected a ${type} object`);
    if (value.type !== type) {
      throw new Error(
        `${where}: type must be "${type}", got ${value.type === undefined ? "nothing" : JSON.stringify(value.type)}`,
      );
    }
    for (const field of ["mesh", "name"] as const) {
      const fieldValue = value[field];
      if (typeof fieldValue !== "string" || fieldValue.trim() === "") {
        throw new Error(`${where}: ${field} is required (a non-empty string)`);
      }
    }
    if (!isObject(value.networking)) {
      throw new Error(
        `${where}: networking is required (an object with address${type === "Dataplane" ? " and inbound" : ""})`,
      );
    }
    resources.push(value);
  });
  if (resources.length === 0) throw new Error(`${source}: no ${type} in it`);
  return resources;
}
