/**
 * The VIP item's test vectors (test-vectors/): items in DynamoDB JSON, written by the project's
 * own encoder (`encodeVipItem`), each with the decoded result every reader must produce.
 * `npm run vectors` writes them; test/unit/vectors.test.ts checks that the committed files are
 * what this produces now and that our readers decode each to its expected result. For other
 * languages: docs/vectors.md.
 */
import { mkdirSync, readdirSync, rmSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import type { AttributeValue } from "@aws-sdk/client-dynamodb";
import { hostEntry, hostOfEntry, isHostEntry, splitHosts } from "../functions/domain/hosts.ts";
import type { VipItem } from "../functions/domain/types.ts";
import { toAttributeMap } from "../functions/store/attribute-values.ts";
import { encodeVipItem } from "../functions/store/vip-item-codec.ts";

export const VECTORS_DIR = fileURLToPath(new URL("../test-vectors", import.meta.url));

/** What a reader must decode a vector's item to (absent maps and lists as empty ones). */
export interface ExpectedView {
  readonly mesh: string;
  readonly version: number;
  readonly incarnation: string;
  readonly cidr: string;
  readonly updatedAt: string;
  readonly format: 1 | 2;
  readonly vips: Record<string, string>;
  readonly unallocated: Record<string, string>;
  readonly leaving: readonly string[];
  /** External services' hosts -> VIP (`hosts`; in format 2 inside the payload). */
  readonly hosts: Record<string, string>;
  /** Hosts without a VIP -> reason (`unallocatedHosts`). */
  readonly unallocatedHosts: Record<string, string>;
  /** Services and hosts without a VIP yet (`pending`, `pendingHosts`; decision 160). */
  readonly pending: readonly string[];
  readonly pendingHosts: readonly string[];
}

export interface Vector {
  readonly name: string;
  readonly description: string;
  /** The item as `GetItem` returns it in DynamoDB JSON (binary attributes as base64). */
  readonly item: Record<string, unknown>;
  readonly expected: ExpectedView;
}

const UPDATED_AT = "2026-12-03T18:00:00.000Z";

/** Entries to an object whose keys are data (`__proto__` an own key, not the prototype). */
function record(entries: Iterable<readonly [string, string]>): Record<string, string> {
  return Object.fromEntries(entries);
}

function sequence(count: number, vip: (i: number) => string): [string, string][] {
  // Kuma-style names (`<name>_<namespace>_svc_<port>`), long enough to pass 64 KB at 1,600.
  return Array.from({ length: count }, (_, i) => [
    `backend-${String(i).padStart(4, "0")}_kuma-demo_svc_8080`,
    vip(i),
  ]);
}

const ipv4 = (i: number): string => `240.0.${Math.floor(i / 256)}.${i % 256}`;
const ipv6 = (i: number): string => `fd00:ab::${(i + 1).toString(16)}`;

function item(mesh: string, version: number, cidr: string, vips: Record<string, string>) {
  return { mesh, version, cidr, updatedAt: UPDATED_AT, incarnation: `inc-${mesh}`, vips };
}

/** The vectors' items: what the allocator writes, one case each. */
function cases(): { name: string; description: string; item: VipItem; extra?: object }[] {
  return [
    {
      name: "format1-basic",
      description: "Format 1 (plain): three services with IPv4 VIPs.",
      item: item(
        "default",
        3,
        "240.0.0.0/4",
        record([
          ["web", "240.0.0.0"],
          ["auth", "240.0.0.1"],
          ["backend_kuma-demo_svc_8080", "240.0.0.2"],
        ]),
      ),
    },
    {
      name: "format1-js-property-names",
      description:
        "Service names that are JavaScript Object.prototype properties: a reader must keep them as data (a Map, or an object without a prototype).",
      item: item(
        "constructor",
        1,
        "240.0.0.0/4",
        record([
          ["constructor", "240.0.0.10"],
          ["__proto__", "240.0.0.11"],
          ["toString", "240.0.0.12"],
          ["hasOwnProperty", "240.0.0.13"],
          ["valueOf", "240.0.0.14"],
        ]),
      ),
    },
    {
      name: "format1-ipv6",
      description: "Format 1 with an IPv6 range: VIPs in RFC 5952 text.",
      item: item(
        "six",
        7,
        "fd00:ab::/64",
        record([
          ["web", "fd00:ab::"],
          ["db", "fd00:ab::1"],
          ["cache", "fd00:ab::ff"],
        ]),
      ),
    },
    {
      name: "format1-unallocated",
      description:
        "A range too small for the mesh: services without a VIP are listed in `unallocated` with the reason.",
      item: {
        ...item(
          "tight",
          2,
          "10.0.0.0/31",
          record([
            ["a", "10.0.0.0"],
            ["b", "10.0.0.1"],
          ]),
        ),
        unallocated: record([["c", "VIP range 10.0.0.0/31 is exhausted"]]),
      },
    },
    {
      name: "format1-leaving",
      description:
        "`leaving`: services the last write stopped listing (private bookkeeping; they are not in the mesh).",
      item: {
        ...item("shrinking", 12, "240.0.0.0/4", record([["web", "240.0.0.0"]])),
        leaving: ["old", "older"],
      },
    },
    {
      name: "format1-pending",
      description:
        "`pending` and `pendingHosts`: services and hosts of the mesh without a VIP yet (a pass ran out of its invocation's time; a continuation claims them within seconds).",
      item: {
        ...item(
          "growing",
          3,
          "240.0.0.0/4",
          record([
            ["api", "240.0.0.0"],
            ["web", "240.0.0.1"],
          ]),
        ),
        pending: ["worker", "worker-2", "host/billing.example.com"],
      },
    },
    {
      name: "format1-empty-mesh",
      description: "A mesh without services: `vips` is an empty map.",
      item: item("empty", 1, "240.0.0.0/4", record([])),
    },
    {
      name: "format1-additive-attribute",
      description:
        "An attribute this version does not define (`labels`, as a later version might add): readers ignore attributes they do not know.",
      item: item("future", 4, "240.0.0.0/4", record([["web", "240.0.0.0"]])),
      extra: { labels: { team: "web" } },
    },
    {
      name: "format2-large",
      description:
        "Format 2: 1,600 services, above the 64 KB plain limit, so `vips`, `unallocated`, `leaving` and `pending` are gzip JSON in `vipsGz`; includes JavaScript property names, an unallocated service, a pending one and a leaving one.",
      item: {
        ...item(
          "large",
          40,
          "240.0.0.0/4",
          record([
            ...sequence(1598, ipv4),
            ["constructor", "240.0.100.1"],
            ["__proto__", "240.0.100.2"],
          ]),
        ),
        unallocated: record([["late", "VIP range 240.0.0.0/4 is exhausted"]]),
        leaving: ["gone"],
        pending: ["next"],
      },
    },
    {
      name: "format2-ipv6",
      description: "Format 2 with an IPv6 range (1,600 services).",
      item: item("large-six", 5, "fd00:ab::/64", record(sequence(1600, ipv6))),
    },
    {
      name: "format1-hosts",
      description:
        "External services' hosts: `hosts` (host -> VIP) and `unallocatedHosts` (host -> reason) are apart from `vips`; a host may be spelled like a service (`web`) and is not that service.",
      item: {
        ...item(
          "edge",
          6,
          "240.0.0.0/4",
          record([
            ["web", "240.0.0.20"],
            ["httpbin_kuma-demo_svc_443", "240.0.0.21"],
            [hostEntry("httpbin.org"), "240.0.0.22"],
            [hostEntry("api.example.com"), "240.0.0.23"],
            [hostEntry("web"), "240.0.0.24"],
          ]),
        ),
        unallocated: record([
          [hostEntry("late.example.org"), "VIP range 240.0.0.0/4 is exhausted"],
        ]),
        leaving: [hostEntry("old.example.net")],
      },
    },
    {
      name: "format2-hosts",
      description:
        "Format 2 with hosts: `hosts` and `unallocatedHosts` are fields of the gzip JSON payload, not attributes.",
      item: {
        ...item(
          "large-edge",
          11,
          "240.0.0.0/4",
          record([
            ...sequence(1600, ipv4),
            [hostEntry("httpbin.org"), "240.0.100.22"],
            [hostEntry("constructor.example.com"), "240.0.100.23"],
          ]),
        ),
        unallocated: record([
          [hostEntry("late.example.org"), "VIP range 240.0.0.0/4 is exhausted"],
        ]),
      },
    },
  ];
}

function dynamoJson(map: Record<string, AttributeValue>): Record<string, unknown> {
  const out = new Map<string, unknown>();
  for (const [key, value] of Object.entries(map)) out.set(key, attributeJson(value));
  return Object.fromEntries(out);
}

function attributeJson(value: AttributeValue): unknown {
  if (value.B !== undefined) return { B: Buffer.from(value.B).toString("base64") };
  if (value.M !== undefined) return { M: dynamoJson(value.M) };
  if (value.L !== undefined) return { L: value.L.map(attributeJson) };
  return Object.fromEntries(Object.entries(value).filter(([, inner]) => inner !== undefined));
}

export function generateVectors(): Vector[] {
  return cases().map(({ name, description, item: vipItem, extra }) => {
    const { stored } = encodeVipItem(vipItem);
    // The item lists hosts apart from services (the allocator's `host/<host>` entries split).
    const vips = splitHosts(vipItem.vips);
    const unallocated = splitHosts(vipItem.unallocated ?? {});
    // The project's own marshalling (the SDK's `marshall` drops a `__proto__` key).
    const marshalled = toAttributeMap({ ...stored, ...(extra ?? {}) });
    return {
      name,
      description,
      item: dynamoJson(marshalled),
      expected: {
        mesh: vipItem.mesh,
        version: vipItem.version,
        incarnation: vipItem.incarnation,
        cidr: vipItem.cidr,
        updatedAt: vipItem.updatedAt,
        format: stored.format === 2 ? 2 : 1,
        vips: vips.services,
        unallocated: unallocated.services,
        leaving: vipItem.leaving ?? [],
        hosts: vips.hosts,
        unallocatedHosts: unallocated.hosts,
        pending: (vipItem.pending ?? []).filter((name) => !isHostEntry(name)),
        pendingHosts: (vipItem.pending ?? []).filter(isHostEntry).map(hostOfEntry),
      },
    };
  });
}

/**
 * A vector's file text: JSON with a two-space indent, keys in insertion order, and a large map
 * or list (over 20 entries) on one line, so a format-2 vector stays a few dozen KB.
 */
export function vectorText(vector: Vector): string {
  return `${pretty(vector, "")}\n`;
}

function pretty(value: unknown, indent: string): string {
  if (typeof value !== "object" || value === null) return JSON.stringify(value);
  const entries = Array.isArray(value)
    ? value.map((v, i) => [String(i), v] as const)
    : Object.entries(value);
  if (entries.length === 0 || entries.length > 20) return JSON.stringify(value);
  const inner = `${indent}  `;
  const lines = entries.map(([key, v]) =>
    Array.isArray(value)
      ? `${inner}${pretty(v, inner)}`
      : `${inner}${JSON.stringify(key)}: ${pretty(v, inner)}`,
  );
  const [open, close] = Array.isArray(value) ? ["[", "]"] : ["{", "}"];
  return `${open}\n${lines.join(",\n")}\n${indent}${close}`;
}

if (process.argv[1] === fileURLToPath(import.meta.url)) {
  mkdirSync(VECTORS_DIR, { recursive: true });
  for (const file of readdirSync(VECTORS_DIR)) {
    if (file.endsWith(".json")) rmSync(join(VECTORS_DIR, file));
  }
  const vectors = generateVectors();
  for (const vector of vectors)
    writeFileSync(join(VECTORS_DIR, `${vector.name}.json`), vectorText(vector));
  process.stderr.write(`[vectors] ${vectors.length} vectors in ${VECTORS_DIR}\n`);
}
