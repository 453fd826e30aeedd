import {
  type AdoptEntry,
  AdoptInputError,
  type AdoptNote,
  canonicalAddress,
  type EntryKind,
} from "./adopt-entries.ts";
import { isValidServiceName } from "./service-set.ts";

/**
 * Decodes the content of one Kuma `kuma-<mesh>-dns-vips` config (the JSON in a Config's
 * `config` field, or a ConfigMap's `data.config`), in any of the four shapes Kuma wrote:
 *
 * - origin (2020): a flat map, `{"backend":"240.0.0.1"}`;
 * - typed keys (2021): `{"0:backend":"240.0.0.1","1:kuma.io":"240.0.1.4"}` (0 service, 1 host,
 *   2 FQDN);
 * - default (2021 onwards): `{"0:backend":{"address":"240.0.0.1","outbounds":[...]}}`;
 * - tag-first (opt-in, 2023): `{"v":{"backend":{"oe":[{"t":{},"ap":[{"a":"240.0.0.1","o":"svc"}]}]}}}`.
 *
 * Pure: takes the parsed JSON value. Names are data: keys are read with Object.keys of what
 * JSON.parse built (own properties), so `__proto__` and `constructor` are ordinary services.
 */
export function decodeKumaConfig(
  value: unknown,
  mesh: string,
  source: string,
): { entries: AdoptEntry[]; notes: AdoptNote[] } {
  const out = { entries: [] as AdoptEntry[], notes: [] as AdoptNote[] };
  if (!isObject(value)) {
    throw new AdoptInputError(source, undefined, "the VIP config is not a JSON object");
  }
  if (isTagFirst(value)) {
    decodeTagFirst(value.v as Record<string, unknown>, mesh, source, out);
    return out;
  }
  for (const key of Object.keys(value)) {
    const { kind, name } = splitKey(key, source);
    const raw = value[key];
    let address: unknown = raw;
    let origin: string | undefined;
    if (isObject(raw)) {
      // The default shape: {"address": ..., "outbounds": [{"Port", "TagSet", "Origin"}]}.
      address = raw.address;
      const first = Array.isArray(raw.outbounds) ? raw.outbounds[0] : undefined;
      if (isObject(first) && typeof first.Origin === "string" && first.Origin !== "") {
        origin = first.Origin;
      }
      if (address === undefined || address === "") {
        // Kuma persists an entry it could not allocate without an address (range exhausted).
        out.notes.push({ source, key, note: "no address (Kuma could not allocate one)" });
        continue;
      }
    }
    if (typeof address !== "string") {
      throw new AdoptInputError(source, key, "the value must be an address or {address, ...}");
    }
    out.entries.push(entry(source, key, mesh, kind, name, address, origin));
  }
  return out;
}

function isObject(value: unknown): value is Record<string, unknown> {
  return typeof value === "object" && value !== null && !Array.isArray(value);
}

/** `{"v": {...}}` whose services are `{"oe": [...]}`: the tag-first shape. */
export function isTagFirst(value: Record<string, unknown>): boolean {
  const keys = Object.keys(value);
  if (keys.length !== 1 || keys[0] !== "v" || !isObject(value.v)) return false;
  const services = Object.values(value.v);
  return services.every((service) => isObject(service) && Object.hasOwn(service, "oe"));
}

const TYPES: Record<string, EntryKind> = { "0": "service", "1": "host", "2": "fqdn" };

/** `0:backend` -> service backend; a key without a type digit is a service (origin shape). */
function splitKey(key: string, source: string): { kind: EntryKind; name: string } {
  const typed = /^(\d):(.*)$/s.exec(key);
  if (typed === null) return { kind: "service", name: key };
  const kind = Object.hasOwn(TYPES, typed[1] as string) ? TYPES[typed[1] as string] : undefined;
  if (kind === undefined) {
    throw new AdoptInputError(
      source,
      key,
      `unknown entry type ${typed[1]} (0 service, 1 host, 2 FQDN)`,
    );
  }
  return { kind, name: typed[2] as string };
}

/**
 * One entry, checked: a service needs a valid service name and a plain IP address; a host or
 * FQDN entry is only reported, so it is taken as written (Kuma wrote `1:` keys with an empty
 * host for ExternalName services, kumahq/kuma #8168).
 */
function entry(
  source: string,
  key: string,
  mesh: string,
  kind: EntryKind,
  name: string,
  address: string,
  origin: string | undefined,
): AdoptEntry {
  if (kind === "service") {
    if (!isValidServiceName(name)) {
      throw new AdoptInputError(
        source,
        key,
        `service name ${JSON.stringify(name)} is not 1 to 253 characters of [A-Za-z0-9.-_:]`,
      );
    }
    const vip = canonicalAddress(address);
    if (vip === undefined) {
      throw new AdoptInputError(source, key, `${JSON.stringify(address)} is not an IP address`);
    }
    return { source, key, mesh, kind, name, vip, ...(origin !== undefined ? { origin } : {}) };
  }
  const vip = canonicalAddress(address) ?? address;
  return { source, key, mesh, kind, name, vip, ...(origin !== undefined ? { origin } : {}) };
}

/** Kuma's minified origins: `svc` service, `k8s` kubernetes; the rest as written. */
function kindOfOrigin(origin: string): EntryKind {
  if (origin === "svc" || origin === "" || origin === "service") return "service";
  if (origin === "k8s" || origin === "kubernetes" || origin.startsWith("external-service:")) {
    return "host";
  }
  if (origin.startsWith("virtual-outbound:") || origin.startsWith("mesh-gateway:")) return "fqdn";
  return "service";
}

function decodeTagFirst(
  perService: Record<string, unknown>,
  mesh: string,
  source: string,
  out: { entries: AdoptEntry[]; notes: AdoptNote[] },
): void {
  for (const service of Object.keys(perService)) {
    const outbounds = (perService[service] as Record<string, unknown>).oe;
    const base = `v.${service}.oe`;
    if (!Array.isArray(outbounds)) {
      throw new AdoptInputError(source, base, "oe must be a list of outbounds");
    }
    outbounds.forEach((outbound, i) => {
      const ap = isObject(outbound) ? outbound.ap : undefined;
      if (!Array.isArray(ap)) {
        throw new AdoptInputError(source, `${base}[${i}].ap`, "ap must be a list of addresses");
      }
      ap.forEach((item, j) => {
        const key = `${base}[${i}].ap[${j}]`;
        if (!isObject(item) || typeof item.a !== "string" || item.a === "") {
          throw new AdoptInputError(source, key, "an address entry needs a (string)");
        }
        const origin = typeof item.o === "string" ? item.o : "";
        const kind = kindOfOrigin(origin);
        // Host and FQDN entries are named by their domain (else their address), as Kuma does.
        const name = kind === "service" ? service : typeof item.d === "string" ? item.d : item.a;
        out.entries.push(
          entry(source, key, mesh, kind, name, item.a, origin === "" ? undefined : origin),
        );
      });
    });
  }
}
