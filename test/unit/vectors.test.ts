/**
 * The test vectors (test-vectors/, docs/vectors.md): the committed files are what the generator
 * (scripts/vectors.ts, our encoder) produces now, every item conforms to the schema, and our
 * decoders (the codec, and the reader's `meshViewOf`) give each vector's expected result.
 */
import { readdirSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { gunzipSync } from "node:zlib";
import { describe, expect, it } from "vitest";
import { meshViewOf } from "../../functions/reader/index.ts";
import { fromAttributeMap } from "../../functions/store/attribute-values.ts";
import { decodeVipItem } from "../../functions/store/vip-item-codec.ts";
import { generateVectors, VECTORS_DIR, type Vector, vectorText } from "../../scripts/vectors.ts";
import { fromDynamoJson, vipItemSchemaErrors } from "../fixtures/vip-item-schema.ts";

const generated = generateVectors();
const committed = new Map(
  readdirSync(VECTORS_DIR)
    .filter((file) => file.endsWith(".json"))
    .map((file) => [file, readFileSync(join(VECTORS_DIR, file), "utf8")] as const),
);

/**
 * A vector with its gzip bytes replaced by what they decode to: gzip's bytes may differ between
 * zlib builds (Node versions), the payload may not.
 */
function comparable(vector: Vector): unknown {
  const gz = (vector.item.vipsGz as { B?: string } | undefined)?.B;
  if (gz === undefined) return vector;
  const payload = JSON.parse(gunzipSync(Buffer.from(gz, "base64")).toString("utf8")) as unknown;
  return { ...vector, item: { ...vector.item, vipsGz: { payload } } };
}

const sorted = (entries: Iterable<[string, string]>) =>
  [...entries].sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0));

describe("the test vectors", () => {
  it("are committed exactly as scripts/vectors.ts generates them (npm run vectors)", () => {
    expect([...committed.keys()].sort()).toEqual(generated.map((v) => `${v.name}.json`).sort());
    for (const vector of generated) {
      const text = committed.get(`${vector.name}.json`) as string;
      if (vector.expected.format === 1) {
        expect(text, vector.name).toBe(vectorText(vector));
      } else {
        expect(comparable(JSON.parse(text) as Vector), vector.name).toEqual(comparable(vector));
      }
    }
  });

  it("cover both formats, JavaScript property names, IPv6, unallocated, leaving, pending and an empty mesh", () => {
    const all = generated.map((v) => v.expected);
    expect(all.some((v) => v.format === 2)).toBe(true);
    expect(all.some((v) => Object.hasOwn(v.vips, "__proto__") && v.format === 2)).toBe(true);
    expect(all.some((v) => Object.hasOwn(v.vips, "constructor") && v.format === 1)).toBe(true);
    expect(all.some((v) => v.cidr.includes(":") && v.format === 1)).toBe(true);
    expect(all.some((v) => v.cidr.includes(":") && v.format === 2)).toBe(true);
    expect(all.some((v) => Object.keys(v.unallocated).length > 0)).toBe(true);
    expect(all.some((v) => v.leaving.length > 0 && v.format === 1)).toBe(true);
    expect(all.some((v) => v.pending.length > 0 && v.format === 1)).toBe(true);
    expect(all.some((v) => v.pending.length > 0 && v.format === 2)).toBe(true);
    expect(all.some((v) => v.pendingHosts.length > 0)).toBe(true);
    expect(all.some((v) => Object.keys(v.vips).length === 0)).toBe(true);
    for (const format of [1, 2]) {
      expect(all.some((v) => Object.keys(v.hosts).length > 0 && v.format === format)).toBe(true);
      expect(
        all.some((v) => Object.keys(v.unallocatedHosts).length > 0 && v.format === format),
      ).toBe(true);
    }
  });

  for (const vector of generated) {
    const text = committed.get(`${vector.name}.json`) ?? "{}";
    const { item, expected } = JSON.parse(text) as Vector;

    it(`${vector.name}: conforms to the schema`, () => {
      expect(vipItemSchemaErrors(item)).toEqual([]);
    });

    it(`${vector.name}: decodes to the expected result (codec and reader)`, () => {
      const raw = fromAttributeMap(fromDynamoJson(item));
      const decoded = decodeVipItem(raw);
      expect(sorted(Object.entries(decoded.vips))).toEqual(sorted(Object.entries(expected.vips)));
      expect(sorted(Object.entries(decoded.unallocated ?? {}))).toEqual(
        sorted(Object.entries(expected.unallocated)),
      );
      expect(decoded.leaving ?? []).toEqual(expected.leaving);
      expect(sorted(Object.entries(decoded.hosts ?? {}))).toEqual(
        sorted(Object.entries(expected.hosts)),
      );
      expect(sorted(Object.entries(decoded.unallocatedHosts ?? {}))).toEqual(
        sorted(Object.entries(expected.unallocatedHosts)),
      );
      expect(decoded.pending ?? []).toEqual(expected.pending);
      expect(decoded.pendingHosts ?? []).toEqual(expected.pendingHosts);

      const { view, issues } = meshViewOf(raw);
      expect(issues).toEqual([]);
      expect({
        mesh: view?.mesh,
        version: view?.version,
        incarnation: view?.incarnation,
        cidr: view?.cidr,
        updatedAt: view?.updatedAt,
      }).toEqual({
        mesh: expected.mesh,
        version: expected.version,
        incarnation: expected.incarnation,
        cidr: expected.cidr,
        updatedAt: expected.updatedAt,
      });
      expect(sorted(view?.vips ?? [])).toEqual(sorted(Object.entries(expected.vips)));
      expect(sorted(view?.unallocated ?? [])).toEqual(sorted(Object.entries(expected.unallocated)));
      expect(sorted(view?.hosts ?? [])).toEqual(sorted(Object.entries(expected.hosts)));
      expect(sorted(view?.unallocatedHosts ?? [])).toEqual(
        sorted(Object.entries(expected.unallocatedHosts)),
      );
      expect(view?.pending).toEqual(expected.pending);
      expect(view?.pendingHosts).toEqual(expected.pendingHosts);
    });
  }
});
