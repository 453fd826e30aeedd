/**
 * What DynamoDB would bill, computed from item sizes (moto's ConsumedCapacity is not reliable):
 * an SDK middleware counts every request of a client by operation and table, and computes read
 * and write capacity units the way DynamoDB bills them:
 * - reads: 4 KB units, rounded up, strongly consistent 1, eventually consistent 0.5; a missing
 *   item still costs the minimum; BatchGetItem bills every key; a Query or Scan bills the sum of
 *   the items it *read* per request (filters and projections do not reduce it);
 * - writes: 1 KB units of the larger of the item before and after, rounded up; a delete bills
 *   the deleted item; a failed conditional write still bills; transactions bill twice.
 * Responses under a projection or a filter do not carry the items read, so the meter learns the
 * full sizes with side requests on an unmetered client (their time is counted in `overheadMs`,
 * so the caller can subtract it from wall time).
 */
import {
  type AttributeValue,
  DescribeTableCommand,
  type DynamoDBClient,
  GetItemCommand,
  QueryCommand,
  ScanCommand,
} from "@aws-sdk/client-dynamodb";
import {
  add,
  type CostTotals,
  emptyTotals,
  type Item,
  itemSize,
  readUnits,
  referenced,
  type TableCost,
  writeUnits,
} from "./capacity-units.ts";

/** What a write replaces, read before it is sent. */
interface Before {
  readonly sizes: readonly number[];
  readonly replaced: Item | undefined;
}

export class CostMeter {
  private totals = emptyTotals();
  private readonly keys = new Map<string, string[]>();
  private readonly indexes = new Map<
    string,
    Array<{ keys: string[]; indexKeys: string[]; include: string[] | "ALL" }>
  >();

  /** `side`: an unmetered client on the same endpoint, for the meter's own reads. */
  constructor(private readonly side: DynamoDBClient) {}

  snapshot(): CostTotals {
    const t = this.totals;
    return {
      ...t,
      byOperation: new Map(t.byOperation),
      byTable: new Map([...t.byTable].map(([k, v]) => [k, { ...v }])),
      byKeyPrefix: new Map([...t.byKeyPrefix].map(([k, v]) => [k, { ...v }])),
    };
  }

  reset(): void {
    this.totals = emptyTotals();
  }

  install(client: DynamoDBClient): void {
    client.middlewareStack.add(
      (next, context) => async (args) => {
        const operation = context.commandName ?? "unknown";
        const input = args.input as Record<string, unknown>;
        const before = await this.timed(() => this.before(operation, input));
        let output: { output: unknown } | undefined;
        let failure: unknown;
        try {
          output = (await next(args)) as { output: unknown };
        } catch (error) {
          failure = error;
        }
        await this.timed(() =>
          this.account(
            operation,
            input,
            output?.output as Record<string, unknown>,
            before,
            failure,
          ),
        );
        if (failure !== undefined) throw failure;
        return output as never;
      },
      { step: "initialize", name: "costMeter" },
    );
  }

  private async timed<T>(work: () => Promise<T>): Promise<T> {
    const start = performance.now();
    try {
      return await work();
    } finally {
      this.totals.overheadMs += performance.now() - start;
    }
  }

  private async keyNames(table: string): Promise<string[]> {
    await this.describe(table);
    return this.keys.get(table) ?? [];
  }

  /** Key names and global secondary indexes of a table, described once. */
  private async describe(table: string): Promise<void> {
    if (this.keys.has(table)) return;
    const described = await this.side.send(new DescribeTableCommand({ TableName: table }));
    const keyNames = (described.Table?.KeySchema ?? []).map((key) => key.AttributeName as string);
    this.keys.set(table, keyNames);
    this.indexes.set(
      table,
      (described.Table?.GlobalSecondaryIndexes ?? []).map((index) => ({
        keys: [
          ...new Set([
            ...keyNames,
            ...(index.KeySchema ?? []).map((key) => key.AttributeName as string),
          ]),
        ],
        indexKeys: (index.KeySchema ?? []).map((key) => key.AttributeName as string),
        include:
          index.Projection?.ProjectionType === "ALL"
            ? "ALL"
            : (index.Projection?.NonKeyAttributes ?? []),
      })),
    );
  }

  /**
   * Write units a table's global secondary indexes add to a write that turned `before` into
   * `after` (undefined: absent): one index write per index whose projected item changed, billed
   * by the projected size, as DynamoDB bills index writes.
   */
  private async indexWriteUnits(
    table: string,
    before: Item | undefined,
    after: Item | undefined,
  ): Promise<number> {
    await this.describe(table);
    let units = 0;
    for (const index of this.indexes.get(table) ?? []) {
      const projected = (item: Item | undefined): Item | undefined => {
        if (item === undefined || index.indexKeys.some((key) => item[key] === undefined)) {
          return undefined;
        }
        if (index.include === "ALL") return item;
        const names = [...index.keys, ...index.include];
        return Object.fromEntries(
          names.filter((name) => item[name] !== undefined).map((name) => [name, item[name]]),
        ) as Item;
      };
      const [was, now] = [projected(before), projected(after)];
      if (was === undefined && now === undefined) continue;
      if (JSON.stringify(was) === JSON.stringify(now)) continue;
      units += writeUnits(Math.max(itemSize(was), itemSize(now)));
    }
    return units;
  }

  private async itemAt(table: string, key: Item): Promise<Item | undefined> {
    const result = await this.side.send(
      new GetItemCommand({ TableName: table, Key: key, ConsistentRead: true }),
    );
    return result.Item as Item | undefined;
  }

  private async keyOf(table: string, item: Item): Promise<Item> {
    const names = await this.keyNames(table);
    return Object.fromEntries(names.map((name) => [name, item[name] as AttributeValue]));
  }

  private async sizeOf(table: string, key: Item): Promise<number> {
    const result = await this.side.send(
      new GetItemCommand({ TableName: table, Key: key, ConsistentRead: true }),
    );
    return itemSize(result.Item);
  }

  /**
   * Sizes of the items a write may replace, read before it, and (PutItem, DeleteItem) the item
   * itself, for the indexes' writes. Per request: requests run concurrently.
   */
  private async before(operation: string, input: Record<string, unknown>): Promise<Before> {
    const sizes: number[] = [];
    let replaced: Item | undefined;
    const table = input.TableName as string;
    if (operation === "PutItemCommand" || operation === "DeleteItemCommand") {
      const key =
        operation === "PutItemCommand"
          ? await this.keyOf(table, input.Item as Item)
          : (input.Key as Item);
      replaced = await this.itemAt(table, key);
      sizes.push(itemSize(replaced));
    } else if (operation === "UpdateItemCommand") {
      sizes.push(await this.sizeOf(table, input.Key as Item));
    } else if (operation === "BatchWriteItemCommand") {
      for (const [name, requests] of Object.entries(
        input.RequestItems as Record<string, Array<Record<string, { Item?: Item; Key?: Item }>>>,
      )) {
        for (const request of requests) {
          const key = request.PutRequest?.Item
            ? await this.keyOf(name, request.PutRequest.Item)
            : (request.DeleteRequest?.Key as Item);
          sizes.push(await this.sizeOf(name, key));
        }
      }
    } else if (operation === "TransactWriteItemsCommand") {
      for (const entry of input.TransactItems as Array<Record<string, Record<string, unknown>>>) {
        const [kind, body] = Object.entries(entry)[0] as [string, Record<string, unknown>];
        const name = body.TableName as string;
        const key = kind === "Put" ? await this.keyOf(name, body.Item as Item) : (body.Key as Item);
        sizes.push(await this.sizeOf(name, key));
      }
    }
    return { sizes, replaced };
  }

  private count(table: string, cost: Partial<TableCost>, keyItem?: Item): void {
    this.totals.readUnits += cost.readUnits ?? 0;
    this.totals.writeUnits += cost.writeUnits ?? 0;
    add(this.totals.byTable, table, cost);
    const pk = keyItem?.pk?.S;
    if (pk !== undefined) add(this.totals.byKeyPrefix, `${table} ${pk.split("#")[0]}`, cost);
  }

  private async account(
    operation: string,
    input: Record<string, unknown>,
    output: Record<string, unknown> | undefined,
    { sizes: before, replaced }: Before,
    failure: unknown,
  ): Promise<void> {
    this.totals.requests++;
    this.totals.byOperation.set(operation, (this.totals.byOperation.get(operation) ?? 0) + 1);
    const table = input.TableName as string | undefined;
    if (table !== undefined) add(this.totals.byTable, table, { requests: 1 });
    const consistent = input.ConsistentRead === true;
    switch (operation) {
      case "GetItemCommand": {
        if (failure !== undefined) return;
        const projected = input.ProjectionExpression !== undefined;
        const size = projected
          ? await this.sizeOf(table as string, input.Key as Item)
          : itemSize(output?.Item as Item | undefined);
        this.count(table as string, { readUnits: readUnits(size, consistent) }, input.Key as Item);
        return;
      }
      case "BatchGetItemCommand": {
        if (failure !== undefined) return;
        const requested = input.RequestItems as Record<
          string,
          { Keys: Item[]; ConsistentRead?: boolean }
        >;
        const unprocessed = (output?.UnprocessedKeys ?? {}) as Record<string, { Keys: Item[] }>;
        for (const [name, request] of Object.entries(requested)) {
          add(this.totals.byTable, name, { requests: 1 });
          const skipped = new Set((unprocessed[name]?.Keys ?? []).map((k) => JSON.stringify(k)));
          for (const key of request.Keys) {
            if (skipped.has(JSON.stringify(key))) continue;
            const size = await this.sizeOf(name, key);
            this.count(name, { readUnits: readUnits(size, request.ConsistentRead === true) }, key);
          }
        }
        return;
      }
      case "QueryCommand":
      case "ScanCommand": {
        if (failure !== undefined) return;
        let items = (output?.Items ?? []) as Item[];
        if (
          input.FilterExpression !== undefined ||
          input.ProjectionExpression !== undefined ||
          input.Select !== undefined
        ) {
          // The same page, unfiltered and unprojected: what DynamoDB read.
          const key = referenced(input.KeyConditionExpression as string | undefined, input);
          const page = {
            TableName: table,
            ...(input.IndexName !== undefined ? { IndexName: input.IndexName as string } : {}),
            ...(input.KeyConditionExpression !== undefined
              ? { KeyConditionExpression: input.KeyConditionExpression as string }
              : {}),
            ...(key.names !== undefined ? { ExpressionAttributeNames: key.names } : {}),
            ...(key.values !== undefined ? { ExpressionAttributeValues: key.values } : {}),
            ...(input.Limit !== undefined ? { Limit: input.Limit as number } : {}),
            ...(input.ExclusiveStartKey !== undefined
              ? { ExclusiveStartKey: input.ExclusiveStartKey as Item }
              : {}),
            ConsistentRead: consistent,
          };
          const result = await this.side.send(
            operation === "QueryCommand"
              ? new QueryCommand(page as never)
              : new ScanCommand(page as never),
          );
          items = (result.Items ?? []) as Item[];
        }
        const bytes = items.reduce((n, item) => n + itemSize(item), 0);
        const values = input.ExpressionAttributeValues as Item | undefined;
        const pkValue = values !== undefined ? Object.values(values)[0] : undefined;
        this.count(
          table as string,
          { readUnits: readUnits(bytes, consistent) },
          pkValue?.S !== undefined ? { pk: pkValue } : undefined,
        );
        return;
      }
      case "PutItemCommand": {
        const after = itemSize(input.Item as Item);
        const indexes =
          failure === undefined
            ? await this.indexWriteUnits(table as string, replaced, input.Item as Item)
            : 0;
        this.count(
          table as string,
          { writeUnits: writeUnits(Math.max(before[0] ?? 0, after)) + indexes },
          input.Item as Item,
        );
        return;
      }
      case "UpdateItemCommand": {
        const after =
          failure === undefined ? await this.sizeOf(table as string, input.Key as Item) : 0;
        this.count(
          table as string,
          { writeUnits: writeUnits(Math.max(before[0] ?? 0, after)) },
          input.Key as Item,
        );
        return;
      }
      case "DeleteItemCommand": {
        const indexes =
          failure === undefined
            ? await this.indexWriteUnits(table as string, replaced, undefined)
            : 0;
        this.count(
          table as string,
          { writeUnits: writeUnits(before[0] ?? 0) + indexes },
          input.Key as Item,
        );
        return;
      }
      case "BatchWriteItemCommand": {
        if (failure !== undefined) return;
        const unprocessed = (output?.UnprocessedItems ?? {}) as Record<string, unknown[]>;
        let i = 0;
        for (const [name, requests] of Object.entries(
          input.RequestItems as Record<string, Array<Record<string, { Item?: Item; Key?: Item }>>>,
        )) {
          add(this.totals.byTable, name, { requests: 1 });
          const skipped = new Set((unprocessed[name] ?? []).map((r) => JSON.stringify(r)));
          for (const request of requests) {
            const prior = before[i++] ?? 0;
            if (skipped.has(JSON.stringify(request))) continue;
            const item = request.PutRequest?.Item;
            const size = item !== undefined ? Math.max(prior, itemSize(item)) : prior;
            this.count(name, { writeUnits: writeUnits(size) }, item ?? request.DeleteRequest?.Key);
          }
        }
        return;
      }
      case "TransactWriteItemsCommand": {
        let i = 0;
        for (const entry of input.TransactItems as Array<Record<string, Record<string, unknown>>>) {
          const [kind, body] = Object.entries(entry)[0] as [string, Record<string, unknown>];
          const name = body.TableName as string;
          const prior = before[i++] ?? 0;
          const key = kind === "Put" ? (body.Item as Item) : (body.Key as Item);
          let size = prior;
          if (kind === "Put") size = Math.max(prior, itemSize(body.Item as Item));
          if (kind === "Update" && failure === undefined) {
            size = Math.max(prior, await this.sizeOf(name, body.Key as Item));
          }
          add(this.totals.byTable, name, { requests: 1 });
          this.count(name, { writeUnits: 2 * writeUnits(size) }, key);
        }
        return;
      }
      default:
        return;
    }
  }
}
