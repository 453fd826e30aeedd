import ipaddr from "ipaddr.js";

/**
 * What `vips adopt` reads from a file: one entry per name -> address assignment, with where it
 * was found (file and key) so every report and every error can name it.
 *
 * Kuma's entry types: 0 service, 1 host (an ExternalService's host, or a Kubernetes ClusterIP
 * or headless-pod address), 2 FQDN (a VirtualOutbound or a MeshGateway hostname). Services are
 * adopted, and so are the hosts of external services (as `host/<host>`, the name the allocator
 * gives hosts); Kubernetes hosts and FQDNs are reported as not adopted.
 */
export type EntryKind = "service" | "host" | "fqdn";

export interface AdoptEntry {
  /** The file (and, inside it, the document or list item) the entry came from. */
  readonly source: string;
  /** The key of the entry in its config (`0:backend`, `v.backend.oe[0].ap[1]`, `mesh.service`). */
  readonly key: string;
  readonly mesh: string;
  readonly kind: EntryKind;
  /** The service (or host, or FQDN) name. */
  readonly name: string;
  /** The address as written in the file (canonical form: {@link canonicalAddress}). */
  readonly vip: string;
  /** Kuma's origin of the entry when the file says (`kubernetes`, `external-service:x`, ...). */
  readonly origin?: string;
}

/** A part of a file that holds no entry to adopt, and why (e.g. another ConfigMap of a list). */
export interface AdoptNote {
  readonly source: string;
  readonly key?: string;
  readonly note: string;
}

export interface ParsedAdoptFile {
  readonly entries: readonly AdoptEntry[];
  readonly notes: readonly AdoptNote[];
}

/** A malformed file or entry: names the file and the key; nothing is written. */
export class AdoptInputError extends Error {
  constructor(
    readonly source: string,
    readonly key: string | undefined,
    readonly reason: string,
  ) {
    super(`${source}${key === undefined ? "" : `: key ${JSON.stringify(key)}`}: ${reason}`);
    this.name = "AdoptInputError";
  }
}

/**
 * The canonical text of an IP address written plainly (dotted-decimal IPv4 without leading
 * zeros, or IPv6 without a zone id), or undefined when it is not one.
 */
export function canonicalAddress(text: string): string | undefined {
  if (ipaddr.IPv4.isValidFourPartDecimal(text)) {
    if (/(^|\.)0\d/.test(text)) return undefined;
    return ipaddr.IPv4.parse(text).toString();
  }
  if (text.includes(":") && !text.includes("%") && ipaddr.IPv6.isValid(text)) {
    return ipaddr.IPv6.parse(text).toString();
  }
  return undefined;
}

/** Orders addresses numerically (IPv4 before IPv6); both must be canonical addresses. */
export function compareAddresses(a: string, b: string): number {
  const x = ipaddr.parse(a).toByteArray();
  const y = ipaddr.parse(b).toByteArray();
  if (x.length !== y.length) return x.length - y.length;
  for (let i = 0; i < x.length; i++) {
    const d = (x[i] as number) - (y[i] as number);
    if (d !== 0) return d;
  }
  return 0;
}

/** Kuma's resource name of a mesh's VIPs: `kuma-<mesh>-dns-vips`. */
export const configName = (mesh: string): string => `kuma-${mesh}-dns-vips`;

/** The mesh a Config/ConfigMap name is for, or undefined when it is not a VIP config's name. */
export function meshOfConfigName(name: string): string | undefined {
  const match = /^kuma-(.+)-dns-vips$/.exec(name);
  return match?.[1];
}
