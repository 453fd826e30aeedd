import { randomUUID } from "node:crypto";
import { DynamoDBClient, type DynamoDBClientConfig } from "@aws-sdk/client-dynamodb";
import { ClaimStoreLogic } from "../store/claim-store-logic.ts";
import { DynamoClaimTable } from "../store/dynamo-claim-table.ts";
import { DynamoItemClient, type DynamoItemClientOptions } from "../store/dynamo-item-client.ts";
import { DynamoMembershipIndex } from "../store/dynamo-membership-index.ts";
import { DynamoMeshSource } from "../store/dynamo-mesh-source.ts";
import { DynamoVipItemStore } from "../store/dynamo-vip-item-store.ts";
import type { AllocatorConfig } from "./config.ts";
import type { PassSettings } from "./pass/deps.ts";

/**
 * The composition root: everything the allocator runs on, built from the configuration in one
 * place. The Lambda entry (stream batches and sweeps), the CLI, the benches and the moto-backed
 * tests all take their client, stores, mesh source and pass settings from here.
 */
export interface Runtime {
  readonly client: DynamoDBClient;
  /** The input tables and the allocator's own tables, over the one client (all stateless). */
  readonly ports: DynamoPorts;
  /** What every mesh pass needs from the configuration and the runtime. */
  readonly settings: PassSettings;
}

export interface DynamoPorts {
  readonly source: DynamoMeshSource;
  readonly vipItems: DynamoVipItemStore;
  /** The claims table: the claim store's logic on its DynamoDB adapter. */
  readonly claims: ClaimStoreLogic;
  /** The waiting list and the range records: the same adapter as `claims` (one table). */
  readonly passState: ClaimStoreLogic;
  readonly index: DynamoMembershipIndex;
}

export interface RuntimeOptions {
  /** The SDK client to use (default: one for the configured endpoint). */
  readonly client?: DynamoDBClient;
  readonly now?: () => number;
  /** How waits are made (the sweep's grace, backoffs); default real timers (a soak's clock). */
  readonly sleep?: (ms: number) => Promise<void>;
  /** How the adapters' `DynamoItemClient` asks for items (the cost bench's baseline turns off). */
  readonly itemClient?: DynamoItemClientOptions;
}

export function createRuntime(config: AllocatorConfig, options: RuntimeOptions = {}): Runtime {
  const client = options.client ?? createDynamoClient(config);
  return {
    client,
    ports: dynamoPorts(config, client, options.itemClient),
    settings: passSettings(config, options.now, options.sleep),
  };
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
function passSettings(
  config: AllocatorConfig,
  now: () => number = Date.now,
  sleep: (ms: number) => Promise<void> = (ms) =>
    new Promise<void>((resolve) => setTimeout(resolve, ms)),
) {
  return {
    pool: config.pool,
    quarantineSeconds: config.quarantineSeconds,
    maxAttempts: config.maxWriteAttempts,
    now,
    newId: randomUUID,
    sleep,
    random: Math.random,
  };
}

/** The DynamoDB adapters of the input tables and the allocator's own tables, over one client. */
export function dynamoPorts(
  config: AllocatorConfig,
  client: DynamoDBClient,
  options: DynamoItemClientOptions = {},
): DynamoPorts {
  const doc = new DynamoItemClient(client, options);
  const claims = new ClaimStoreLogic(new DynamoClaimTable(doc, config.tables.claims), randomUUID);
  return {
    source: new DynamoMeshSource(client, config.tables),
    vipItems: new DynamoVipItemStore(doc, config.tables.vips),
    claims,
    passState: claims,
    index: new DynamoMembershipIndex(doc, config.tables.index),
  };
}
