/**
 * The reader's version probe (docs/readers.md, "Costs"): which meshes exist and at which
 * `version` and `incarnation`, read from the table's `versions` index (one paged Scan, or one
 * Query per listed mesh) or, when the index cannot serve (strongly consistent reads, `probe:
 * "table"`, a table without the index, a caller denied it), from the table itself projecting
 * the same three attributes (a Scan, or a GetItem per listed mesh).
 */

import {
  type AttributeValue,
  type DynamoDBClient,
  GetItemCommand,
  QueryCommand,
  ScanCommand,
} from "@aws-sdk/client-dynamodb";
import { inPool } from "../domain/records.ts";
import { fromAttributeMap, type PlainRecord } from "../store/attribute-values.ts";
import { VERSIONS_INDEX } from "../store/table-definitions.ts";
import { readerErrorOf } from "./errors.ts";
import type { MalformedItem } from "./snapshot.ts";

/** Why the probe reads the table instead of the `versions` index. */
export interface ProbeFallback {
  readonly table: string;
  readonly index: string;
  readonly reason: "index-missing" | "access-denied";
  /** The error DynamoDB returned for the index request (name: message). */
  readonly error: string;
}

/** What the probe compares: the item's `version` and `incarnation`, as stored. */
export type Probe = string;

export function probeOf(raw: PlainRecord): Probe {
  const version = typeof raw.version === "number" ? raw.version : String(raw.version);
  return JSON.stringify([version, typeof raw.incarnation === "string" ? raw.incarnation : ""]);
}

const PROBE_PROJECTION = {
  ProjectionExpression: "#m, #v, #i",
  ExpressionAttributeNames: { "#m": "mesh", "#v": "version", "#i": "incarnation" },
} as const;

export function defaultProbeFallback(fallback: ProbeFallback): void {
  process.stderr.write(
    `${JSON.stringify({
      level: "WARN",
      message: "VIP reader: probing the table instead of its versions index",
      ...fallback,
    })}\n`,
  );
}

export interface VersionProbeOptions {
  readonly client: DynamoDBClient;
  readonly table: string;
  readonly consistent: boolean;
  /** Probe the `versions` index first (false: the table, always). */
  readonly viaIndex: boolean;
  /** Requests in flight at once when probing listed meshes. */
  readonly concurrency: number;
  readonly onProbeFallback: (fallback: ProbeFallback) => void;
  /** An entry without a mesh name. */
  readonly onMalformed: (item: MalformedItem) => void;
}

/** The meshes found and their probes, and the requests it took. */
export interface ProbeResult {
  readonly probes: Map<string, Probe>;
  readonly requests: number;
}

export class VersionProbe {
  /** Probe the `versions` index (false once the table turned out not to have it). */
  private viaIndex: boolean;

  constructor(private readonly options: VersionProbeOptions) {
    this.viaIndex = options.viaIndex;
  }

  /** Every mesh of the table (undefined), or only the listed meshes. */
  run(meshes: readonly string[] | undefined): Promise<ProbeResult> {
    return meshes === undefined ? this.all() : this.listed(meshes);
  }

  /**
   * Runs a probe on the `versions` index. A table created before the index existed (the
   * request fails naming the index), or a caller allowed the table but not the index
   * (AccessDenied, e.g. a cross-account grant on the table ARN only), is probed on the table
   * itself from then on, reported once to `onProbeFallback`. If the table is denied too, that
   * error is the refresh's.
   */
  private async request<T>(operation: string, request: (index: boolean) => Promise<T>) {
    const { table } = this.options;
    if (this.viaIndex) {
      try {
        return await request(true);
      } catch (error) {
        const name = error instanceof Error ? error.name : "";
        const message = error instanceof Error ? error.message : "";
        const missing = name === "ValidationException" && /index/i.test(message);
        const denied = name === "AccessDeniedException";
        if (!missing && !denied) throw readerErrorOf(error, table, operation);
        if (this.viaIndex) {
          this.viaIndex = false;
          try {
            this.options.onProbeFallback({
              table,
              index: VERSIONS_INDEX.name,
              reason: denied ? "access-denied" : "index-missing",
              error: `${name}: ${message}`,
            });
          } catch {
            // A reporting callback must not break the reader.
          }
        }
      }
    }
    try {
      return await request(false);
    } catch (error) {
      throw readerErrorOf(error, table, operation);
    }
  }

  private async all(): Promise<ProbeResult> {
    const { client, table, consistent } = this.options;
    const probes = new Map<string, Probe>();
    let start: Record<string, AttributeValue> | undefined;
    let requests = 0;
    do {
      const page = await this.request("Scan", (index) =>
        client.send(
          new ScanCommand({
            TableName: table,
            ...(index ? { IndexName: VERSIONS_INDEX.name } : { ConsistentRead: consistent }),
            ...PROBE_PROJECTION,
            ...(start !== undefined ? { ExclusiveStartKey: start } : {}),
          }),
        ),
      );
      requests++;
      for (const item of page.Items ?? []) this.add(probes, fromAttributeMap(item));
      start = page.LastEvaluatedKey;
    } while (start !== undefined);
    return { probes, requests };
  }

  private async listed(meshes: readonly string[]): Promise<ProbeResult> {
    const { client, table, consistent } = this.options;
    const probes = new Map<string, Probe>();
    await inPool(meshes, this.options.concurrency, async (mesh) => {
      const item = await this.request("GetItem", async (index) => {
        if (!index) {
          const result = await client.send(
            new GetItemCommand({
              TableName: table,
              Key: { mesh: { S: mesh } },
              ConsistentRead: consistent,
              ...PROBE_PROJECTION,
            }),
          );
          return result.Item;
        }
        const result = await client.send(
          new QueryCommand({
            TableName: table,
            IndexName: VERSIONS_INDEX.name,
            KeyConditionExpression: "#m = :m",
            ExpressionAttributeValues: { ":m": { S: mesh } },
            ...PROBE_PROJECTION,
          }),
        );
        return result.Items?.[0];
      });
      if (item !== undefined) this.add(probes, fromAttributeMap(item));
    });
    return { probes, requests: meshes.length };
  }

  private add(probes: Map<string, Probe>, raw: PlainRecord): void {
    if (typeof raw.mesh !== "string" || raw.mesh === "") {
      this.options.onMalformed({
        mesh: undefined,
        version: undefined,
        reason: "no mesh name (key `mesh`)",
      });
      return;
    }
    probes.set(raw.mesh, probeOf(raw));
  }
}

export { inPool };
