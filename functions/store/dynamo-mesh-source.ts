import {
  type AttributeValue,
  type DynamoDBClient,
  GetItemCommand,
  paginateQuery,
  paginateScan,
  ScanCommand,
} from "@aws-sdk/client-dynamodb";
import type { DataplaneKey } from "../domain/contributions.ts";
import type { InputIssue } from "../domain/errors.ts";
import type { DataplaneRecord } from "../domain/types.ts";
import { toPlain } from "./attribute-values.ts";
import type { MeshSource, Page, SourceRead } from "./ports.ts";

/**
 * Reads the input tables, statelessly. Dataplanes of a mesh: one strongly consistent Query of
 * its partition. Ingresses: a filtered Scan of the dataplanes table (a batch shares one).
 * Bad-input issues name the configured (physical) table.
 */
export class DynamoMeshSource implements MeshSource {
  constructor(
    private readonly client: DynamoDBClient,
    private readonly tables: { readonly meshes: string; readonly dataplanes: string },
  ) {}

  async meshExists(mesh: string): Promise<boolean> {
    const result = await this.client.send(
      new GetItemCommand({
        TableName: this.tables.meshes,
        Key: { name: { S: mesh } },
        ConsistentRead: true,
        ProjectionExpression: "#n",
        ExpressionAttributeNames: { "#n": "name" },
      }),
    );
    return result.Item !== undefined;
  }

  async dataplanesOf(mesh: string, consistent = true): Promise<SourceRead> {
    const pages = paginateQuery(
      { client: this.client },
      {
        TableName: this.tables.dataplanes,
        KeyConditionExpression: "#m = :m",
        ExpressionAttributeNames: { "#m": "mesh" },
        ExpressionAttributeValues: { ":m": { S: mesh } },
        ConsistentRead: consistent,
      },
    );
    return await this.collect(pages);
  }

  async ingresses(consistent = true): Promise<SourceRead> {
    const pages = paginateScan(
      { client: this.client },
      {
        TableName: this.tables.dataplanes,
        FilterExpression: "attribute_exists(#n.#i)",
        ExpressionAttributeNames: { "#n": "networking", "#i": "ingress" },
        ConsistentRead: consistent,
      },
    );
    return await this.collect(pages);
  }

  async dataplanes(keys: readonly DataplaneKey[]): Promise<SourceRead> {
    const items = await Promise.all(
      keys.map(async (key) => {
        const result = await this.client.send(
          new GetItemCommand({
            TableName: this.tables.dataplanes,
            Key: { mesh: { S: key.mesh }, name: { S: key.name } },
            ConsistentRead: true,
          }),
        );
        return result.Item;
      }),
    );
    return this.decode(items.filter((item) => item !== undefined));
  }

  async *allDataplanes(): AsyncIterable<SourceRead> {
    const pages = paginateScan(
      { client: this.client },
      { TableName: this.tables.dataplanes, ConsistentRead: true },
    );
    for await (const page of pages) yield this.decode(page.Items ?? []);
  }

  async dataplanePage(
    after: string | undefined,
    limit: number,
  ): Promise<SourceRead & { readonly next: string | undefined }> {
    const start = after === undefined ? undefined : (JSON.parse(after) as [string, string]);
    const result = await this.client.send(
      new ScanCommand({
        TableName: this.tables.dataplanes,
        ConsistentRead: true,
        Limit: limit,
        ...(start !== undefined
          ? { ExclusiveStartKey: { mesh: { S: start[0] }, name: { S: start[1] } } }
          : {}),
      }),
    );
    const last = result.LastEvaluatedKey;
    const next =
      last?.mesh?.S !== undefined && last.name?.S !== undefined
        ? JSON.stringify([last.mesh.S, last.name.S])
        : undefined;
    return { ...this.decode(result.Items ?? []), next };
  }

  async meshPage(
    after: string | undefined,
    limit: number,
    consistent = true,
  ): Promise<Page<string>> {
    const result = await this.client.send(
      new ScanCommand({
        TableName: this.tables.meshes,
        ConsistentRead: consistent,
        Limit: limit,
        ProjectionExpression: "#n",
        ExpressionAttributeNames: { "#n": "name" },
        ...(after !== undefined ? { ExclusiveStartKey: { name: { S: after } } } : {}),
      }),
    );
    const items = (result.Items ?? []).flatMap((item) =>
      item.name?.S === undefined ? [] : [item.name.S],
    );
    return { items, next: result.LastEvaluatedKey?.name?.S };
  }

  private async collect(
    pages: AsyncIterable<{ Items?: Record<string, AttributeValue>[] }>,
  ): Promise<SourceRead> {
    const records: DataplaneRecord[] = [];
    const issues: InputIssue[] = [];
    for await (const page of pages) {
      const read = this.decode(page.Items ?? []);
      records.push(...read.records);
      issues.push(...read.issues);
    }
    return { records, issues };
  }

  /** Items as dataplane records; an undecodable one is kept without content and reported. */
  private decode(items: readonly Record<string, AttributeValue>[]): SourceRead {
    const records: DataplaneRecord[] = [];
    const issues: InputIssue[] = [];
    for (const item of items) {
      const mesh = item.mesh?.S ?? "";
      const name = item.name?.S ?? "";
      try {
        records.push({ mesh, name, item: toPlain(item) });
      } catch (error) {
        issues.push({
          table: this.tables.dataplanes,
          key: { mesh, name },
          field: "(item)",
          reason: `undecodable: ${error instanceof Error ? error.message : String(error)}`,
        });
        records.push({ mesh, name, item: undefined });
      }
    }
    return { records, issues };
  }
}
