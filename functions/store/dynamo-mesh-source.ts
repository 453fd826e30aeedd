import {
  type AttributeValue,
  type DynamoDBClient,
  GetItemCommand,
  paginateQuery,
  paginateScan,
  ScanCommand,
} from "@aws-sdk/client-dynamodb";
import type { ContributorKey, ContributorKind } from "../domain/contributions.ts";
import type { InputIssue } from "../domain/errors.ts";
import { EXTERNAL_SERVICE_TYPE } from "../domain/external-service.ts";
import type { DataplaneRecord } from "../domain/types.ts";
import { toPlain } from "./attribute-values.ts";
import type { MeshSource, Page, SourceRead } from "./ports.ts";

/**
 * Reads the input tables, statelessly. Dataplanes of a mesh: one strongly consistent Query of
 * its partition. Ingresses: a filtered Scan of the dataplanes table (a batch shares one).
 * Bad-input issues name the configured (physical) table.
 */
/** Segments of the Scan that finds the zone ingresses, read at once (a parallel Scan). */
export const INGRESS_SCAN_SEGMENTS = 8;

export class DynamoMeshSource implements MeshSource {
  constructor(
    private readonly client: DynamoDBClient,
    private readonly tables: {
      readonly meshes: string;
      readonly dataplanes: string;
      readonly externalServices?: string | undefined;
    },
  ) {}

  get externalServices(): boolean {
    return this.tables.externalServices !== undefined;
  }

  async externalServicesOf(mesh: string, consistent = true): Promise<SourceRead> {
    const table = this.tables.externalServices;
    if (table === undefined) return { records: [], issues: [] };
    const pages = paginateQuery(
      { client: this.client },
      {
        TableName: table,
        KeyConditionExpression: "#m = :m",
        ExpressionAttributeNames: { "#m": "mesh" },
        ExpressionAttributeValues: { ":m": { S: mesh } },
        ConsistentRead: consistent,
      },
    );
    return await this.collect(pages, "external-service");
  }

  private tableOf(kind: ContributorKind | undefined): string {
    return kind === "external-service"
      ? (this.tables.externalServices ?? this.tables.dataplanes)
      : this.tables.dataplanes;
  }

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

  /**
   * Every zone ingress: a Scan of the whole dataplanes table (a filter does not reduce what is
   * read), in {@link INGRESS_SCAN_SEGMENTS} segments at once. Billed the same as one sequential
   * Scan; at 100,000 dataplanes (54 pages of 1 MB) it is what bounds a sweep invocation's first
   * step, and on DynamoDB Local it took 290 s in one segment against 23 s in eight.
   */
  async ingresses(consistent = true): Promise<SourceRead> {
    const segments = await Promise.all(
      Array.from({ length: INGRESS_SCAN_SEGMENTS }, (_, segment) =>
        this.collect(
          paginateScan(
            { client: this.client },
            {
              TableName: this.tables.dataplanes,
              FilterExpression: "attribute_exists(#n.#i)",
              ExpressionAttributeNames: { "#n": "networking", "#i": "ingress" },
              ConsistentRead: consistent,
              Segment: segment,
              TotalSegments: INGRESS_SCAN_SEGMENTS,
            },
          ),
        ),
      ),
    );
    return {
      records: segments.flatMap((read) => read.records),
      issues: segments.flatMap((read) => read.issues),
    };
  }

  async dataplanes(keys: readonly ContributorKey[]): Promise<SourceRead> {
    const read = await Promise.all(
      keys.map(async (key) => {
        if (key.kind !== undefined && this.tables.externalServices === undefined) return [];
        const result = await this.client.send(
          new GetItemCommand({
            TableName: this.tableOf(key.kind),
            Key: { mesh: { S: key.mesh }, name: { S: key.name } },
            ConsistentRead: true,
          }),
        );
        return result.Item === undefined ? [] : [{ item: result.Item, kind: key.kind }];
      }),
    );
    const records: DataplaneRecord[] = [];
    const issues: InputIssue[] = [];
    for (const { item, kind } of read.flat()) {
      const one = this.decode([item], kind);
      records.push(...one.records);
      issues.push(...one.issues);
    }
    return { records, issues };
  }

  async *allDataplanes(): AsyncIterable<SourceRead> {
    const kinds: (ContributorKind | undefined)[] = [undefined];
    if (this.tables.externalServices !== undefined) kinds.push("external-service");
    for (const kind of kinds) {
      const pages = paginateScan(
        { client: this.client },
        { TableName: this.tableOf(kind), ConsistentRead: true },
      );
      for await (const page of pages) yield this.decode(page.Items ?? [], kind);
    }
  }

  /**
   * Positions: `[mesh, name]` in the dataplanes table, then `[mesh, name, "ExternalService"]`
   * (or `["", "", "ExternalService"]`: its start) in the external-services table.
   */
  async dataplanePage(
    after: string | undefined,
    limit: number,
  ): Promise<SourceRead & { readonly next: string | undefined }> {
    const start = after === undefined ? undefined : (JSON.parse(after) as string[]);
    const kind: ContributorKind | undefined =
      start !== undefined && start.length === 3 ? "external-service" : undefined;
    const from =
      start !== undefined && start[0] !== ""
        ? { mesh: String(start[0]), name: String(start[1]) }
        : undefined;
    const result = await this.client.send(
      new ScanCommand({
        TableName: this.tableOf(kind),
        ConsistentRead: true,
        Limit: limit,
        ...(from !== undefined
          ? { ExclusiveStartKey: { mesh: { S: from.mesh }, name: { S: from.name } } }
          : {}),
      }),
    );
    const last = result.LastEvaluatedKey;
    const tail = kind === undefined ? [] : [EXTERNAL_SERVICE_TYPE];
    let next =
      last?.mesh?.S !== undefined && last.name?.S !== undefined
        ? JSON.stringify([last.mesh.S, last.name.S, ...tail])
        : undefined;
    if (next === undefined && kind === undefined && this.tables.externalServices !== undefined) {
      next = JSON.stringify(["", "", EXTERNAL_SERVICE_TYPE]);
    }
    return { ...this.decode(result.Items ?? [], kind), next };
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
    kind?: ContributorKind,
  ): Promise<SourceRead> {
    const records: DataplaneRecord[] = [];
    const issues: InputIssue[] = [];
    for await (const page of pages) {
      const read = this.decode(page.Items ?? [], kind);
      records.push(...read.records);
      issues.push(...read.issues);
    }
    return { records, issues };
  }

  /** Items as dataplane records; an undecodable one is kept without content and reported. */
  private decode(
    items: readonly Record<string, AttributeValue>[],
    kind?: ContributorKind,
  ): SourceRead {
    const records: DataplaneRecord[] = [];
    const issues: InputIssue[] = [];
    for (const item of items) {
      const mesh = item.mesh?.S ?? "";
      const name = item.name?.S ?? "";
      const key = kind === undefined ? { mesh, name } : { mesh, name, kind };
      try {
        records.push({ ...key, item: toPlain(item) });
      } catch (error) {
        issues.push({
          table: this.tableOf(kind),
          key: { mesh, name },
          field: "(item)",
          reason: `undecodable: ${error instanceof Error ? error.message : String(error)}`,
        });
        records.push({ ...key, item: undefined });
      }
    }
    return { records, issues };
  }
}
