import type { DynamoDBBatchResponse, DynamoDBStreamEvent } from "aws-lambda";
import { loadConfig } from "./config.ts";
import { createDynamoClient } from "./runtime.ts";
import { createStreamHandler } from "./stream-handler.ts";
import { isAllocatorCommand } from "./sweep-event.ts";
import { createSweepHandler, type InvocationContext, type SweepSummary } from "./sweep-handler.ts";

/**
 * Lambda entry for both stream event sources, the scheduled repair sweep and the backfill
 * (`{"vipAllocator": "sweep" | "backfill"}`). Configuration is read and validated once, at cold
 * start: a bad VIP_CIDR or VIP_QUARANTINE_SECONDS fails the init with a message naming it.
 */
const config = loadConfig();
const client = createDynamoClient(config);
const streams = createStreamHandler(config, { client });
const sweeps = createSweepHandler(config, { client });

export async function handler(
  event: DynamoDBStreamEvent | unknown,
  context?: InvocationContext,
): Promise<DynamoDBBatchResponse | SweepSummary> {
  if (isAllocatorCommand(event)) return await sweeps(event, context);
  return await streams(event as DynamoDBStreamEvent);
}
