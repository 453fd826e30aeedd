import { TransactionCanceledException } from "@aws-sdk/client-dynamodb";
import { fromAttributeMap } from "./attribute-values.ts";
import type { ClaimWrite, Item } from "./claim-items.ts";
import type { ClaimTable, WriteOutcome } from "./claim-store-logic.ts";
import { ConditionFailed, type DynamoItemClient, type TransactItem } from "./dynamo-item-client.ts";

/**
 * The claims table in DynamoDB (`CLAIMS_TABLE`): the adapter under `ClaimStoreLogic`, which
 * runs the claim store's ports on it (decision 157). Multi-item changes are transactions on this
 * table only (it has no stream), so an address and its service claim always change together.
 */
export class DynamoClaimTable implements ClaimTable {
  constructor(
    private readonly doc: DynamoItemClient,
    private readonly name: string,
  ) {}

  async get(_operation: string, keys: readonly string[], consistent = true): Promise<Item[]> {
    return await this.doc.batchGet(
      this.name,
      keys.map((pk) => ({ pk })),
      { consistent },
    );
  }

  async scan(
    _operation: string,
    after: string | undefined,
    limit: number,
    consistent = true,
  ): Promise<{ items: Item[]; next: string | undefined }> {
    const page = await this.doc.scanPage(
      this.name,
      after === undefined ? undefined : { pk: { S: after } },
      { Limit: limit, ConsistentRead: consistent },
    );
    return { items: page.items, next: page.next?.pk?.S };
  }

  async write(_operation: string, writes: readonly ClaimWrite[]): Promise<WriteOutcome> {
    if (writes.length === 1) return await this.writeOne(writes[0] as ClaimWrite);
    try {
      await this.doc.transactWrite(writes.map((write) => this.transactItem(write)));
      return { ok: true, item: undefined };
    } catch (error) {
      const cancelled = cancelledIndexes(error);
      if (cancelled === undefined) throw error;
      return { ok: false, ...cancelled };
    }
  }

  private async writeOne(write: ClaimWrite): Promise<WriteOutcome> {
    const parts = this.parts(write);
    if (write.action === "check") throw new Error("a condition check needs a transaction");
    try {
      if (write.action === "put") {
        await this.doc.put({ TableName: this.name, Item: write.item ?? {}, ...parts });
        return { ok: true, item: write.item };
      }
      if (write.action === "delete") {
        await this.doc.delete({ TableName: this.name, Key: { pk: write.key }, ...parts });
        return { ok: true, item: undefined };
      }
      const item = await this.doc.update({
        TableName: this.name,
        Key: { pk: write.key },
        UpdateExpression: write.updateExpression ?? "",
        ReturnValues: "ALL_NEW",
        ...parts,
      });
      return { ok: true, item };
    } catch (error) {
      if (error instanceof ConditionFailed) {
        const found = new Map<number, Item>();
        if (error.found !== undefined) found.set(0, error.found);
        return { ok: false, failed: new Set([0]), found };
      }
      throw error;
    }
  }

  private transactItem(write: ClaimWrite): TransactItem {
    const parts = this.parts(write);
    if (write.action === "put") {
      return { Put: { TableName: this.name, Item: write.item ?? {}, ...parts } };
    }
    if (write.action === "delete") {
      return { Delete: { TableName: this.name, Key: { pk: write.key }, ...parts } };
    }
    if (write.action === "check") {
      return { ConditionCheck: { TableName: this.name, Key: { pk: write.key }, ...parts } };
    }
    return {
      Update: {
        TableName: this.name,
        Key: { pk: write.key },
        UpdateExpression: write.updateExpression ?? "",
        ...parts,
      },
    };
  }

  private parts(write: ClaimWrite) {
    return {
      ...(write.conditionExpression !== undefined
        ? { ConditionExpression: write.conditionExpression }
        : {}),
      ...(write.names !== undefined ? { ExpressionAttributeNames: write.names } : {}),
      ...(write.values !== undefined ? { ExpressionAttributeValues: write.values } : {}),
    };
  }
}

/**
 * Which transaction items failed, with the items their conditions found; undefined for anything
 * that is not a lost condition.
 */
function cancelledIndexes(
  error: unknown,
): { failed: Set<number>; found: Map<number, Item> } | undefined {
  if (!(error instanceof TransactionCanceledException)) return undefined;
  const failed = new Set<number>();
  const found = new Map<number, Item>();
  for (const [index, reason] of (error.CancellationReasons ?? []).entries()) {
    const code = reason.Code ?? "None";
    if (code === "None") continue;
    if (code !== "ConditionalCheckFailed" && code !== "TransactionConflict") return undefined;
    failed.add(index);
    if (reason.Item !== undefined) found.set(index, fromAttributeMap(reason.Item));
  }
  return { failed, found };
}
