import type { InputIssue } from "./errors.ts";
import type { DataplaneRecord } from "./types.ts";

export const SERVICE_TAG = "kuma.io/service";
/** Kuma's `TCPPortReserved`: the inbound of a pod that exposes no service. */
export const SERVICELESS_PORT = 49151;
/** Kuma's tag-value character set; a service name is 1..253 of these. */
const SERVICE_NAME = /^[A-Za-z0-9.\-_:]{1,253}$/;
/** A tag map larger than this is bad input (Kuma's largest real maps have a few dozen tags). */
export const MAX_TAGS = 256;

export const DATAPLANES = "dataplanes";

export function isValidServiceName(value: unknown): value is string {
  return typeof value === "string" && SERVICE_NAME.test(value);
}

function isRecord(value: unknown): value is Record<string, unknown> {
  return typeof value === "object" && value !== null && !Array.isArray(value);
}

/** How strictly a dataplane is read. */
export interface ReadOptions {
  /**
   * Admission (`vips apply` and the put commands): what the allocator would skip without a word
   * is an issue too: an inbound that names no service (not ignored, not Kuma's serviceless
   * port), and a dataplane with no inbound that is neither a gateway nor an ingress.
   */
  readonly admission?: boolean;
}

/** What one dataplane item gives to the service sets of meshes. */
export interface DataplaneContribution {
  /** mesh -> services this dataplane adds to that mesh's set */
  readonly services: ReadonlyMap<string, ReadonlySet<string>>;
  readonly isIngress: boolean;
  /** Skipped pieces of bad input, one per skip, each naming the field and reason. */
  readonly issues: readonly InputIssue[];
}

/**
 * Reads one dataplane item the way docs/contract.md ("The service set of a mesh") defines it.
 *
 * Bad input is contained to the smallest part: an inbound or available service with a bad
 * service tag is skipped and the rest still counts; a dataplane whose `networking`, `inbound`
 * or `ingress` has the wrong shape contributes nothing. Never throws.
 */
export function readDataplane(
  record: DataplaneRecord,
  options: ReadOptions = {},
): DataplaneContribution {
  const admission = options.admission === true;
  const issues: InputIssue[] = [];
  const services = new Map<string, Set<string>>();
  const key = { mesh: record.mesh, name: record.name };
  const issue = (field: string, reason: string): void => {
    issues.push({ table: DATAPLANES, key, field, reason });
  };
  const add = (mesh: string, service: string): void => {
    let set = services.get(mesh);
    if (set === undefined) {
      set = new Set();
      services.set(mesh, set);
    }
    set.add(service);
  };
  const nothing = (): DataplaneContribution => ({ services: new Map(), isIngress: false, issues });

  const item = record.item;
  if (!isRecord(item)) {
    issue("(item)", "not a map");
    return nothing();
  }
  const networking = item.networking;
  if (!isRecord(networking)) {
    issue("networking", networking === undefined ? "missing" : "not a map");
    return nothing();
  }

  /** Validates a tag map and returns its service, or undefined (logging why when it is bad). */
  const serviceOf = (
    tags: unknown,
    field: string,
    required: boolean,
    missing = "missing",
  ): string | undefined => {
    if (tags === undefined) {
      if (required) issue(field, missing);
      return undefined;
    }
    if (!isRecord(tags)) {
      issue(field, "not a map");
      return undefined;
    }
    const size = Object.keys(tags).length;
    if (size > MAX_TAGS) {
      issue(field, `oversized tag map: ${size} tags, at most ${MAX_TAGS}`);
      return undefined;
    }
    const service = tags[SERVICE_TAG];
    if (service === undefined) {
      if (required) issue(`${field}.${SERVICE_TAG}`, missing);
      return undefined;
    }
    if (!isValidServiceName(service)) {
      issue(
        `${field}.${SERVICE_TAG}`,
        typeof service === "string"
          ? `invalid service name ${JSON.stringify(service.slice(0, 300))}: expected 1-253 of [A-Za-z0-9.-_:]`
          : `not a string (${Array.isArray(service) ? "list" : typeof service})`,
      );
      return undefined;
    }
    return service;
  };

  if (networking.ingress !== undefined) {
    const ingress = networking.ingress;
    if (!isRecord(ingress)) {
      issue("networking.ingress", "not a map");
      return nothing();
    }
    const available = ingress.availableServices ?? [];
    if (!Array.isArray(available)) {
      issue("networking.ingress.availableServices", "not a list");
      return nothing();
    }
    available.forEach((entry, index) => {
      const field = `networking.ingress.availableServices[${index}]`;
      if (!isRecord(entry)) {
        issue(field, "not a map");
        return;
      }
      if (typeof entry.mesh !== "string" || entry.mesh === "") {
        issue(`${field}.mesh`, entry.mesh === undefined ? "missing" : "not a non-empty string");
        return;
      }
      const service = serviceOf(entry.tags, `${field}.tags`, true);
      if (service !== undefined) add(entry.mesh, service);
    });
    return { services, isIngress: true, issues };
  }

  const inbound = networking.inbound ?? [];
  if (!Array.isArray(inbound)) {
    issue("networking.inbound", "not a list");
    return nothing();
  }
  if (admission && inbound.length === 0 && networking.gateway === undefined) {
    issue(
      "networking.inbound",
      "missing: a dataplane that is neither a gateway nor an ingress needs an inbound with a kuma.io/service tag",
    );
  }
  inbound.forEach((entry, index) => {
    const field = `networking.inbound[${index}]`;
    if (!isRecord(entry)) {
      issue(field, "not a map");
      return;
    }
    if (entry.state === "Ignored") return;
    if (entry.port === SERVICELESS_PORT) return;
    const service = serviceOf(
      entry.tags,
      `${field}.tags`,
      admission,
      "missing: an inbound without a kuma.io/service tag gives no service (the allocator skips it)",
    );
    if (service !== undefined) add(record.mesh, service);
  });
  return { services, isIngress: false, issues };
}

/**
 * The service set of `mesh`: inbound services of its own non-ingress dataplanes plus the
 * services that ingresses stored under any mesh advertise for it. Sorted, deduplicated.
 */
export function deriveServiceSet(
  mesh: string,
  dataplanes: readonly DataplaneRecord[],
  ingresses: readonly DataplaneRecord[],
): { services: string[]; issues: InputIssue[] } {
  const found = new Set<string>();
  const issues: InputIssue[] = [];
  const seen = new Set<string>();
  for (const record of [...dataplanes, ...ingresses]) {
    const id = `${record.mesh}\u0000${record.name}`;
    if (seen.has(id)) continue; // an ingress stored under this mesh is in both lists
    seen.add(id);
    const contribution = readDataplane(record);
    const ownDataplane = record.mesh === mesh;
    if (contribution.isIngress || ownDataplane) {
      // Issues of an ingress are reported once per mesh pass that reads it; that is fine:
      // the skip happens in every such pass.
      issues.push(...contribution.issues);
    }
    if (!contribution.isIngress && !ownDataplane) continue;
    for (const service of contribution.services.get(mesh) ?? []) found.add(service);
  }
  return { services: [...found].sort(compareServices), issues };
}

/** Code-unit order, the same everywhere (Kuma sorted service names the same way). */
export function compareServices(a: string, b: string): number {
  return a < b ? -1 : a > b ? 1 : 0;
}

/**
 * The meshes a dataplane stream image touches: the mesh it is stored under and, for an
 * ingress, every mesh its available services name. Tolerates any shape.
 */
export function meshesTouchedBy(image: unknown): string[] {
  if (!isRecord(image)) return [];
  const meshes = new Set<string>();
  if (typeof image.mesh === "string" && image.mesh !== "") meshes.add(image.mesh);
  const networking = image.networking;
  if (isRecord(networking) && isRecord(networking.ingress)) {
    const available = networking.ingress.availableServices;
    if (Array.isArray(available)) {
      for (const entry of available) {
        if (isRecord(entry) && typeof entry.mesh === "string" && entry.mesh !== "") {
          meshes.add(entry.mesh);
        }
      }
    }
  }
  return [...meshes];
}
