/**
 * Host entries: the host of an external service's `networking.address` gets a VIP of its own,
 * shared by every external service of the mesh on that host (Kuma's Host entries).
 *
 * Inside the allocator a host is one more name in the mesh's set, under a name of its own
 * namespace: `host/<host>`. A service name never holds `/` (Kuma's tag-value characters are
 * `A-Za-z0-9.-_:`), so `host/api.example.com` can never be the service `api.example.com` or any
 * other: the same claims, memberships, quarantine and invariants apply to both, and a host never
 * collides with a service of the same spelling. The public VIP item lists hosts apart, under
 * their own name (`hosts`, `unallocatedHosts`; see store/vip-item-codec.ts).
 */
import ipaddr from "ipaddr.js";
import { emptyRecord } from "./records.ts";

export const HOST_PREFIX = "host/";

/** A DNS name: labels of letters, digits, `-` and `_`, 1-63 each, 253 in all. */
const LABEL = /^[a-z0-9_](?:[a-z0-9_-]{0,61}[a-z0-9_])?$/;

/** The name a host has in the allocator's sets, claims and index. */
export function hostEntry(host: string): string {
  return `${HOST_PREFIX}${host}`;
}

export function isHostEntry(name: string): boolean {
  return name.startsWith(HOST_PREFIX);
}

/** The host a host entry names. */
export function hostOfEntry(name: string): string {
  return name.slice(HOST_PREFIX.length);
}

/** Whether `host` (lower case, no trailing dot) is a DNS name the allocator gives a VIP. */
export function isHostName(host: string): boolean {
  if (host.length === 0 || host.length > 253) return false;
  return host.split(".").every((label) => LABEL.test(label));
}

/** Whether `host` is an IP literal (IPv4 dotted decimal, or IPv6 without brackets). */
export function isIpLiteral(host: string): boolean {
  return ipaddr.isValid(host) && (host.includes(":") || ipaddr.IPv4.isValidFourPartDecimal(host));
}

/** A name -> VIP record split into services and hosts (host names without their prefix). */
export function splitHosts(entries: Readonly<Record<string, string>>): {
  services: Record<string, string>;
  hosts: Record<string, string>;
} {
  const services = emptyRecord<string>();
  const hosts = emptyRecord<string>();
  for (const [name, value] of Object.entries(entries)) {
    if (isHostEntry(name)) hosts[hostOfEntry(name)] = value;
    else services[name] = value;
  }
  return { services, hosts };
}

/** The inverse of {@link splitHosts}: services and hosts as one record of the allocator's names. */
export function joinHosts(
  services: Readonly<Record<string, string>>,
  hosts: Readonly<Record<string, string>>,
): Record<string, string> {
  const out = emptyRecord<string>();
  for (const [name, value] of Object.entries(services)) out[name] = value;
  for (const [host, value] of Object.entries(hosts)) out[hostEntry(host)] = value;
  return out;
}
