import type { AttributeValue } from "@aws-sdk/client-dynamodb";
import { describe, expect, it } from "vitest";
import { itemSizeBytes, toPlain } from "../../functions/store/attribute-values.ts";
import {
  compareSequenceNumbers,
  decodeRecord,
  tableNameFromArn,
} from "../../functions/store/stream-records.ts";
import { resolveTableNames } from "../../functions/store/table-definitions.ts";
import {
  dataplane,
  dataplaneRecord,
  ingress,
  meshItem,
  meshRecord,
  streamArn,
  streamRecord,
} from "../fixtures/builders.ts";

const tables = resolveTableNames({});

describe("decodeRecord", () => {
  it("decodes a mesh record as touching that mesh", () => {
    // Arrange
    const record = meshRecord(tables.meshes, "mesh-1", {
      oldImage: meshItem("mesh-1"),
      newImage: meshItem("mesh-1", { mtls: true }),
    });

    // Act
    const decoded = decodeRecord(record, tables);

    // Assert
    expect(decoded).toEqual({
      ok: true,
      sequenceNumber: record.dynamodb?.SequenceNumber,
      table: "meshes",
      meshes: ["mesh-1"],
      createdAtMs: undefined,
    });
  });

  it("decodes a deleted mesh, which has only an old image", () => {
    // Arrange
    const record = meshRecord(tables.meshes, "gone", { oldImage: meshItem("gone") });

    // Act
    const decoded = decodeRecord(record, tables);

    // Assert
    expect(decoded).toMatchObject({ ok: true, table: "meshes", meshes: ["gone"] });
  });

  it("decodes a dataplane record as touching the mesh it is stored under", () => {
    // Arrange
    const record = dataplaneRecord(tables.dataplanes, {
      newImage: dataplane("mesh-1", "dp-1", ["web"]),
    });

    // Act
    const decoded = decodeRecord(record, tables);

    // Assert
    expect(decoded).toMatchObject({ ok: true, table: "dataplanes", meshes: ["mesh-1"] });
  });

  it("decodes an ingress record as touching the meshes of its old and new images", () => {
    // Arrange
    const record = dataplaneRecord(tables.dataplanes, {
      oldImage: ingress("mesh-0", "ingress", [{ mesh: "mesh-old", service: "a" }]),
      newImage: ingress("mesh-0", "ingress", [
        { mesh: "mesh-new", service: "a" },
        { mesh: "mesh-0", service: "b" },
      ]),
    });

    // Act
    const decoded = decodeRecord(record, tables);

    // Assert
    expect(decoded.ok).toBe(true);
    if (!decoded.ok) return;
    expect([...decoded.meshes].sort()).toEqual(["mesh-0", "mesh-new", "mesh-old"]);
  });

  it("decodes a removed ingress from its old image alone", () => {
    // Arrange
    const record = dataplaneRecord(tables.dataplanes, {
      oldImage: ingress("mesh-0", "ingress", [{ mesh: "mesh-9", service: "a" }]),
    });

    // Act
    const decoded = decodeRecord(record, tables);

    // Assert
    expect(decoded.ok && [...decoded.meshes].sort()).toEqual(["mesh-0", "mesh-9"]);
  });

  it("converts the approximate creation time from seconds to milliseconds", () => {
    // Arrange
    const record = streamRecord({
      table: tables.meshes,
      keys: { name: "m" },
      newImage: meshItem("m"),
      createdAt: 1_700_000_000,
    });

    // Act
    const decoded = decodeRecord(record, tables);

    // Assert
    expect(decoded.ok && decoded.createdAtMs).toBe(1_700_000_000_000);
  });

  it("uses the configured table names, not the defaults", () => {
    // Arrange
    const custom = resolveTableNames({ MESHES_TABLE: "prod-meshes" });
    const record = meshRecord("prod-meshes", "m");

    // Act
    const decoded = decodeRecord(record, custom);
    const withDefaults = decodeRecord(record, tables);

    // Assert
    expect(decoded.ok).toBe(true);
    expect(withDefaults.ok).toBe(false);
  });

  it("reports a record from an unknown table, naming eventSourceARN", () => {
    // Arrange
    const record = streamRecord({
      table: "strangers",
      keys: { name: "m" },
      newImage: { name: "m" },
    });

    // Act
    const decoded = decodeRecord(record, tables);

    // Assert
    expect(decoded.ok).toBe(false);
    if (decoded.ok) return;
    expect(decoded.sequenceNumber).toBe(record.dynamodb?.SequenceNumber);
    expect(decoded.issue).toMatchObject({
      table: "strangers",
      key: { name: "m" },
      field: "eventSourceARN",
    });
    expect(decoded.issue.reason).toContain(streamArn("strangers"));
  });

  it("reports a record without an event source ARN", () => {
    // Arrange
    const record = meshRecord(tables.meshes, "m");
    delete record.eventSourceARN;

    // Act
    const decoded = decodeRecord(record, tables);

    // Assert
    expect(decoded.ok).toBe(false);
    if (decoded.ok) return;
    expect(decoded.issue.field).toBe("eventSourceARN");
    expect(decoded.issue.table).toBe("(unknown)");
  });

  it("reports a mesh record without keys", () => {
    // Arrange
    const record = streamRecord({ table: tables.meshes, newImage: meshItem("m") });

    // Act
    const decoded = decodeRecord(record, tables);

    // Assert
    expect(decoded).toEqual({
      ok: false,
      sequenceNumber: record.dynamodb?.SequenceNumber,
      issue: { table: "meshes", key: {}, field: "Keys.name", reason: "missing or not a string" },
    });
  });

  it("reports a dataplane record without keys", () => {
    // Arrange
    const record = streamRecord({
      table: tables.dataplanes,
      newImage: dataplane("m", "dp", ["web"]),
    });

    // Act
    const decoded = decodeRecord(record, tables);

    // Assert
    expect(decoded.ok).toBe(false);
    if (decoded.ok) return;
    expect(decoded.issue).toMatchObject({ table: "dataplanes", key: {}, field: "Keys.mesh" });
  });

  it("reports a dataplane record whose mesh key is not a string", () => {
    // Arrange
    const record = streamRecord({ table: tables.dataplanes, keys: { mesh: 7, name: "dp" } });

    // Act
    const decoded = decodeRecord(record, tables);

    // Assert
    expect(decoded.ok).toBe(false);
    if (decoded.ok) return;
    expect(decoded.issue).toMatchObject({ key: { mesh: 7, name: "dp" }, field: "Keys.mesh" });
  });

  it("reports a record without a numeric sequence number", () => {
    // Arrange
    const record = meshRecord(tables.meshes, "m");
    if (record.dynamodb !== undefined) record.dynamodb.SequenceNumber = "abc";

    // Act
    const decoded = decodeRecord(record, tables);

    // Assert
    expect(decoded.ok).toBe(false);
    if (decoded.ok) return;
    expect(decoded.issue.field).toBe("dynamodb.SequenceNumber");
  });

  it("still touches the stored mesh when an image cannot be decoded", () => {
    // Arrange
    const record = streamRecord({ table: tables.dataplanes, keys: { mesh: "m", name: "dp" } });
    if (record.dynamodb !== undefined) {
      record.dynamodb.NewImage = { networking: { Q: "?" } } as never;
    }

    // Act
    const decoded = decodeRecord(record, tables);

    // Assert
    expect(decoded).toMatchObject({ ok: true, meshes: ["m"] });
  });
});

describe("tableNameFromArn", () => {
  it("extracts the table name from a stream ARN", () => {
    expect(tableNameFromArn(streamArn("dataplanes"))).toBe("dataplanes");
  });

  it.each([undefined, "", "arn:aws:dynamodb:us-east-1:1:table/dataplanes"])(
    "gives nothing for %j",
    (arn) => {
      expect(tableNameFromArn(arn)).toBeUndefined();
    },
  );
});

describe("compareSequenceNumbers", () => {
  it("compares numerically, not as strings", () => {
    // Act
    const order = compareSequenceNumbers("9", "10");

    // Assert
    expect(order).toBeLessThan(0);
    expect("9" < "10").toBe(false);
  });

  it("compares 40-digit sequence numbers exactly", () => {
    // Arrange
    const a = "1234567890123456789012345678901234567890";
    const b = "1234567890123456789012345678901234567891";

    // Act
    const ab = compareSequenceNumbers(a, b);
    const ba = compareSequenceNumbers(b, a);
    const aa = compareSequenceNumbers(a, a);

    // Assert
    expect(ab).toBeLessThan(0);
    expect(ba).toBeGreaterThan(0);
    expect(aa).toBe(0);
    expect(Number(a) === Number(b)).toBe(true);
  });

  it("orders a 21-digit number before a 40-digit one", () => {
    expect(
      compareSequenceNumbers("100000000000000000000", "1000000000000000000000000000000000000000"),
    ).toBeLessThan(0);
  });
});

describe("toPlain", () => {
  it("converts a marshalled dataplane to plain values", () => {
    // Arrange
    const raw: Record<string, AttributeValue> = {
      mesh: { S: "m" },
      networking: {
        M: { inbound: { L: [{ M: { port: { N: "8080" }, tags: { M: { a: { S: "b" } } } } }] } },
      },
    };

    // Act
    const plain = toPlain(raw);

    // Assert
    expect(plain).toEqual({
      mesh: "m",
      networking: { inbound: [{ port: 8080, tags: { a: "b" } }] },
    });
  });

  it("keeps a number too large for JS as its string instead of throwing", () => {
    // Act
    const plain = toPlain({ port: { N: "123456789012345678901234567890" }, ratio: { N: "1.5" } });

    // Assert
    expect(plain).toEqual({ port: "123456789012345678901234567890", ratio: 1.5 });
  });
});

describe("itemSizeBytes", () => {
  it("counts attribute names and UTF-8 string values", () => {
    // Act
    const size = itemSizeBytes({ mesh: "é" });

    // Assert
    expect(size).toBe(4 + 2);
  });

  it("grows with every VIP added to the map", () => {
    // Arrange
    const small = { mesh: "m", vips: { a: "240.0.0.0" } };
    const large = { mesh: "m", vips: { a: "240.0.0.0", bb: "240.0.0.1" } };

    // Act
    const delta = itemSizeBytes(large) - itemSizeBytes(small);

    // Assert
    expect(delta).toBe(1 + 2 + "240.0.0.1".length);
  });

  it("counts numbers at about one byte per two digits plus one", () => {
    expect(itemSizeBytes({ v: 12345 })).toBe(1 + 4);
  });
});
