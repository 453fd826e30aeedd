import { parseAllDocuments } from "yaml";
import {
  type AdoptEntry,
  AdoptInputError,
  type AdoptNote,
  canonicalAddress,
  meshOfConfigName,
  type ParsedAdoptFile,
} from "../../functions/domain/adopt-entries.ts";
import { decodeKumaConfig, isTagFirst } from "../../functions/domain/kuma-config.ts";
import { isValidServiceName } from "../../functions/domain/service-set.ts";

/**
 * Reads the text of one file given to `vips adopt` (no I/O here: the caller reads the file).
 * Accepted, as YAML or JSON (YAML may hold several `---`-separated documents):
 *
 * - a Kuma Universal `Config` (`type: Config`, `name: kuma-<mesh>-dns-vips`, `config: '<json>'`);
 * - a Kubernetes `ConfigMap` (`metadata.name: kuma-<mesh>-dns-vips`, `data.config`);
 * - a list (`kubectl get configmap -o json`: `kind: List` or `ConfigMapList`, `items`): every
 *   item named `kuma-<mesh>-dns-vips` is read, other ConfigMaps are noted and left out;
 * - the bare content of `config` (any of the four shapes; the mesh comes from `--mesh`);
 * - a plain map `{ "<mesh>": { "<service>": "<vip>" } }` (what `vips export --format json` writes).
 *
 * `mesh` (the `--mesh` flag) names the mesh of a bare config; with a Config or ConfigMap it must
 * agree with the name. Throws {@link AdoptInputError} naming the file and the key.
 */
export function parseAdoptFile(text: string, source: string, mesh?: string): ParsedAdoptFile {
  const entries: AdoptEntry[] = [];
  const notes: AdoptNote[] = [];
  const documents = readDocuments(text, source);
  documents.forEach((value, index) => {
    const where = documents.length > 1 ? `${source} (document ${index + 1})` : source;
    const parsed = parseDocument(value, where, mesh);
    entries.push(...parsed.entries);
    notes.push(...parsed.notes);
  });
  return { entries, notes };
}

function isObject(value: unknown): value is Record<string, unknown> {
  return typeof value === "object" && value !== null && !Array.isArray(value);
}

/** JSON first (own properties for every key, `__proto__` included), else YAML documents. */
function readDocuments(text: string, source: string): unknown[] {
  const trimmed = text.trim();
  if (trimmed === "") throw new AdoptInputError(source, undefined, "the file is empty");
  if (trimmed.startsWith("{") || trimmed.startsWith("[")) {
    try {
      return [JSON.parse(trimmed)];
    } catch {
      // Flow-style YAML also starts with a brace: read below.
    }
  }
  const documents = parseAllDocuments(text);
  const list = Array.isArray(documents) ? documents : [documents];
  const values: unknown[] = [];
  list.forEach((document, index) => {
    const [error] = document.errors;
    if (error !== undefined) {
      const where = list.length > 1 ? `${source} (document ${index + 1})` : source;
      throw new AdoptInputError(
        where,
        undefined,
        `not valid YAML or JSON: ${error.message.split("\n")[0]}`,
      );
    }
    const value: unknown = document.toJS();
    if (value !== null && value !== undefined) values.push(value);
  });
  if (values.length === 0) throw new AdoptInputError(source, undefined, "the file is empty");
  return values;
}

function parseDocument(value: unknown, source: string, flagMesh: string | undefined) {
  if (!isObject(value)) {
    throw new AdoptInputError(
      source,
      undefined,
      "expected an object (a Config, a ConfigMap, a list or a VIP map)",
    );
  }
  if (value.kind === "List" || value.kind === "ConfigMapList") {
    return parseList(value, source, flagMesh);
  }
  if (value.kind === "ConfigMap") {
    const metadata = isObject(value.metadata) ? value.metadata : {};
    const data = isObject(value.data) ? value.data : {};
    return parseConfig(metadata.name, data.config, source, flagMesh, "data.config");
  }
  if (value.type === "Config") {
    return parseConfig(value.name, value.config, source, flagMesh, "config");
  }
  if (isPlainMap(value)) {
    if (flagMesh !== undefined) {
      throw new AdoptInputError(
        source,
        undefined,
        "--mesh applies to a Kuma VIP config; this file is a { mesh: { service: vip } } map that names its meshes",
      );
    }
    return parsePlainMap(value, source);
  }
  if (flagMesh === undefined) {
    throw new AdoptInputError(
      source,
      undefined,
      "a bare VIP config names no mesh: pass --mesh MESH (or give the Config or ConfigMap named kuma-<mesh>-dns-vips)",
    );
  }
  return decodeKumaConfig(value, flagMesh, source);
}

function parseList(value: Record<string, unknown>, source: string, flagMesh: string | undefined) {
  if (!Array.isArray(value.items)) {
    throw new AdoptInputError(source, "items", "a list needs an items array");
  }
  const entries: AdoptEntry[] = [];
  const notes: AdoptNote[] = [];
  value.items.forEach((item, index) => {
    const where = `${source} (items[${index}])`;
    const metadata = isObject(item) && isObject(item.metadata) ? item.metadata : {};
    const name = metadata.name;
    if (!isObject(item) || item.kind !== "ConfigMap" || typeof name !== "string") {
      notes.push({ source: where, note: "not a ConfigMap: left out" });
      return;
    }
    if (meshOfConfigName(name) === undefined) {
      notes.push({
        source: where,
        note: `ConfigMap ${name} is not a kuma-<mesh>-dns-vips: left out`,
      });
      return;
    }
    const data = isObject(item.data) ? item.data : {};
    const parsed = parseConfig(name, data.config, `${where} ${name}`, flagMesh, "data.config");
    entries.push(...parsed.entries);
    notes.push(...parsed.notes);
  });
  return { entries, notes };
}

/** A Config or ConfigMap: the mesh from its name (or --mesh, which must agree), then its config. */
function parseConfig(
  name: unknown,
  config: unknown,
  source: string,
  flagMesh: string | undefined,
  field: string,
) {
  const fromName = typeof name === "string" ? meshOfConfigName(name) : undefined;
  if (fromName !== undefined && flagMesh !== undefined && fromName !== flagMesh) {
    throw new AdoptInputError(
      source,
      undefined,
      `the config ${String(name)} is for mesh ${fromName}, not --mesh ${flagMesh}`,
    );
  }
  const mesh = fromName ?? flagMesh;
  if (mesh === undefined) {
    throw new AdoptInputError(
      source,
      undefined,
      `the name ${JSON.stringify(name ?? null)} is not kuma-<mesh>-dns-vips: pass --mesh MESH`,
    );
  }
  if (config === undefined || config === null || config === "") {
    return { entries: [], notes: [{ source, note: `mesh ${mesh}: no VIPs (empty ${field})` }] };
  }
  if (typeof config !== "string") {
    throw new AdoptInputError(source, field, "must be a string holding the VIP config's JSON");
  }
  let parsed: unknown;
  try {
    parsed = JSON.parse(config);
  } catch (error) {
    throw new AdoptInputError(
      source,
      field,
      `not valid JSON: ${error instanceof Error ? error.message : String(error)}`,
    );
  }
  return decodeKumaConfig(parsed, mesh, source);
}

/**
 * `{ mesh: { service: vip } }`: every value an object whose values are all strings, and not one
 * of Kuma's shapes (typed keys with `{address}` values, or the tag-first `{"v": {...: {oe}}}`).
 */
function isPlainMap(value: Record<string, unknown>): boolean {
  const meshes = Object.keys(value);
  if (meshes.length === 0 || isTagFirst(value)) return false;
  if (meshes.every((key) => /^\d:/.test(key))) return false;
  return meshes.every((mesh) => {
    const services = value[mesh];
    return isObject(services) && Object.values(services).every((vip) => typeof vip === "string");
  });
}

function parsePlainMap(value: Record<string, unknown>, source: string) {
  const entries: AdoptEntry[] = [];
  for (const mesh of Object.keys(value)) {
    const services = value[mesh] as Record<string, string>;
    for (const service of Object.keys(services)) {
      const key = `${mesh}.${service}`;
      if (!isValidServiceName(service)) {
        throw new AdoptInputError(
          source,
          key,
          `service name ${JSON.stringify(service)} is not 1 to 253 characters of [A-Za-z0-9.-_:]`,
        );
      }
      const vip = canonicalAddress(services[service] as string);
      if (vip === undefined) {
        throw new AdoptInputError(
          source,
          key,
          `${JSON.stringify(services[service])} is not an IP address`,
        );
      }
      entries.push({ source, key, mesh, kind: "service", name: service, vip });
    }
  }
  return { entries, notes: [] as AdoptNote[] };
}
