import { randomUUID } from "node:crypto";
import { DynamoDBClient, type DynamoDBClientConfig } from "@aws-sdk/client-dynamodb";
import type { DynamoDBBatchResponse, DynamoDBStreamEvent } from "aws-lambda";
import { isAllocatorError } from "../domain/errors.ts";
import { DocumentClient } from "../store/document-client.ts";
import { DynamoClaimStore } from "../store/dynamo-claim-store.ts";
import { DynamoMeshSource } from "../store/dynamo-mesh-source.ts";
import { DynamoVipItemStore } from "../store/dynamo-vip-item-store.ts";
import { compareSequenceNumbers, decodeRecord } from "../store/stream-records.ts";
import { AddressFinder } from "./address-finder.ts";
import type { AllocatorConfig } from "./config.ts";
import { PowertoolsTelemetry } from "./powertools-telemetry.ts";
import { flushFinder, type MeshOutcome, reconcileMesh } from "./reconcile-mesh.ts";
import type { Telemetry } from "./telemetry.ts";
import { METRIC } from "./telemetry-names.ts";

/** What Lambda (or the local poller) calls with a batch of stream records from either table. */
export type StreamHandler = (event: DynamoDBStreamEvent) => Promise<DynamoDBBatchResponse>;

export interface StreamHandlerOptions {
  readonly telemetry?: Telemetry;
  readonly client?: DynamoDBClient;
  /** Meshes reconciled at once within one invocation. */
  readonly concurrency?: number;
  readonly now?: () => number;
  /** Called with each mesh's outcome (the local CLI prints them). */
  readonly onOutcome?: (outcome: MeshOutcome) => void;
}

/** Builds the SDK client for the configured endpoint (unset = real AWS). */
export function createDynamoClient(config: AllocatorConfig, extra: DynamoDBClientConfig = {}) {
  return new DynamoDBClient({
    ...(config.endpoint !== undefined ? { endpoint: config.endpoint } : {}),
    maxAttempts: 5,
    ...extra,
  });
}

/**
 * The allocator: groups a batch's records by the meshes they touch, reconciles each touched
 * mesh once, and reports back the lowest sequence number among the records of meshes that
 * failed, so the event source retries from there (re-delivery is harmless: reconcile is
 * idempotent). Bad records are logged and skipped; they never fail the batch.
 */
export function createStreamHandler(
  config: AllocatorConfig,
  options: StreamHandlerOptions = {},
): StreamHandler {
  const telemetry = options.telemetry ?? new PowertoolsTelemetry();
  const client = options.client ?? createDynamoClient(config);
  const doc = new DocumentClient(client);
  const vipItems = new DynamoVipItemStore(doc, config.tables.vips);
  const claims = new DynamoClaimStore(doc, config.tables.claims, randomUUID);
  const now = options.now ?? Date.now;
  const concurrency = Math.max(1, options.concurrency ?? 4);

  return async (event) => {
    try {
      const byMesh = new Map<string, string[]>();
      let oldest: number | undefined;
      const records: unknown = event?.Records;
      if (!Array.isArray(records)) {
        telemetry.badInput({
          table: "(unknown)",
          key: {},
          field: "Records",
          reason: event === null || event === undefined ? "no event" : "missing or not a list",
        });
        return { batchItemFailures: [] };
      }
      for (const record of records as DynamoDBStreamEvent["Records"]) {
        const decoded = decodeRecord(record, config.tables);
        if (!decoded.ok) {
          telemetry.badInput(decoded.issue);
          continue;
        }
        if (decoded.createdAtMs !== undefined) {
          oldest = Math.min(oldest ?? decoded.createdAtMs, decoded.createdAtMs);
        }
        for (const mesh of decoded.meshes) {
          const list = byMesh.get(mesh) ?? [];
          list.push(decoded.sequenceNumber);
          byMesh.set(mesh, list);
        }
      }
      if (oldest !== undefined) {
        telemetry.metric(METRIC.streamLagMs, "Milliseconds", Math.max(0, now() - oldest));
      }

      const source = new DynamoMeshSource(client, config.tables);
      // One address finder for the whole invocation: its meshes never race each other for
      // an address, and the cursor is written once.
      const addresses = new AddressFinder(
        claims,
        config.pool,
        now(),
        config.quarantineSeconds,
        Math.random,
      );
      const deps = {
        addresses,
        source,
        vipItems,
        claims,
        pool: config.pool,
        quarantineSeconds: config.quarantineSeconds,
        maxAttempts: config.maxWriteAttempts,
        telemetry,
        now,
        newId: randomUUID,
        sleep: (ms: number) => new Promise<void>((resolve) => setTimeout(resolve, ms)),
        random: Math.random,
      };
      const failedSequences: string[] = [];
      const meshes = [...byMesh.keys()].sort();
      let next = 0;
      const worker = async (): Promise<void> => {
        while (next < meshes.length) {
          const mesh = meshes[next++] as string;
          try {
            const result = await reconcileMesh(mesh, deps);
            options.onOutcome?.(result);
          } catch (error) {
            telemetry.metric(METRIC.meshFailures, "Count", 1);
            telemetry.error("mesh failed; its records are reported for retry", {
              mesh,
              code: isAllocatorError(error) ? error.code : "UNEXPECTED",
              error: error instanceof Error ? `${error.name}: ${error.message}` : String(error),
            });
            failedSequences.push(...(byMesh.get(mesh) ?? []));
          }
        }
      };
      await Promise.all(Array.from({ length: Math.min(concurrency, meshes.length) }, worker));
      try {
        await flushFinder(addresses, deps);
      } catch (error) {
        // The cursor is only where the next probe starts; the claims are already safe.
        telemetry.warn("could not advance the pool cursor", {
          error: error instanceof Error ? error.message : String(error),
        });
      }

      if (failedSequences.length === 0) return { batchItemFailures: [] };
      const lowest = failedSequences.reduce((a, b) => (compareSequenceNumbers(a, b) <= 0 ? a : b));
      return { batchItemFailures: [{ itemIdentifier: lowest }] };
    } finally {
      telemetry.flush?.();
    }
  };
}
