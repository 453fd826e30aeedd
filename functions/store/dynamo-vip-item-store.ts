import { VersionConflictError } from "../domain/errors.ts";
import type { VipItem } from "../domain/types.ts";
import { ConditionFailed, type DocumentClient } from "./document-client.ts";
import type { Page, VipItemStore } from "./ports.ts";
import { decodeVipItem, encodeVipItem } from "./vip-item-codec.ts";

/**
 * The public `vips` table. Every write is conditional on the version read before the new
 * content was computed (`attribute_not_exists` for the first write), the optimistic-locking
 * pattern of the AWS SDK's `VersionedRecordExtension`.
 */
export class DynamoVipItemStore implements VipItemStore {
  constructor(
    private readonly doc: DocumentClient,
    private readonly table: string,
  ) {}

  async get(mesh: string): Promise<VipItem | undefined> {
    const item = await this.doc.get({ TableName: this.table, Key: { mesh }, ConsistentRead: true });
    return item === undefined ? undefined : decodeVipItem(item);
  }

  async put(item: VipItem, expectedVersion: number | undefined): Promise<number> {
    const { stored, bytes } = encodeVipItem(item);
    try {
      await this.doc.put({
        TableName: this.table,
        Item: stored,
        ...(expectedVersion === undefined
          ? {
              ConditionExpression: "attribute_not_exists(#m)",
              ExpressionAttributeNames: { "#m": "mesh" },
            }
          : {
              ConditionExpression: "#v = :expected",
              ExpressionAttributeNames: { "#v": "version" },
              ExpressionAttributeValues: { ":expected": expectedVersion },
            }),
      });
    } catch (error) {
      if (error instanceof ConditionFailed) {
        throw new VersionConflictError(`VIP item of mesh ${item.mesh}`, expectedVersion);
      }
      throw error;
    }
    return bytes;
  }

  async delete(mesh: string, expectedVersion: number): Promise<void> {
    try {
      await this.doc.delete({
        TableName: this.table,
        Key: { mesh },
        ConditionExpression: "#v = :expected",
        ExpressionAttributeNames: { "#v": "version" },
        ExpressionAttributeValues: { ":expected": expectedVersion },
      });
    } catch (error) {
      if (error instanceof ConditionFailed) {
        throw new VersionConflictError(`VIP item of mesh ${mesh}`, expectedVersion);
      }
      throw error;
    }
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
        items.push(decodeVipItem(stored));
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
