/**
 * Admission: what the operator's CLI refuses before it writes a resource to an input table
 * (`vips apply`, and the older put commands). The rules are the allocator's own: a dataplane is
 * read by {@link readDataplane} in admission mode and an external service by
 * {@link readExternalService}, so whatever the allocator would skip (with or without a log line)
 * is refused at the door, naming the field and the rule, instead of being stored and ignored.
 *
 * The mesh name rule is the only rule here of its own: the allocator serves any non-empty mesh
 * name it finds, but a mesh created through the CLI must be one Kuma could export as the
 * Kubernetes object `kuma-<mesh>-dns-vips` (decision 142). Pure: no I/O.
 */
import { readExternalService } from "./external-service.ts";
import { readDataplane } from "./service-set.ts";

/** The longest mesh name whose `kuma-<mesh>-dns-vips` is still a Kubernetes object name (253). */
export const MAX_MESH_NAME = 253 - "kuma--dns-vips".length;

export const MESH_NAME_RULE = `1-${MAX_MESH_NAME} of [a-z0-9.-], starting and ending with a letter or digit (a Kubernetes object name, as kuma-<mesh>-dns-vips must be)`;

const MESH_NAME = /^[a-z0-9](?:[a-z0-9.-]*[a-z0-9])?$/;

/** One reason a resource is refused: the field at fault and the rule it breaks. */
export interface Refusal {
  readonly field: string;
  readonly reason: string;
}

/** Whether `name` may name a mesh created through the CLI. */
export function isValidMeshName(name: string): boolean {
  return name.length <= MAX_MESH_NAME && MESH_NAME.test(name);
}

/** Why `name` may not name a new mesh, or undefined when it may. */
export function meshNameRefusal(name: string, field = "name"): Refusal | undefined {
  if (isValidMeshName(name)) return undefined;
  return {
    field,
    reason: `invalid mesh name ${JSON.stringify(name.slice(0, 300))}: expected ${MESH_NAME_RULE}`,
  };
}

/** What the allocator would skip of a dataplane item (`item`: the whole document). */
export function dataplaneRefusals(mesh: string, name: string, item: unknown): Refusal[] {
  return readDataplane({ mesh, name, item }, { admission: true }).issues.map(refusal);
}

/** What the allocator would skip of an external service item (`item`: the whole document). */
export function externalServiceRefusals(mesh: string, name: string, item: unknown): Refusal[] {
  return readExternalService({ mesh, name, kind: "external-service", item }).issues.map(refusal);
}

const refusal = (issue: { readonly field: string; readonly reason: string }): Refusal => ({
  field: issue.field,
  reason: issue.reason,
});
