import {
  type AttributeValue,
  BatchGetItemCommand,
  BatchWriteItemCommand,
  ConditionalCheckFailedException,
  DeleteItemCommand,
  type DynamoDBClient,
  GetItemCommand,
  PutItemCommand,
  QueryCommand,
  ScanCommand,
  type TransactWriteItem,
  TransactWriteItemsCommand,
  UpdateItemCommand,
} from "@aws-sdk/client-dynamodb";
import { inPool } from "../domain/records.ts";
import { fromAttributeMap, type PlainRecord, toAttributeMap } from "./attribute-values.ts";

/** BatchGetItem requests of one read in flight at once (each of up to 100 keys). */
const BATCH_GET_CONCURRENCY = 8;

/** Expression parts shared by every conditional request. */
export interface Expressions {
  readonly ConditionExpression?: string;
  readonly ExpressionAttributeNames?: Record<string, string>;
  readonly ExpressionAttributeValues?: PlainRecord;
}

export interface GetInput {
  readonly TableName: string;
  readonly Key: PlainRecord;
  readonly ConsistentRead?: boolean;
  readonly ProjectionExpression?: string;
  readonly ExpressionAttributeNames?: Record<string, string>;
}

export interface PutInput extends Expressions {
  readonly TableName: string;
  readonly Item: PlainRecord;
  readonly ReturnValues?: "ALL_OLD" | "NONE";
}

export interface UpdateInput extends Expressions {
  readonly TableName: string;
  readonly Key: PlainRecord;
  readonly UpdateExpression: string;
  readonly ReturnValues?: "ALL_NEW" | "ALL_OLD" | "NONE";
}

export interface DeleteInput extends Expressions {
  readonly TableName: string;
  readonly Key: PlainRecord;
  readonly ReturnValues?: "ALL_OLD" | "NONE";
}

export type TransactItem =
  | { readonly Put: PutInput }
  | { readonly Update: UpdateInput }
  | { readonly Delete: DeleteInput }
  | { readonly ConditionCheck: DeleteInput };

/**
 * Thrown for a failed condition. `found` is the item the condition failed on, when the engine
 * returned it (`ReturnValuesOnConditionCheckFailure: ALL_OLD`: DynamoDB, DynamoDB Local and moto
 * 5.2.1 do, at no read cost); undefined when there was no item or the engine returned none.
 */
export class ConditionFailed extends Error {
  constructor(readonly found: PlainRecord | undefined) {
    super("the condition of a write failed");
    this.name = "ConditionFailed";
  }
}

function expressions(input: Expressions) {
  return {
    ...(input.ConditionExpression !== undefined
      ? { ConditionExpression: input.ConditionExpression }
      : {}),
    ...(input.ExpressionAttributeNames !== undefined
      ? { ExpressionAttributeNames: input.ExpressionAttributeNames }
      : {}),
    ...(input.ExpressionAttributeValues !== undefined
      ? { ExpressionAttributeValues: toAttributeMap(input.ExpressionAttributeValues) }
      : {}),
  };
}

function conditionFailed(error: unknown): never {
  if (error instanceof ConditionalCheckFailedException) {
    throw new ConditionFailed(error.Item === undefined ? undefined : fromAttributeMap(error.Item));
  }
  throw error;
}

/** Options of {@link DynamoItemClient}. */
export interface DynamoItemClientOptions {
  /**
   * Ask for the item a failed condition found (`ReturnValuesOnConditionCheckFailure: ALL_OLD`)
   * so the caller need not read it again. @default true (false: the cost bench's baseline)
   */
  readonly returnOnConditionFailure?: boolean;
}

/**
 * Our DynamoDB item client over the low-level client: plain values in and out, like
 * `@aws-sdk/lib-dynamodb`'s DocumentClient, but with map keys treated as data (see
 * attribute-values.ts), and a failed condition surfaced as {@link ConditionFailed}. Named apart
 * from AWS's DocumentClient, whose semantics differ (decision 157).
 */
export class DynamoItemClient {
  private readonly onFailure: { ReturnValuesOnConditionCheckFailure?: "ALL_OLD" };

  constructor(
    readonly client: DynamoDBClient,
    options: DynamoItemClientOptions = {},
  ) {
    this.onFailure =
      options.returnOnConditionFailure === false
        ? {}
        : { ReturnValuesOnConditionCheckFailure: "ALL_OLD" };
  }

  async get(input: GetInput): Promise<PlainRecord | undefined> {
    const result = await this.client.send(
      new GetItemCommand({ ...input, Key: toAttributeMap(input.Key) }),
    );
    return result.Item === undefined ? undefined : fromAttributeMap(result.Item);
  }

  /** Returns the item it replaced when asked with `ReturnValues: "ALL_OLD"`. */
  async put(input: PutInput): Promise<PlainRecord | undefined> {
    try {
      const result = await this.client.send(
        new PutItemCommand({
          TableName: input.TableName,
          Item: toAttributeMap(input.Item),
          ...expressions(input),
          ...this.failureReturn(input),
          ...(input.ReturnValues !== undefined ? { ReturnValues: input.ReturnValues } : {}),
        }),
      );
      return result.Attributes === undefined ? undefined : fromAttributeMap(result.Attributes);
    } catch (error) {
      conditionFailed(error);
    }
  }

  /** Returns the attributes asked for with `ReturnValues`. */
  async update(input: UpdateInput): Promise<PlainRecord | undefined> {
    try {
      const result = await this.client.send(
        new UpdateItemCommand({
          TableName: input.TableName,
          Key: toAttributeMap(input.Key),
          UpdateExpression: input.UpdateExpression,
          ...expressions(input),
          ...this.failureReturn(input),
          ...(input.ReturnValues !== undefined ? { ReturnValues: input.ReturnValues } : {}),
        }),
      );
      return result.Attributes === undefined ? undefined : fromAttributeMap(result.Attributes);
    } catch (error) {
      conditionFailed(error);
    }
  }

  /** Returns the item it deleted when asked with `ReturnValues: "ALL_OLD"`. */
  async delete(input: DeleteInput): Promise<PlainRecord | undefined> {
    try {
      const result = await this.client.send(
        new DeleteItemCommand({
          TableName: input.TableName,
          Key: toAttributeMap(input.Key),
          ...expressions(input),
          ...this.failureReturn(input),
          ...(input.ReturnValues !== undefined ? { ReturnValues: input.ReturnValues } : {}),
        }),
      );
      return result.Attributes === undefined ? undefined : fromAttributeMap(result.Attributes);
    } catch (error) {
      conditionFailed(error);
    }
  }

  /** Only a conditional request can fail its condition. */
  private failureReturn(input: Expressions) {
    return input.ConditionExpression === undefined ? {} : this.onFailure;
  }

  /**
   * Throws the SDK's `TransactionCanceledException` when the transaction is cancelled; each
   * failed condition's reason carries the item it found (see {@link DynamoItemClientOptions}).
   */
  async transactWrite(items: readonly TransactItem[]): Promise<void> {
    const TransactItems: TransactWriteItem[] = items.map((item) => {
      if ("Put" in item) {
        const { TableName, Item } = item.Put; // ReturnValues does not apply in a transaction
        return {
          Put: {
            TableName,
            Item: toAttributeMap(Item),
            ...expressions(item.Put),
            ...this.failureReturn(item.Put),
          },
        };
      }
      if ("Update" in item) {
        const { TableName, Key, UpdateExpression } = item.Update;
        return {
          Update: {
            TableName,
            Key: toAttributeMap(Key),
            UpdateExpression,
            ...expressions(item.Update),
            ...this.failureReturn(item.Update),
          },
        };
      }
      if ("Delete" in item) {
        const { TableName, Key } = item.Delete;
        return {
          Delete: {
            TableName,
            Key: toAttributeMap(Key),
            ...expressions(item.Delete),
            ...this.failureReturn(item.Delete),
          },
        };
      }
      const { TableName, Key } = item.ConditionCheck;
      const parts = expressions(item.ConditionCheck);
      return {
        ConditionCheck: {
          TableName,
          Key: toAttributeMap(Key),
          ...parts,
          ConditionExpression: parts.ConditionExpression ?? "attribute_exists(pk)",
          ...this.onFailure,
        },
      };
    });
    await this.client.send(new TransactWriteItemsCommand({ TransactItems }));
  }

  /**
   * Reads keys of one table, 100 per request ({@link BATCH_GET_CONCURRENCY} requests at once),
   * retrying unprocessed keys with backoff. Items
   * come back in no particular order; missing keys are simply absent.
   */
  async batchGet(
    table: string,
    keys: readonly PlainRecord[],
    options: { readonly consistent?: boolean; readonly projection?: string } = {},
  ): Promise<PlainRecord[]> {
    const out: PlainRecord[] = [];
    const chunks: PlainRecord[][] = [];
    for (let i = 0; i < keys.length; i += 100) chunks.push(keys.slice(i, i + 100));
    // A few requests at once: a pass that reads the claims of thousands of services does not
    // wait for them one request after another.
    await inPool(chunks, BATCH_GET_CONCURRENCY, async (chunk) => {
      let pending = chunk.map((key) => toAttributeMap(key));
      for (let round = 0; pending.length > 0; round++) {
        if (round > 10) throw new Error(`BatchGetItem on ${table}: keys still unprocessed`);
        if (round > 0) await pause(round);
        const result = await this.client.send(
          new BatchGetItemCommand({
            RequestItems: {
              [table]: {
                Keys: pending,
                ConsistentRead: options.consistent ?? true,
                ...(options.projection !== undefined
                  ? { ProjectionExpression: options.projection }
                  : {}),
              },
            },
          }),
        );
        for (const item of result.Responses?.[table] ?? []) out.push(fromAttributeMap(item));
        pending = result.UnprocessedKeys?.[table]?.Keys ?? [];
      }
    });
    return out;
  }

  /** Writes puts and deletes to one table, 25 per request, retrying unprocessed items. */
  async batchWrite(
    table: string,
    writes: ReadonlyArray<{ readonly put: PlainRecord } | { readonly delete: PlainRecord }>,
  ): Promise<void> {
    for (let i = 0; i < writes.length; i += 25) {
      let pending = writes
        .slice(i, i + 25)
        .map((write) =>
          "put" in write
            ? { PutRequest: { Item: toAttributeMap(write.put) } }
            : { DeleteRequest: { Key: toAttributeMap(write.delete) } },
        );
      for (let round = 0; pending.length > 0; round++) {
        if (round > 10) throw new Error(`BatchWriteItem on ${table}: items still unprocessed`);
        if (round > 0) await pause(round);
        const result = await this.client.send(
          new BatchWriteItemCommand({ RequestItems: { [table]: pending } }),
        );
        pending = (result.UnprocessedItems?.[table] ?? []) as typeof pending;
      }
    }
  }

  /** One page of a Query; the caller pages with `start`. */
  async queryPage(input: {
    readonly TableName: string;
    readonly KeyConditionExpression: string;
    readonly ExpressionAttributeNames?: Record<string, string>;
    readonly ExpressionAttributeValues: PlainRecord;
    readonly ConsistentRead?: boolean;
    readonly Limit?: number;
    readonly ProjectionExpression?: string;
    readonly start?: Record<string, AttributeValue>;
  }): Promise<{ items: PlainRecord[]; next: Record<string, AttributeValue> | undefined }> {
    const { start, ExpressionAttributeValues, ...rest } = input;
    const result = await this.client.send(
      new QueryCommand({
        ...rest,
        ExpressionAttributeValues: toAttributeMap(ExpressionAttributeValues),
        ...(start !== undefined ? { ExclusiveStartKey: start } : {}),
      }),
    );
    return { items: (result.Items ?? []).map(fromAttributeMap), next: result.LastEvaluatedKey };
  }

  /**
   * One page of a strongly consistent Scan (the index builder's, the checks' and the repair
   * sweep's read only; never on the event path).
   */
  async scanPage(
    table: string,
    start: Record<string, AttributeValue> | undefined,
    options: {
      readonly Limit?: number;
      readonly ProjectionExpression?: string;
      readonly ExpressionAttributeNames?: Record<string, string>;
      readonly ConsistentRead?: boolean;
    } = {},
  ): Promise<{ items: PlainRecord[]; next: Record<string, AttributeValue> | undefined }> {
    const result = await this.client.send(
      new ScanCommand({
        TableName: table,
        ConsistentRead: true,
        ...options,
        ...(start !== undefined ? { ExclusiveStartKey: start } : {}),
      }),
    );
    return { items: (result.Items ?? []).map(fromAttributeMap), next: result.LastEvaluatedKey };
  }
}

function pause(round: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, Math.min(1000, 20 * 2 ** round)));
}
