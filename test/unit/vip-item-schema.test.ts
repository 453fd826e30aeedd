import { gzipSync } from "node:zlib";
import { describe, expect, it } from "vitest";
import type { VipItem } from "../../functions/domain/types.ts";
import { toAttributeMap } from "../../functions/store/attribute-values.ts";
import { encodeVipItem } from "../../functions/store/vip-item-codec.ts";
import { type DynamoJson, toDynamoJson, vipItemSchemaErrors } from "../fixtures/vip-item-schema.ts";

const base: VipItem = {
  mesh: "default",
  version: 3,
  // Names are data: built from entries, so `__proto__` is a key, not the prototype.
  vips: Object.fromEntries([
    ["web", "240.0.0.1"],
    ["constructor", "240.0.0.2"],
    ["__proto__", "240.0.0.3"],
  ]),
  cidr: "240.0.0.0/4",
  updatedAt: "2026-12-03T18:00:00.000Z",
  incarnation: "a1b2",
  renumberings: 0,
};

function stored(item: VipItem): DynamoJson {
  // The project's own marshalling: the SDK's `marshall` drops a `__proto__` key.
  return toDynamoJson(toAttributeMap(encodeVipItem(item).stored));
}

function large(count: number): VipItem {
  const vips: Record<string, string> = {};
  for (let i = 0; i < count; i++) vips[`service-${i}`] = `fd00::${i.toString(16)}`;
  return {
    ...base,
    cidr: "fd00::/64",
    vips,
    leaving: ["gone"],
    unallocated: { late: "exhausted" },
  };
}

describe("the VIP item's JSON Schema (schema/)", () => {
  it("accepts what the encoder writes: format 1, with unallocated and leaving, IPv6, empty", () => {
    expect(Object.keys((stored(base).vips as { M: object }).M)).toContain("__proto__");
    expect(vipItemSchemaErrors(stored(base))).toEqual([]);
    const withAll = { ...base, unallocated: { late: "range exhausted" }, leaving: ["old"] };
    expect(vipItemSchemaErrors(stored(withAll))).toEqual([]);
    expect(
      vipItemSchemaErrors(stored({ ...base, cidr: "fd00::/120", vips: { a: "fd00::1" } })),
    ).toEqual([]);
    expect(vipItemSchemaErrors(stored({ ...base, vips: {} }))).toEqual([]);
  });

  it("accepts format 2 and checks its decoded payload", () => {
    const item = stored(large(5000));
    expect((item.format as { N: string }).N).toBe("2");
    expect(vipItemSchemaErrors(item)).toEqual([]);
  });

  it("accepts additive attributes (a reader ignores what it does not know)", () => {
    expect(vipItemSchemaErrors({ ...stored(base), labels: { M: { team: { S: "x" } } } })).toEqual(
      [],
    );
  });

  it("describes hosts in both formats: attributes of format 1, payload fields of format 2", () => {
    const withHosts: VipItem = {
      ...base,
      vips: { ...base.vips, "host/httpbin.org": "240.0.0.9" },
      unallocated: { "host/late.example.org": "VIP range 240.0.0.0/4 is exhausted" },
    };
    const one = stored(withHosts);
    expect(one.hosts).toEqual({ M: { "httpbin.org": { S: "240.0.0.9" } } });
    expect(vipItemSchemaErrors(one)).toEqual([]);
    const two = stored({
      ...large(5000),
      vips: { ...large(5000).vips, "host/api.example.com": "fd00::ffff" },
    });
    expect(two.hosts).toBeUndefined();
    expect(vipItemSchemaErrors(two)).toEqual([]);

    const wrong = (change: DynamoJson): string =>
      vipItemSchemaErrors({ ...one, ...change }).join("\n");
    expect(wrong({ hosts: { M: { "HTTPBIN.org": { S: "240.0.0.9" } } } })).toMatch(
      /\/hosts\/M (property name )?must match pattern/,
    );
    expect(wrong({ hosts: { M: { "httpbin.org": { S: "not-an-ip" } } } })).toMatch(
      /\/hosts\/M\/httpbin\.org\/S must match pattern/,
    );
    expect(wrong({ unallocatedHosts: { M: { "a..b": { S: "why" } } } })).toMatch(
      /\/unallocatedHosts\/M/,
    );
    // Format 2 keeps hosts in the payload only.
    expect(vipItemSchemaErrors({ ...two, hosts: one.hosts }).length).toBeGreaterThan(0);
    const badPayload = {
      ...two,
      serviceCount: { N: "0" },
      vipsGz: {
        B: gzipJson({
          vips: {},
          unallocated: {},
          leaving: [],
          hosts: { "Bad_Host.": "240.0.0.1" },
        }).toString("base64"),
      },
    };
    expect(vipItemSchemaErrors(badPayload).join("\n")).toMatch(/payload \/hosts/);
  });

  it("rejects wrong items, naming the mesh and the field", () => {
    const good = stored(base);
    const wrong = (change: DynamoJson): string[] => vipItemSchemaErrors({ ...good, ...change });
    const { version: _version, ...noVersion } = good;
    expect(vipItemSchemaErrors(noVersion).join("\n")).toMatch(
      /mesh "default": \/ must have required property 'version'/,
    );
    expect(wrong({ vips: { M: { web: { N: "1" } } } }).join("\n")).toMatch(/\/vips\/M\/web/);
    expect(wrong({ vips: { M: { "bad name": { S: "240.0.0.1" } } } }).join("\n")).toMatch(
      /\/vips\/M (property name )?must match pattern/,
    );
    expect(wrong({ vips: { M: { web: { S: "240.0.0.256" } } } }).join("\n")).toMatch(
      /\/vips\/M\/web\/S must match pattern/,
    );
    expect(wrong({ version: { N: "0" } }).join("\n")).toMatch(/\/version\/N/);
    expect(wrong({ version: { S: "1" } }).join("\n")).toMatch(/\/version/);
    expect(wrong({ updatedAt: { S: "yesterday" } }).join("\n")).toMatch(/\/updatedAt\/S/);
    expect(wrong({ leaving: { L: [] } }).join("\n")).toMatch(/\/leaving\/L/);
    expect(wrong({ vipsGz: { B: "H4sI" } }).length).toBeGreaterThan(0);
  });

  it("rejects format-2 items whose envelope or payload is wrong", () => {
    const good = stored(large(5000));
    expect(vipItemSchemaErrors({ ...good, vips: { M: {} } }).length).toBeGreaterThan(0);
    const { serviceCount: _count, ...noCount } = good;
    expect(vipItemSchemaErrors(noCount).join("\n")).toMatch(/serviceCount/);
    expect(vipItemSchemaErrors({ ...good, serviceCount: { N: "4999" } }).join("\n")).toMatch(
      /\/serviceCount 4999, but the payload has 5000/,
    );
    expect(vipItemSchemaErrors({ ...good, vipsGz: { B: "bm90IGd6aXA=" } }).join("\n")).toMatch(
      /does not gunzip/,
    );
    const badPayload = {
      ...good,
      serviceCount: { N: "1" },
      vipsGz: {
        B: gzipJson({ vips: { web: 7 }, unallocated: {}, leaving: [] }).toString("base64"),
      },
    };
    expect(vipItemSchemaErrors(badPayload).join("\n")).toMatch(
      /payload \/vips\/web must be string/,
    );
  });
});

function gzipJson(value: unknown): Buffer {
  return gzipSync(JSON.stringify(value));
}
