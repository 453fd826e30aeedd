import { randomUUID } from "node:crypto";
import { DynamoDBClient, type DynamoDBClientConfig } from "@aws-sdk/client-dynamodb";
import type { DynamoDBBatchResponse, DynamoDBStreamEvent } from "aws-lambda";
import { DocumentClient } from "../store/document-client.ts";
import { DynamoClaimStore } from "../store/dynamo-claim-store.ts";
import { DynamoMembershipIndex } from "../store/dynamo-membership-index.ts";
import { DynamoMeshSource } from "../store/dynamo-mesh-source.ts";
import { DynamoVipItemStore } from "../store/dynamo-vip-item-store.ts";
import { type BatchSettings, processBatch } from "./batch/process-batch.ts";
import type { AllocatorConfig } from "./config.ts";
import type { MeshOutcome } from "./pass/outcome.ts";
import { PowertoolsTelemetry } from "./powertools-telemetry.ts";
import type { Telemetry } from "./telemetry.ts";

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
 * What every mesh pass needs from the configuration and the runtime (real clock, random ids,
 * real sleeps): shared by the stream handler, the sweep and the CLI's reconcile.
 */
export function passSettings(config: AllocatorConfig, now: () => number = Date.now) {
  return {
    pool: config.pool,
    quarantineSeconds: config.quarantineSeconds,
    maxAttempts: config.maxWriteAttempts,
    serviceSet: config.serviceSet,
    now,
    newId: randomUUID,
    sleep: (ms: number) => new Promise<void>((resolve) => setTimeout(resolve, ms)),
    random: Math.random,
  };
}

/** The DynamoDB adapters of the allocator's own tables, over one SDK client. */
export function dynamoStores(config: AllocatorConfig, client: DynamoDBClient) {
  const doc = new DocumentClient(client);
  return {
    vipItems: new DynamoVipItemStore(doc, config.tables.vips),
    claims: new DynamoClaimStore(doc, config.tables.claims, randomUUID),
    index: new DynamoMembershipIndex(doc, config.tables.index),
  };
}

/**
 * The composition root: builds the SDK client and the DynamoDB adapters once, then runs
 * {@link processBatch} on every event (with a fresh view of the input tables per batch).
 */
export function createStreamHandler(
  config: AllocatorConfig,
  options: StreamHandlerOptions = {},
): StreamHandler {
  const telemetry = options.telemetry ?? new PowertoolsTelemetry();
  const client = options.client ?? createDynamoClient(config);
  const { vipItems, claims, index } = dynamoStores(config, client);
  const settings: BatchSettings = {
    ...passSettings(config, options.now),
    tables: config.tables,
    concurrency: options.concurrency ?? 4,
    ...(options.onOutcome !== undefined ? { onOutcome: options.onOutcome } : {}),
  };

  return async (event) => {
    try {
      const source = new DynamoMeshSource(client, config.tables);
      return await processBatch(event, { source, vipItems, claims, index, telemetry }, settings);
    } finally {
      telemetry.flush?.();
    }
  };
}
