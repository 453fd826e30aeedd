import type { DynamoDBBatchResponse, DynamoDBStreamEvent } from "aws-lambda";
import { LambdaSelfInvoker } from "../store/lambda-self-invoker.ts";
import { isAllocatorCommand, loadConfig } from "./config.ts";
import type { InvokerFor } from "./continuation.ts";
import { isContinueEvent } from "./continuation.ts";
import {
  type ContinueSummary,
  createContinueHandler,
  createStreamHandler,
  createSweepHandler,
  type SweepSummary,
} from "./handlers.ts";
import type { InvocationContext } from "./pass/deps.ts";
import { createDynamoClient } from "./runtime.ts";

/**
 * Lambda entry for both stream event sources, the scheduled repair sweep, the backfill
 * (`{"vipAllocator": "sweep" | "backfill"}`) and its own continuations
 * (`{"vipAllocator": "continue", ...}`, decision 160). Configuration is read and validated once,
 * at cold start: a bad VIP_CIDR or VIP_QUARANTINE_SECONDS fails the init with a message naming it.
 */
const config = loadConfig();
const client = createDynamoClient(config);
/** A continuation invokes the function as this invocation was invoked (its ARN). */
const invoker: InvokerFor = (context) =>
  context.invokedFunctionArn === undefined
    ? undefined
    : new LambdaSelfInvoker(context.invokedFunctionArn);
const streams = createStreamHandler(config, { client, invoker });
const sweeps = createSweepHandler(config, { client, invoker });
const continuations = createContinueHandler(config, { client, invoker, sweeps });

export async function handler(
  event: DynamoDBStreamEvent | unknown,
  context?: InvocationContext,
): Promise<DynamoDBBatchResponse | SweepSummary | ContinueSummary> {
  if (isContinueEvent(event)) return await continuations(event, context);
  if (isAllocatorCommand(event)) return await sweeps(event, context);
  return await streams(event as DynamoDBStreamEvent, context);
}
