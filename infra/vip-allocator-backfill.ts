import { readFileSync } from "node:fs";
import { createRequire } from "node:module";
import { type CfnResource, Duration, Stack, Tags } from "aws-cdk-lib";
import type { ITableV2 } from "aws-cdk-lib/aws-dynamodb";
import { PolicyStatement, Role, ServicePrincipal } from "aws-cdk-lib/aws-iam";
import { Code, type IFunction } from "aws-cdk-lib/aws-lambda";
import { LogGroup } from "aws-cdk-lib/aws-logs";
import { TriggerFunction } from "aws-cdk-lib/triggers";
import type { Construct, IConstruct } from "constructs";
import { BACKFILL } from "../functions/allocator/config.ts";
import {
  ALLOCATOR_ARCHITECTURE,
  ALLOCATOR_RUNTIME,
  BACKFILL_HANDLER_FILE,
  BACKFILL_TRANSFORM,
  FROM_PACKAGE,
  PREBUILT_BACKFILL_FILE,
} from "./allocator-bundling.ts";
import type { ResolvedProps } from "./vip-allocator-props.ts";

/** The id aws-cdk-lib gives the stack-level provider of every `Trigger` (aws-cdk-lib/triggers). */
const TRIGGER_PROVIDER_ID = "AWSCDK.TriggerCustomResourceProviderCustomResourceProvider";

/**
 * The trigger's handler (`backfill-trigger-handler.ts`) as CommonJS, to inline: prebuilt by
 * `npm run build` in an installed package, compiled by esbuild (loaded only then) from source.
 */
export function backfillHandlerCode(): string {
  if (FROM_PACKAGE) return readFileSync(PREBUILT_BACKFILL_FILE, "utf8");
  const { transformSync } = createRequire(import.meta.url)("esbuild") as typeof import("esbuild");
  return transformSync(readFileSync(BACKFILL_HANDLER_FILE, "utf8"), BACKFILL_TRANSFORM).code;
}

export interface BackfillProps {
  readonly allocator: IFunction;
  readonly inputTables: readonly ITableV2[];
  /** What must exist before the backfill runs (the function, its role, tables, log group). */
  readonly executeAfter: readonly IConstruct[];
  readonly resolved: ResolvedProps;
}

/**
 * After a deployment onto existing input tables: one asynchronous invocation of the
 * allocator with {@link BACKFILL} (a fresh sweep cycle that also rebuilds the membership
 * index), once the function, its permissions, its tables and its event source mappings
 * exist. `Trigger` invokes its handler without a payload, so a tiny inline function passes
 * the payload on; its role may only invoke the allocator and write its own log group.
 */
export function addBackfillTrigger(scope: Construct, props: BackfillProps): TriggerFunction {
  const { resolved } = props;
  const logGroup = new LogGroup(scope, "BackfillLogGroup", {
    retention: resolved.logRetention,
    removalPolicy: resolved.removalPolicy,
  });
  const role = new Role(scope, "BackfillRole", {
    assumedBy: new ServicePrincipal("lambda.amazonaws.com"),
    description: "VIP allocator backfill trigger: invoke the allocator function only",
  });
  logGroup.grants.write(role);
  role.addToPrincipalPolicy(
    new PolicyStatement({
      actions: ["lambda:InvokeFunction"],
      resources: [props.allocator.functionArn],
    }),
  );
  const trigger = new TriggerFunction(scope, "Backfill", {
    code: Code.fromInline(backfillHandlerCode()),
    handler: "index.handler",
    runtime: ALLOCATOR_RUNTIME,
    architecture: ALLOCATOR_ARCHITECTURE,
    memorySize: 128,
    timeout: Duration.seconds(30),
    role,
    logGroup,
    description:
      "VIP allocator: one backfill (a fresh sweep cycle) after deploying onto existing tables",
    environment: {
      ALLOCATOR_FUNCTION: props.allocator.functionName,
      PAYLOAD: JSON.stringify(BACKFILL),
      // Not read by the code: part of the function's version, so pointing the allocator at
      // other input tables runs the backfill again.
      INPUT_TABLES: props.inputTables.map((table) => table.tableName).join(" "),
    },
    // The function, its permissions, its own tables and its event source mappings (children
    // of the function) first: the backfill's cycle starts after the streams are read.
    executeAfter: [...props.executeAfter],
  });
  retainTriggerProviderLogs(scope, resolved);
  return trigger;
}

/**
 * The trigger's provider (CDK's stack-level `AWSCDK.TriggerCustomResourceProvider`, a raw
 * `AWS::Lambda::Function`) would log to `/aws/lambda/<name>`, created by Lambda on its first
 * run and never expiring. It gets a log group of its own with the construct's retention
 * (one per stack, shared with any other trigger in it; its role's AWS-managed policy already
 * allows writing to any log group).
 */
function retainTriggerProviderLogs(scope: Construct, resolved: ResolvedProps): void {
  const provider = Stack.of(scope).node.tryFindChild(TRIGGER_PROVIDER_ID);
  const handler = provider?.node.tryFindChild("Handler") as CfnResource | undefined;
  if (provider === undefined || handler === undefined) {
    throw new Error(`VipAllocator: ${TRIGGER_PROVIDER_ID} not found; aws-cdk-lib changed`);
  }
  if (provider.node.tryFindChild("LogGroup") !== undefined) return;
  const logGroup = new LogGroup(provider, "LogGroup", {
    retention: resolved.logRetention,
    removalPolicy: resolved.removalPolicy,
  });
  for (const [key, value] of resolved.tags) Tags.of(logGroup).add(key, value);
  handler.addPropertyOverride("LoggingConfig", { LogGroup: logGroup.logGroupName });
}
