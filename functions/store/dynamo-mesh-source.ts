import {
  type AttributeValue,
  type DynamoDBClient,
  GetItemCommand,
  paginateQuery,
  paginateScan,
} from "@aws-sdk/client-dynamodb";
import type { InputIssue } from "../domain/errors.ts";
import type { DataplaneRecord } from "../domain/types.ts";
import { toPlain } from "./attribute-values.ts";
import type { MeshSource } from "./ports.ts";

/**
 * Reads the input tables. Dataplanes of a mesh: one strongly consistent Query of its
 * partition. Ingresses: a filtered Scan, done at most once per batch (the result is shared by
 * every mesh the batch touches; a later change to an ingress brings its own stream record).
 */
export class DynamoMeshSource implements MeshSource {
  private ingresses: Promise<DataplaneRecord[]> | undefined;
  private issues: InputIssue[] = [];

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

  async dataplanesOf(mesh: string): Promise<DataplaneRecord[]> {
    const records: DataplaneRecord[] = [];
    const pages = paginateQuery(
      { client: this.client },
      {
        TableName: this.tables.dataplanes,
        KeyConditionExpression: "#m = :m",
        ExpressionAttributeNames: { "#m": "mesh" },
        ExpressionAttributeValues: { ":m": { S: mesh } },
        ConsistentRead: true,
      },
    );
    for await (const page of pages) {
      for (const item of page.Items ?? []) records.push(this.decode(item));
    }
    return records;
  }

  ingressesFor(_mesh: string): Promise<DataplaneRecord[]> {
    this.ingresses ??= this.scanIngresses();
    return this.ingresses;
  }

  refresh(): void {
    this.ingresses = undefined;
  }

  drainIssues(): InputIssue[] {
    const issues = this.issues;
    this.issues = [];
    return issues;
  }

  private async scanIngresses(): Promise<DataplaneRecord[]> {
    const records: DataplaneRecord[] = [];
    const pages = paginateScan(
      { client: this.client },
      {
        TableName: this.tables.dataplanes,
        FilterExpression: "attribute_exists(#n.#i)",
        ExpressionAttributeNames: { "#n": "networking", "#i": "ingress" },
        ConsistentRead: true,
      },
    );
    for await (const page of pages) {
      for (const item of page.Items ?? []) records.push(this.decode(item));
    }
    return records;
  }

  private decode(item: Record<string, AttributeValue>): DataplaneRecord {
    const mesh = item.mesh?.S ?? "";
    const name = item.name?.S ?? "";
    try {
      return { mesh, name, item: toPlain(item) };
    } catch (error) {
      this.issues.push({
        table: this.tables.dataplanes,
        key: { mesh, name },
        field: "(item)",
        reason: `undecodable: ${error instanceof Error ? error.message : String(error)}`,
      });
      return { mesh, name, item: undefined };
    }
  }
}
