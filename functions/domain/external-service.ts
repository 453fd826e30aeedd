/**
 * Kuma's ExternalService, as the allocator reads it (docs/contract.md, "External services"):
 *
 * `{ type: "ExternalService", mesh, name, networking: { address: "host:port", tls?: {...},
 *   disableHostDNSEntry?: boolean }, tags: { "kuma.io/service": ..., ... } }`
 *
 * An external service puts its `kuma.io/service` in its own mesh's set and, unless it opts out
 * or its host is an IP literal, its host (as the host entry `host/<host>`, domain/hosts.ts).
 */
import type { InputIssue } from "./errors.ts";
import { hostEntry, isHostName, isIpLiteral } from "./hosts.ts";
import { isValidServiceName, MAX_TAGS, SERVICE_TAG } from "./service-set.ts";
import type { DataplaneRecord } from "./types.ts";

export const EXTERNAL_SERVICES = "external-services";
export const EXTERNAL_SERVICE_TYPE = "ExternalService";

function isRecord(value: unknown): value is Record<string, unknown> {
  return typeof value === "object" && value !== null && !Array.isArray(value);
}

/** `host:port` or `[ipv6]:port` -> its host (lower case, no trailing dot), or why not. */
export function parseAddress(address: string): { host: string } | { reason: string } {
  const bad = (why: string) => ({
    reason: `${why} in ${JSON.stringify(address.slice(0, 300))}: expected "host:port"`,
  });
  let host: string;
  let port: string;
  if (address.startsWith("[")) {
    const end = address.indexOf("]:");
    if (end < 0) return bad("no port after the bracketed IPv6 address");
    host = address.slice(1, end);
    port = address.slice(end + 2);
    if (!isIpLiteral(host) || !host.includes(":")) return bad("not an IPv6 address in brackets");
  } else {
    const colon = address.lastIndexOf(":");
    if (colon < 0) return bad("no port");
    host = address.slice(0, colon);
    port = address.slice(colon + 1);
    if (host.includes(":")) return bad("an IPv6 address needs brackets");
  }
  if (!/^\d{1,5}$/.test(port) || Number(port) < 1 || Number(port) > 65535) {
    return bad("the port is not 1-65535");
  }
  host = host.toLowerCase().replace(/\.$/, "");
  if (!isIpLiteral(host) && !isHostName(host)) return bad("the host is not a DNS name or an IP");
  return { host };
}

/** What one external service item gives to its mesh's set. */
export interface ExternalServiceContribution {
  /** mesh -> names it adds (its service and its host entry), as a dataplane's are read. */
  readonly services: ReadonlyMap<string, ReadonlySet<string>>;
  readonly issues: readonly InputIssue[];
}

/**
 * Reads one external service item. Never throws. A bad `type`, `networking`, address, tag map
 * or service tag: it contributes nothing (Kuma refuses such a resource). A `tls` that is not
 * a map is reported and changes nothing else; a `disableHostDNSEntry` that is not a boolean is
 * reported and the host gets no entry.
 */
export function readExternalService(record: DataplaneRecord): ExternalServiceContribution {
  const issues: InputIssue[] = [];
  const key = { mesh: record.mesh, name: record.name };
  const issue = (field: string, reason: string): void => {
    issues.push({ table: EXTERNAL_SERVICES, key, field, reason });
  };
  const nothing = (): ExternalServiceContribution => ({ services: new Map(), issues });
  const item = record.item;
  if (!isRecord(item)) {
    issue("(item)", "not a map");
    return nothing();
  }
  if (item.type !== undefined && item.type !== EXTERNAL_SERVICE_TYPE) {
    issue("type", `expected ${JSON.stringify(EXTERNAL_SERVICE_TYPE)} or none`);
    return nothing();
  }
  const networking = item.networking;
  if (!isRecord(networking)) {
    issue("networking", networking === undefined ? "missing" : "not a map");
    return nothing();
  }
  const address = networking.address;
  if (typeof address !== "string") {
    issue("networking.address", address === undefined ? "missing" : "not a string");
    return nothing();
  }
  const parsed = parseAddress(address);
  if ("reason" in parsed) {
    issue("networking.address", parsed.reason);
    return nothing();
  }
  const tags = item.tags;
  if (!isRecord(tags)) {
    issue("tags", tags === undefined ? "missing" : "not a map");
    return nothing();
  }
  const size = Object.keys(tags).length;
  if (size > MAX_TAGS) {
    issue("tags", `oversized tag map: ${size} tags, at most ${MAX_TAGS}`);
    return nothing();
  }
  const service = tags[SERVICE_TAG];
  if (!isValidServiceName(service)) {
    issue(
      `tags.${SERVICE_TAG}`,
      service === undefined
        ? "missing"
        : typeof service === "string"
          ? `invalid service name ${JSON.stringify(service.slice(0, 300))}: expected 1-253 of [A-Za-z0-9.-_:]`
          : `not a string (${Array.isArray(service) ? "list" : typeof service})`,
    );
    return nothing();
  }
  if (networking.tls !== undefined && !isRecord(networking.tls)) {
    issue("networking.tls", "not a map");
  }
  const names = new Set<string>([service]);
  const optOut = networking.disableHostDNSEntry;
  if (optOut !== undefined && typeof optOut !== "boolean") {
    issue("networking.disableHostDNSEntry", "not a boolean (the host gets no entry)");
  } else if (optOut !== true && !isIpLiteral(parsed.host)) {
    names.add(hostEntry(parsed.host));
  }
  return { services: new Map([[record.mesh, names]]), issues };
}

/** The names the external services of `mesh` put in its set (the full recompute's part). */
export function externalServiceSet(
  mesh: string,
  records: readonly DataplaneRecord[],
): { names: Set<string>; issues: InputIssue[] } {
  const names = new Set<string>();
  const issues: InputIssue[] = [];
  for (const record of records) {
    if (record.mesh !== mesh) continue;
    const read = readExternalService(record);
    issues.push(...read.issues);
    for (const name of read.services.get(mesh) ?? []) names.add(name);
  }
  return { names, issues };
}
