import { Duration, RemovalPolicy, Token } from "aws-cdk-lib";
import { RetentionDays } from "aws-cdk-lib/aws-logs";
import { EVENT_SOURCE_SETTINGS, loadConfig, SETTINGS } from "../functions/allocator/config.ts";
import { VipPool } from "../functions/domain/pool.ts";
import { parseStreamArn } from "../functions/store/table-definitions.ts";
import {
  type ExistingInputTable,
  type ResolvedProps,
  VIP_ALLOCATOR_DEFAULTS,
  VipAllocatorPropError,
  type VipAllocatorProps,
  type VipAllocatorTableNames,
} from "./vip-allocator-props.ts";

/** Synth-time validation of the VipAllocator's props (the props and their defaults: vip-allocator-props.ts). */

const TABLE_NAME = /^[a-zA-Z0-9_.-]{3,255}$/;
const REMOVAL_POLICIES: readonly RemovalPolicy[] = [
  RemovalPolicy.RETAIN,
  RemovalPolicy.RETAIN_ON_UPDATE_OR_DELETE,
  RemovalPolicy.DESTROY,
];

/**
 * Checks the props at synth time and resolves their defaults; an error names the construct
 * path, the prop, the value and the bound. `defaultServiceName`: the construct's own (derived
 * from its path, {@link defaultServiceName} in vip-allocator-collisions.ts).
 */
export function validateProps(
  props: VipAllocatorProps,
  path: string,
  defaultServiceName: string,
): ResolvedProps {
  try {
    return resolveProps(
      props.serviceName === undefined ? { ...props, serviceName: defaultServiceName } : props,
    );
  } catch (error) {
    if (error instanceof VipAllocatorPropError) throw error.at(path);
    throw error;
  }
}

function resolveProps(props: VipAllocatorProps): ResolvedProps {
  // VIP range: the same parser the function runs at cold start, so a range the function
  // would reject never deploys.
  const vipCidr = props.vipCidr ?? SETTINGS.cidr.default;
  let pool: VipPool | undefined;
  if (!Token.isUnresolved(vipCidr)) {
    try {
      pool = VipPool.parse(vipCidr);
    } catch (error) {
      throw new VipAllocatorPropError(
        "vipCidr",
        vipCidr,
        error instanceof Error ? error.message : String(error),
      );
    }
  }

  const quarantine =
    props.quarantine ?? Duration.seconds(Number(SETTINGS.quarantineSeconds.default));
  let quarantineSeconds: number;
  try {
    quarantineSeconds = quarantine.toSeconds();
  } catch {
    throw new VipAllocatorPropError("quarantine", quarantine, "expected a whole number of seconds");
  }
  try {
    // The function's own config check decides the allowed range (0 s to 366 days).
    loadConfig({
      [SETTINGS.cidr.envVar]: pool?.cidr ?? SETTINGS.cidr.default,
      [SETTINGS.quarantineSeconds.envVar]: String(quarantineSeconds),
    });
  } catch (error) {
    throw new VipAllocatorPropError(
      "quarantine",
      quarantine,
      error instanceof Error ? error.message : String(error),
    );
  }

  const removalPolicy = props.removalPolicy ?? VIP_ALLOCATOR_DEFAULTS.removalPolicy;
  if (!REMOVAL_POLICIES.includes(removalPolicy)) {
    throw new VipAllocatorPropError(
      "removalPolicy",
      removalPolicy,
      `expected one of ${REMOVAL_POLICIES.join(", ")} (DynamoDB global tables cannot be snapshotted)`,
    );
  }
  // A protected table cannot be deleted by the rollback of a failed creation (decision 070).
  const deletionProtection = props.deletionProtection ?? removalPolicy === RemovalPolicy.RETAIN;
  if (deletionProtection && removalPolicy === RemovalPolicy.DESTROY) {
    throw new VipAllocatorPropError(
      "deletionProtection",
      deletionProtection,
      "cannot be true with removalPolicy destroy: deleting the stack would fail on the protected tables",
    );
  }

  const logRetention = props.logRetention ?? VIP_ALLOCATOR_DEFAULTS.logRetention;
  if (!(Object.values(RetentionDays) as unknown[]).includes(logRetention)) {
    throw new VipAllocatorPropError(
      "logRetention",
      logRetention,
      "expected a RetentionDays value (a retention CloudWatch Logs supports)",
    );
  }

  const memorySize = props.memorySize ?? VIP_ALLOCATOR_DEFAULTS.memorySize;
  if (!Number.isInteger(memorySize) || memorySize < 128 || memorySize > 10240) {
    throw new VipAllocatorPropError(
      "memorySize",
      memorySize,
      "expected whole MB from 128 to 10240",
    );
  }

  const timeout = props.timeout ?? VIP_ALLOCATOR_DEFAULTS.timeout;
  let timeoutSeconds: number;
  try {
    timeoutSeconds = timeout.toSeconds();
  } catch {
    throw new VipAllocatorPropError("timeout", timeout, "expected a whole number of seconds");
  }
  if (timeoutSeconds < 1 || timeoutSeconds > 900) {
    throw new VipAllocatorPropError("timeout", timeout, "expected 1 second to 15 minutes");
  }

  const sweepSchedule = resolveSweepSchedule(props.sweepSchedule, timeout, timeoutSeconds);

  validateExisting("existingMeshesTable", props.existingMeshesTable);
  validateExisting("existingDataplanesTable", props.existingDataplanesTable);
  validateExisting("existingExternalServicesTable", props.existingExternalServicesTable);
  if (props.externalServices === false && props.existingExternalServicesTable !== undefined) {
    throw new VipAllocatorPropError(
      "externalServices",
      false,
      "existingExternalServicesTable is given: the table is used; leave externalServices unset",
    );
  }
  validateTableNames(props);
  // The sweep is what finishes the work a continuation left (a chain that ended, a failed one)
  // and what the event path missed; with tables that hold data before the deployment there is
  // always such work (decision 162).
  const existing = [
    ...(props.existingMeshesTable !== undefined ? ["existingMeshesTable"] : []),
    ...(props.existingDataplanesTable !== undefined ? ["existingDataplanesTable"] : []),
    ...(props.existingExternalServicesTable !== undefined ? ["existingExternalServicesTable"] : []),
  ];
  if (props.sweepSchedule === false && existing.length > 0) {
    throw new VipAllocatorPropError(
      "sweepSchedule",
      false,
      `${existing.join(" and ")} ${existing.length === 1 ? "is" : "are"} given: tables with data need the repair sweep (the backfill's net); give a Duration (default 15 minutes), or create the input tables here`,
    );
  }
  const tags = resolveTags(props.tags);
  const window =
    props.batchingWindow ?? Duration.seconds(EVENT_SOURCE_SETTINGS.maxBatchingWindowSeconds);
  let batchingWindowSeconds: number;
  try {
    batchingWindowSeconds = window.toSeconds();
  } catch {
    throw new VipAllocatorPropError("batchingWindow", window, "expected whole seconds");
  }
  if (batchingWindowSeconds < 0 || batchingWindowSeconds > 300) {
    throw new VipAllocatorPropError("batchingWindow", window, "expected 0 to 300 seconds");
  }

  return {
    ...resolveTelemetry(props),
    vipCidr: pool?.cidr ?? vipCidr,
    quarantineSeconds,
    removalPolicy,
    deletionProtection,
    logRetention,
    memorySize,
    timeout,
    sweepSchedule,
    batchingWindowSeconds,
    tags,
  };
}

const TAG_KEY = /^[\p{L}\p{Z}\p{N}_.:/=+\-@]{1,128}$/u;
const TAG_VALUE = /^[\p{L}\p{Z}\p{N}_.:/=+\-@]{0,256}$/u;

function resolveTags(given: { readonly [key: string]: string } | undefined): Map<string, string> {
  const tags = new Map(Object.entries(VIP_ALLOCATOR_DEFAULTS.tags));
  if (given === undefined) return tags;
  if (typeof given !== "object" || given === null) {
    throw new VipAllocatorPropError("tags", given, "expected an object of tag keys to values");
  }
  for (const [key, value] of Object.entries(given)) {
    if (!Token.isUnresolved(key) && (!TAG_KEY.test(key) || key.toLowerCase().startsWith("aws:"))) {
      throw new VipAllocatorPropError(
        "tags",
        key,
        "expected a tag key of 1 to 128 letters, digits, spaces or _ . : / = + - @, not starting with aws:",
      );
    }
    if (typeof value !== "string" || (!Token.isUnresolved(value) && !TAG_VALUE.test(value))) {
      throw new VipAllocatorPropError(
        `tags.${key}`,
        value,
        "expected a tag value of up to 256 letters, digits, spaces or _ . : / = + - @",
      );
    }
    tags.set(key, value);
  }
  return tags;
}

function resolveSweepSchedule(
  value: Duration | false | undefined,
  timeout: Duration,
  timeoutSeconds: number,
): Duration | undefined {
  if (value === false) return undefined;
  const period = value ?? VIP_ALLOCATOR_DEFAULTS.sweepSchedule;
  if (!(period instanceof Duration)) {
    throw new VipAllocatorPropError(
      "sweepSchedule",
      period,
      "expected a Duration or false (no schedule)",
    );
  }
  let minutes: number;
  try {
    minutes = period.toMinutes();
  } catch {
    throw new VipAllocatorPropError(
      "sweepSchedule",
      period,
      "expected a whole number of minutes (EventBridge Scheduler rates are in minutes)",
    );
  }
  if (minutes < 1 || minutes > 24 * 60) {
    throw new VipAllocatorPropError("sweepSchedule", period, "expected 1 minute to 24 hours");
  }
  if (minutes * 60 < timeoutSeconds) {
    throw new VipAllocatorPropError(
      "sweepSchedule",
      period,
      `is shorter than the function timeout ${timeout.toString()}: a sweep runs until the ` +
        "invocation's time is nearly up, so sweeps would overlap",
    );
  }
  return period;
}

const SERVICE_NAME = /^[A-Za-z0-9._-]{1,64}$/;
const NAMESPACE = /^(?!AWS\/)[A-Za-z0-9._\-/#:]{1,255}$/;
const LOG_LEVELS = ["DEBUG", "INFO", "WARN", "ERROR", "CRITICAL", "SILENT"];

function resolveTelemetry(
  props: VipAllocatorProps,
): Pick<ResolvedProps, "serviceName" | "metricsNamespace" | "logLevel" | "itemSizeWarningBytes"> {
  const serviceName = props.serviceName ?? "";
  if (!SERVICE_NAME.test(serviceName)) {
    throw new VipAllocatorPropError(
      "serviceName",
      serviceName,
      "expected 1 to 64 of a-z A-Z 0-9 . _ -",
    );
  }
  const metricsNamespace = props.metricsNamespace ?? VIP_ALLOCATOR_DEFAULTS.metricsNamespace;
  if (!NAMESPACE.test(metricsNamespace)) {
    throw new VipAllocatorPropError(
      "metricsNamespace",
      metricsNamespace,
      "expected 1 to 255 of a-z A-Z 0-9 . _ - / # :, not starting with AWS/",
    );
  }
  const logLevel = props.logLevel ?? VIP_ALLOCATOR_DEFAULTS.logLevel;
  if (!LOG_LEVELS.includes(logLevel)) {
    throw new VipAllocatorPropError(
      "logLevel",
      logLevel,
      `expected one of ${LOG_LEVELS.join(", ")}`,
    );
  }
  const itemSizeWarningBytes =
    props.itemSizeWarningBytes ?? VIP_ALLOCATOR_DEFAULTS.itemSizeWarningBytes;
  if (
    !Number.isInteger(itemSizeWarningBytes) ||
    itemSizeWarningBytes < 1024 ||
    itemSizeWarningBytes > 409_600
  ) {
    throw new VipAllocatorPropError(
      "itemSizeWarningBytes",
      itemSizeWarningBytes,
      "expected a whole number of bytes from 1024 to 409600 (DynamoDB's 400 KB item limit)",
    );
  }
  return { serviceName, metricsNamespace, logLevel, itemSizeWarningBytes };
}

const TABLE_ARN = /^arn:aws[a-z-]*:dynamodb:[a-z0-9-]+:\d{12}:table\/([a-zA-Z0-9_.-]{3,255})$/;

function validateExisting(prop: string, existing: ExistingInputTable | undefined): void {
  if (existing === undefined) return;
  const { tableName, tableArn, tableStreamArn } = existing;
  if (tableName !== undefined && tableArn !== undefined) {
    throw new VipAllocatorPropError(
      `${prop}.tableArn`,
      tableArn,
      "give tableName or tableArn, not both",
    );
  }
  let arnName: string | undefined;
  if (tableArn !== undefined && !Token.isUnresolved(tableArn)) {
    arnName = TABLE_ARN.exec(tableArn)?.[1];
    if (arnName === undefined) {
      throw new VipAllocatorPropError(
        `${prop}.tableArn`,
        tableArn,
        "expected a table ARN like arn:aws:dynamodb:REGION:ACCOUNT:table/NAME",
      );
    }
  }
  if (tableName === undefined && tableArn === undefined && Token.isUnresolved(tableStreamArn)) {
    throw new VipAllocatorPropError(
      `${prop}.tableName`,
      undefined,
      "tableStreamArn is a token: give tableName or tableArn too",
    );
  }
  if (tableName !== undefined && !Token.isUnresolved(tableName) && !TABLE_NAME.test(tableName)) {
    throw new VipAllocatorPropError(
      `${prop}.tableName`,
      tableName,
      "expected a DynamoDB table name (3 to 255 of a-z A-Z 0-9 _ . -)",
    );
  }
  if (Token.isUnresolved(tableStreamArn)) return;
  const stream = parseStreamArn(tableStreamArn);
  if (stream === undefined || !stream.wellFormed) {
    throw new VipAllocatorPropError(
      `${prop}.tableStreamArn`,
      tableStreamArn,
      "expected a stream ARN like arn:aws:dynamodb:REGION:ACCOUNT:table/NAME/stream/LABEL",
    );
  }
  const named = tableName ?? arnName;
  if (named !== undefined && !Token.isUnresolved(named) && stream.tableName !== named) {
    throw new VipAllocatorPropError(
      `${prop}.tableStreamArn`,
      tableStreamArn,
      `is the stream of table ${JSON.stringify(stream.tableName)}, not of ${JSON.stringify(named)}`,
    );
  }
}

function validateTableNames(props: VipAllocatorProps): void {
  const names = props.tableNames ?? {};
  const seen = new Map<string, string>();
  for (const [id, name] of Object.entries(names) as [keyof VipAllocatorTableNames, string][]) {
    if (name === undefined || Token.isUnresolved(name)) continue;
    const prop = `tableNames.${id}`;
    if (!TABLE_NAME.test(name)) {
      throw new VipAllocatorPropError(
        prop,
        name,
        "expected a DynamoDB table name (3 to 255 of a-z A-Z 0-9 _ . -)",
      );
    }
    if (
      (id === "meshes" && props.existingMeshesTable) ||
      (id === "dataplanes" && props.existingDataplanesTable) ||
      (id === "externalServices" && props.existingExternalServicesTable)
    ) {
      throw new VipAllocatorPropError(
        prop,
        name,
        `the ${id} table is passed as existing; name it there, not here`,
      );
    }
    if (
      id === "externalServices" &&
      props.externalServices !== true &&
      !props.existingExternalServicesTable
    ) {
      throw new VipAllocatorPropError(
        prop,
        name,
        "no external-services table: set externalServices",
      );
    }
    const other = seen.get(name);
    if (other !== undefined) {
      throw new VipAllocatorPropError(prop, name, `is also the name of tableNames.${other}`);
    }
    seen.set(name, id);
  }
}
