import type { VipItem } from "../domain/types.ts";
import type { PlainRecord } from "./attribute-values.ts";
import { ConditionFailed, type DynamoItemClient } from "./dynamo-item-client.ts";
import type { ItemRevision, ItemWriteResult, Page, VipItemStore } from "./ports.ts";
import { decodeAllocatorItem, encodeVipItem } from "./vip-item-codec.ts";

/**
 * The public `vips` table. Every write is conditional on the version and incarnation read
 * before the new content was computed (`attribute_not_exists` for the first write), the
 * optimistic-locking pattern of the AWS SDK's `VersionedRecordExtension` with the incarnation
 * added against ABA (a mesh deleted and created again restarts at version 1).
 */
export class DynamoVipItemStore implements VipItemStore {
  constructor(
    private readonly doc: DynamoItemClient,
    private readonly table: string,
  ) {}

  async get(mesh: string): Promise<VipItem | undefined> {
    const item = await this.doc.get({ TableName: this.table, Key: { mesh }, ConsistentRead: true });
    return item === undefined ? undefined : decodeAllocatorItem(item);
  }

  async put(item: VipItem, expected: ItemRevision | undefined): Promise<ItemWriteResult> {
    const { stored, bytes } = encodeVipItem(item);
    try {
      await this.doc.put({
        TableName: this.table,
        Item: stored,
        ...(expected === undefined
          ? {
              ConditionExpression: "attribute_not_exists(#m)",
              ExpressionAttributeNames: { "#m": "mesh" },
            }
          : revisionCondition(expected)),
      });
    } catch (error) {
      if (error instanceof ConditionFailed) return lost(error.found);
      throw error;
    }
    return { written: true, bytes };
  }

  async delete(mesh: string, expected: ItemRevision): Promise<ItemWriteResult> {
    try {
      await this.doc.delete({
        TableName: this.table,
        Key: { mesh },
        ...revisionCondition(expected),
      });
    } catch (error) {
      if (error instanceof ConditionFailed) return lost(error.found);
      throw error;
    }
    return { written: true, bytes: 0 };
  }

  async itemPage(
    after: string | undefined,
    limit: number,
    consistent = true,
  ): Promise<Page<VipItem> & { readonly malformed: readonly string[] }> {
    const page = await this.doc.scanPage(
      this.table,
      after === undefined ? undefined : { mesh: { S: after } },
      { Limit: limit, ConsistentRead: consistent },
    );
    const items: VipItem[] = [];
    const malformed: string[] = [];
    for (const stored of page.items) {
      try {
        items.push(decodeAllocatorItem(stored));
      } catch {
        malformed.push(String(stored.mesh));
      }
    }
    return { items, malformed, next: page.next?.mesh?.S };
  }

  async meshPage(
    after: string | undefined,
    limit: number,
    consistent = true,
  ): Promise<Page<string>> {
    const page = await this.doc.scanPage(
      this.table,
      after === undefined ? undefined : { mesh: { S: after } },
      {
        Limit: limit,
        ProjectionExpression: "#m",
        ExpressionAttributeNames: { "#m": "mesh" },
        ConsistentRead: consistent,
      },
    );
    return {
      items: page.items.flatMap((item) => (typeof item.mesh === "string" ? [item.mesh] : [])),
      next: page.next?.mesh?.S,
    };
  }
}

/**
 * A lost condition, with the item it found when the engine returned one that decodes (a
 * malformed item is left for the caller's read, which reports it as such).
 */
function lost(found: PlainRecord | undefined): ItemWriteResult {
  if (found === undefined) return { written: false, found: "unknown" };
  try {
    return { written: false, found: decodeAllocatorItem(found) };
  } catch {
    return { written: false, found: "unknown" };
  }
}

/**
 * The stored item is still the one read: same version, same incarnation (an item written
 * before incarnations existed has none, and is read as incarnation "").
 */
function revisionCondition(expected: ItemRevision) {
  return {
    ConditionExpression:
      expected.incarnation === ""
        ? "#v = :expected AND attribute_not_exists(#i)"
        : "#v = :expected AND #i = :incarnation",
    ExpressionAttributeNames: { "#v": "version", "#i": "incarnation" },
    ExpressionAttributeValues: {
      ":expected": expected.version,
      ...(expected.incarnation === "" ? {} : { ":incarnation": expected.incarnation }),
    },
  };
}
