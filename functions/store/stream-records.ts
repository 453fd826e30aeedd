import type { AttributeValue } from "@aws-sdk/client-dynamodb";
import type { DynamoDBRecord } from "aws-lambda";
import { type ContributorImages, readImages } from "../domain/contributions.ts";
import type { InputIssue } from "../domain/errors.ts";
import { meshesTouchedBy } from "../domain/service-set.ts";
import { toPlain } from "./attribute-values.ts";
import type { TableNames } from "./table-definitions.ts";
import { parseStreamArn } from "./table-definitions.ts";

/** What one stream record means to the allocator. */
export type DecodedRecord =
  | {
      readonly ok: true;
      readonly sequenceNumber: string;
      readonly table: "meshes" | "dataplanes" | "external-services";
      readonly meshes: readonly string[];
      readonly createdAtMs: number | undefined;
      /**
       * A dataplane record's key and what its old and new images contribute, read here once
       * (an absent or undecodable image contributes nothing).
       */
      readonly dataplane?: ContributorImages;
    }
  | { readonly ok: false; readonly sequenceNumber: string | undefined; readonly issue: InputIssue };

/** `arn:aws:dynamodb:REGION:ACCOUNT:table/NAME/stream/LABEL` -> NAME */
export function tableNameFromArn(arn: string | undefined): string | undefined {
  return parseStreamArn(arn)?.tableName;
}

function image(value: unknown): unknown {
  if (value === undefined) return undefined;
  return toPlain(value as Record<string, AttributeValue>);
}

function imageOrNothing(value: unknown): unknown {
  try {
    return image(value);
  } catch {
    return undefined;
  }
}

/**
 * Decodes a Lambda stream record: which input table it came from (by the event source ARN's
 * table name) and which meshes it touches. A mesh record touches its mesh; a dataplane record
 * touches the mesh it is stored under and, for an ingress, every mesh its old or new image
 * advertises services for. Never throws: an unusable record becomes an issue.
 */
export function decodeRecord(record: DynamoDBRecord, tables: TableNames): DecodedRecord {
  if (typeof record !== "object" || record === null) {
    return {
      ok: false,
      sequenceNumber: undefined,
      issue: { table: "(unknown)", key: {}, field: "(record)", reason: "not an object" },
    };
  }
  const sequenceNumber = record.dynamodb?.SequenceNumber;
  const tableName = tableNameFromArn(record.eventSourceARN);
  const keys = (record.dynamodb?.Keys ?? {}) as Record<string, AttributeValue>;
  const fail = (table: string, field: string, reason: string): DecodedRecord => ({
    ok: false,
    sequenceNumber,
    issue: { table, key: plainKeys(keys), field, reason },
  });
  if (sequenceNumber === undefined || !/^\d+$/.test(sequenceNumber)) {
    return fail(tableName ?? "(unknown)", "dynamodb.SequenceNumber", "missing or not numeric");
  }
  const createdAt = record.dynamodb?.ApproximateCreationDateTime;
  const createdAtMs = typeof createdAt === "number" ? createdAt * 1000 : undefined;
  if (tableName === tables.meshes) {
    const name = keys.name?.S;
    if (name === undefined || name === "")
      return fail(tableName, "Keys.name", "missing or not a string");
    return { ok: true, sequenceNumber, table: "meshes", meshes: [name], createdAtMs };
  }
  if (tableName === tables.dataplanes) {
    const mesh = keys.mesh?.S;
    if (mesh === undefined || mesh === "")
      return fail(tableName, "Keys.mesh", "missing or not a string");
    const meshes = new Set<string>([mesh]);
    // An undecodable image still touches its own mesh, and contributes nothing.
    const oldImage = imageOrNothing(record.dynamodb?.OldImage);
    const newImage = imageOrNothing(record.dynamodb?.NewImage);
    for (const touched of [...meshesTouchedBy(oldImage), ...meshesTouchedBy(newImage)]) {
      meshes.add(touched);
    }
    const name = keys.name?.S;
    if (name === undefined) return fail(tableName, "Keys.name", "missing or not a string");
    return {
      ok: true,
      sequenceNumber,
      table: "dataplanes",
      meshes: [...meshes],
      createdAtMs,
      dataplane: readImages({ mesh, name }, oldImage, newImage),
    };
  }
  if (tableName !== undefined && tableName === tables.externalServices) {
    // An external service touches only its own mesh (it has no ingress form).
    const mesh = keys.mesh?.S;
    if (mesh === undefined || mesh === "")
      return fail(tableName, "Keys.mesh", "missing or not a string");
    const name = keys.name?.S;
    if (name === undefined) return fail(tableName, "Keys.name", "missing or not a string");
    return {
      ok: true,
      sequenceNumber,
      table: "external-services",
      meshes: [mesh],
      createdAtMs,
      dataplane: readImages(
        { mesh, name, kind: "external-service" },
        imageOrNothing(record.dynamodb?.OldImage),
        imageOrNothing(record.dynamodb?.NewImage),
      ),
    };
  }
  const inputs = [tables.meshes, tables.dataplanes, tables.externalServices].filter(
    (name) => name !== undefined,
  );
  return fail(
    tableName ?? "(unknown)",
    "eventSourceARN",
    `not a stream of ${inputs.join(" or ")}: ${record.eventSourceARN ?? "missing"}`,
  );
}

function plainKeys(keys: Record<string, AttributeValue>): Record<string, unknown> {
  try {
    return toPlain(keys);
  } catch {
    return {};
  }
}

/** Numeric comparison of stream sequence numbers (21-40 digits: never compare as strings). */
export function compareSequenceNumbers(a: string, b: string): number {
  const x = BigInt(a);
  const y = BigInt(b);
  return x < y ? -1 : x > y ? 1 : 0;
}
