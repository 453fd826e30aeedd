import { parseAllDocuments } from "yaml";

/** The Kuma resource types the input tables hold. */
export const RESOURCE_TYPES = ["Mesh", "Dataplane", "ExternalService"] as const;
export type ResourceType = (typeof RESOURCE_TYPES)[number];

/**
 * One Kuma resource of a file, in Kuma's universal format (what the input tables store, as
 * `kumactl get -o yaml` prints it on universal): `type`, `name`, `mesh` (not for a Mesh) and
 * the resource's own fields.
 */
export interface KumaResource {
  readonly type: ResourceType;
  readonly name: string;
  /** The mesh a Dataplane or ExternalService belongs to; undefined for a Mesh. */
  readonly mesh: string | undefined;
  /** The item to store: the universal document. */
  readonly item: Readonly<Record<string, unknown>>;
  /** Where it was found: `FILE`, `FILE (document 2)`, `FILE (document 1, item 3)`. */
  readonly where: string;
}

/** A Kuma `Dataplane` as kumactl users write it; stored as-is, keyed by mesh and name. */
export interface DataplaneDocument {
  readonly type: "Dataplane";
  readonly mesh: string;
  readonly name: string;
  readonly networking: Record<string, unknown>;
  readonly [field: string]: unknown;
}

/** A Kuma `ExternalService` as kumactl users write it; stored as-is, keyed by mesh and name. */
export interface ExternalServiceDocument {
  readonly type: "ExternalService";
  readonly mesh: string;
  readonly name: string;
  readonly networking: Record<string, unknown>;
  readonly [field: string]: unknown;
}

/** A document of a file that is not a resource the tables take: where, the field, the rule. */
export interface ParseProblem {
  readonly where: string;
  readonly field: string | undefined;
  readonly reason: string;
}

export interface ParsedFile {
  readonly resources: readonly KumaResource[];
  readonly problems: readonly ParseProblem[];
}

function isObject(value: unknown): value is Record<string, unknown> {
  return typeof value === "object" && value !== null && !Array.isArray(value);
}

const isType = (value: unknown): value is ResourceType =>
  typeof value === "string" && (RESOURCE_TYPES as readonly string[]).includes(value);

/** `Mesh Shop` -> "Mesh shop", `Dataplane default/web-1`: what a message calls a resource. */
export function describeResource(resource: {
  readonly type: string;
  readonly mesh?: string | undefined;
  readonly name: string;
}): string {
  return `${resource.type} ${resource.mesh === undefined ? "" : `${resource.mesh}/`}${resource.name}`;
}

/**
 * Reads Kuma resources from YAML or JSON text: one or many documents (`---`), each a resource in
 * Kuma's universal format (`type: Dataplane`, `mesh`, `name`, ...), a Kubernetes object of
 * Kuma's CRDs (`apiVersion: kuma.io/v1alpha1`, `kind: Dataplane`, `mesh`, `metadata`, `spec`),
 * or a `kubectl get -o yaml` list of them (`kind: List` or `DataplaneList`, `items`). A
 * Kubernetes object becomes the universal document Kuma's API shows for it: a Mesh is named
 * `metadata.name`, a namespaced resource `<metadata.name>.<metadata.namespace>`.
 *
 * Never throws: every document that is not a resource the tables take is a problem naming
 * where it is, the field and the rule; the caller refuses the whole file if there is any.
 */
export function parseKumaResources(text: string, source: string): ParsedFile {
  const resources: KumaResource[] = [];
  const problems: ParseProblem[] = [];
  const documents = parseAllDocuments(text);
  const list = Array.isArray(documents) ? documents : [documents];
  const nonEmpty = list.filter((document) => document.contents !== null);
  list.forEach((document, index) => {
    const where = nonEmpty.length > 1 ? `${source} (document ${index + 1})` : source;
    const [error] = document.errors;
    if (error !== undefined) {
      const reason = `not valid YAML or JSON: ${error.message.split("\n")[0]}`;
      problems.push({ where, field: undefined, reason });
      return;
    }
    const value: unknown = document.toJS();
    if (value === null || value === undefined) return; // an empty document, e.g. a trailing ---
    if (isObject(value) && typeof value.kind === "string" && value.kind.endsWith("List")) {
      if (!Array.isArray(value.items)) {
        problems.push({ where, field: "items", reason: `a ${value.kind} needs a list of items` });
        return;
      }
      value.items.forEach((entry, at) => {
        const document = nonEmpty.length > 1 ? `document ${index + 1}, ` : "";
        read(entry, `${source} (${document}item ${at + 1})`);
      });
      return;
    }
    read(value, where);
  });
  if (resources.length === 0 && problems.length === 0) {
    problems.push({ where: source, field: undefined, reason: "no resource in it" });
  }
  return { resources, problems };

  function read(value: unknown, where: string): void {
    const problem = (field: string | undefined, reason: string) =>
      problems.push({ where, field, reason });
    if (!isObject(value)) {
      problem(undefined, `expected a Kuma resource (${RESOURCE_TYPES.join(", ")})`);
      return;
    }
    const kubernetes = value.type === undefined && typeof value.kind === "string";
    const type = kubernetes ? value.kind : value.type;
    if (!isType(type)) {
      const field = kubernetes ? "kind" : "type";
      const got = type === undefined ? "nothing" : JSON.stringify(type);
      problem(field, `must be ${RESOURCE_TYPES.map((t) => `"${t}"`).join(", ")}, got ${got}`);
      return;
    }
    const item = kubernetes ? universalForm(value, type, problem) : value;
    if (item === undefined) return;
    for (const field of type === "Mesh" ? ["name"] : ["mesh", "name"]) {
      const text = item[field];
      if (typeof text !== "string" || text.trim() === "") {
        problem(
          kubernetes && field === "name" ? "metadata.name" : field,
          "required (a non-empty string)",
        );
        return;
      }
    }
    if (type !== "Mesh" && !isObject(item.networking)) {
      problem(
        kubernetes ? "spec.networking" : "networking",
        `required (an object with address${type === "Dataplane" ? " and inbound" : ""})`,
      );
      return;
    }
    resources.push({
      type,
      name: item.name as string,
      mesh: type === "Mesh" ? undefined : (item.mesh as string),
      item,
      where,
    });
  }
}

/** A Kubernetes object of Kuma's CRDs as the universal document; undefined after a problem. */
function universalForm(
  value: Record<string, unknown>,
  type: ResourceType,
  problem: (field: string | undefined, reason: string) => void,
): Record<string, unknown> | undefined {
  const metadata = value.metadata;
  if (!isObject(metadata) || typeof metadata.name !== "string" || metadata.name === "") {
    problem("metadata.name", "required (a non-empty string)");
    return undefined;
  }
  const spec = value.spec ?? {};
  if (!isObject(spec)) {
    problem("spec", "not a map");
    return undefined;
  }
  const namespace = typeof metadata.namespace === "string" ? metadata.namespace : "";
  const name =
    type === "Mesh" || namespace === "" ? metadata.name : `${metadata.name}.${namespace}`;
  // Kuma puts a resource without `mesh` in the mesh `default`.
  const mesh = typeof value.mesh === "string" ? value.mesh : "default";
  const fields = Object.entries(spec).filter(
    ([field]) => !["type", "name", "mesh"].includes(field),
  );
  return Object.fromEntries([
    ["type", type],
    ["name", name],
    ...(type === "Mesh" ? [] : [["mesh", mesh]]),
    ...fields,
  ]);
}
