import { Duration, RemovalPolicy, Stack, type StackProps } from "aws-cdk-lib";
import { RetentionDays } from "aws-cdk-lib/aws-logs";
import { Topic } from "aws-cdk-lib/aws-sns";
import type { Construct } from "constructs";
import {
  type ExistingInputTable,
  VipAllocator,
  VipAllocatorPropError,
  type VipAllocatorProps,
} from "./vip-allocator.ts";
import { addAllocatorOutputs } from "./vip-allocator-outputs.ts";

/**
 * Context keys the stack reads (`npx cdk deploy -c vipCidr=10.64.0.0/12 ...` or the
 * `context` block of cdk.json). Explicit props win over context.
 */
export const CONTEXT_KEYS = {
  vipCidr: "vipCidr",
  quarantineSeconds: "vipQuarantineSeconds",
  meshesTableName: "meshesTableName",
  meshesStreamArn: "meshesStreamArn",
  dataplanesTableName: "dataplanesTableName",
  dataplanesStreamArn: "dataplanesStreamArn",
  removalPolicy: "removalPolicy",
  logRetentionDays: "logRetentionDays",
  alarmTopicArn: "alarmTopicArn",
  sweepScheduleMinutes: "sweepScheduleMinutes",
  tags: "tags",
} as const;

export interface VipAllocatorStackProps extends StackProps, VipAllocatorProps {}

/** A stack holding one {@link VipAllocator}, configured from props or CDK context. */
export class VipAllocatorStack extends Stack {
  readonly allocator: VipAllocator;

  constructor(scope: Construct, id: string, props: VipAllocatorStackProps = {}) {
    super(scope, id, {
      description: "Serverless VIP allocator: DynamoDB streams -> Lambda -> one VIP item per mesh",
      ...props,
    });
    const fromContext = vipAllocatorPropsFromContext(this);
    this.allocator = new VipAllocator(this, "VipAllocator", {
      ...fromContext,
      ...definedOnly(props),
    });

    addAllocatorOutputs(this, this.allocator);
  }
}

function definedOnly<T extends object>(props: T): Partial<T> {
  return Object.fromEntries(
    Object.entries(props).filter(([, value]) => value !== undefined),
  ) as Partial<T>;
}

/**
 * Reads {@link CONTEXT_KEYS}. Values from `-c` are strings, values from cdk.json may be
 * numbers; anything unparsable fails with the key and the value.
 */
export function vipAllocatorPropsFromContext(scope: Construct): VipAllocatorProps {
  const node = scope.node;
  const text = (key: string): string | undefined => {
    const value: unknown = node.tryGetContext(key);
    if (value === undefined || value === null || value === "") return undefined;
    if (typeof value !== "string" && typeof value !== "number") {
      throw new VipAllocatorPropError(`context ${key}`, JSON.stringify(value), "expected a string");
    }
    return String(value);
  };
  const wholeNumber = (key: string): number | undefined => {
    const value = text(key);
    if (value === undefined) return undefined;
    if (!/^\d+$/.test(value)) {
      throw new VipAllocatorPropError(`context ${key}`, value, "expected a whole number");
    }
    return Number(value);
  };
  const existing = (nameKey: string, arnKey: string): ExistingInputTable | undefined => {
    const tableName = text(nameKey);
    const tableStreamArn = text(arnKey);
    if (tableName === undefined && tableStreamArn === undefined) return undefined;
    if (tableName === undefined || tableStreamArn === undefined) {
      const missing = tableName === undefined ? nameKey : arnKey;
      throw new VipAllocatorPropError(
        `context ${missing}`,
        undefined,
        `an existing table needs both ${nameKey} and ${arnKey}`,
      );
    }
    return { tableName, tableStreamArn };
  };

  const props: Record<string, unknown> = {};
  const vipCidr = text(CONTEXT_KEYS.vipCidr);
  if (vipCidr !== undefined) props.vipCidr = vipCidr;
  const quarantineSeconds = wholeNumber(CONTEXT_KEYS.quarantineSeconds);
  if (quarantineSeconds !== undefined) props.quarantine = Duration.seconds(quarantineSeconds);
  const meshes = existing(CONTEXT_KEYS.meshesTableName, CONTEXT_KEYS.meshesStreamArn);
  if (meshes) props.existingMeshesTable = meshes;
  const dataplanes = existing(CONTEXT_KEYS.dataplanesTableName, CONTEXT_KEYS.dataplanesStreamArn);
  if (dataplanes) props.existingDataplanesTable = dataplanes;

  const removal = text(CONTEXT_KEYS.removalPolicy);
  if (removal !== undefined) {
    const policies = new Map<string, RemovalPolicy>([
      ["retain-on-update-or-delete", RemovalPolicy.RETAIN_ON_UPDATE_OR_DELETE],
      ["retain", RemovalPolicy.RETAIN],
      ["destroy", RemovalPolicy.DESTROY],
    ]);
    const policy = policies.get(removal.toLowerCase());
    if (policy === undefined) {
      throw new VipAllocatorPropError(
        `context ${CONTEXT_KEYS.removalPolicy}`,
        removal,
        `expected one of ${[...policies.keys()].join(", ")}`,
      );
    }
    props.removalPolicy = policy;
  }

  const retentionDays = wholeNumber(CONTEXT_KEYS.logRetentionDays);
  if (retentionDays !== undefined) {
    if (!(Object.values(RetentionDays) as unknown[]).includes(retentionDays)) {
      throw new VipAllocatorPropError(
        `context ${CONTEXT_KEYS.logRetentionDays}`,
        retentionDays,
        "expected a retention CloudWatch Logs supports (1, 3, 5, 7, 14, 30, 60, 90, 120, 150, 180, 365, ...)",
      );
    }
    props.logRetention = retentionDays as RetentionDays;
  }

  const sweepMinutes = wholeNumber(CONTEXT_KEYS.sweepScheduleMinutes);
  if (sweepMinutes !== undefined) {
    props.sweepSchedule = sweepMinutes === 0 ? false : Duration.minutes(sweepMinutes);
  }

  const tags = node.tryGetContext(CONTEXT_KEYS.tags) as unknown;
  if (tags !== undefined && tags !== null && tags !== "") {
    // From -c a JSON text, from cdk.json an object; the construct checks keys and values.
    let parsed: unknown = tags;
    if (typeof tags === "string") {
      try {
        parsed = JSON.parse(tags);
      } catch {
        parsed = undefined;
      }
    }
    if (typeof parsed !== "object" || parsed === null || Array.isArray(parsed)) {
      throw new VipAllocatorPropError(
        `context ${CONTEXT_KEYS.tags}`,
        typeof tags === "string" ? tags : JSON.stringify(tags),
        'expected a JSON object of tag keys to values, e.g. {"team":"mesh"}',
      );
    }
    props.tags = parsed;
  }

  const topicArn = text(CONTEXT_KEYS.alarmTopicArn);
  if (topicArn !== undefined) {
    if (!/^arn:aws[a-z-]*:sns:[a-z0-9-]+:\d{12}:[A-Za-z0-9_-]{1,256}(\.fifo)?$/.test(topicArn)) {
      throw new VipAllocatorPropError(
        `context ${CONTEXT_KEYS.alarmTopicArn}`,
        topicArn,
        "expected an SNS topic ARN like arn:aws:sns:REGION:ACCOUNT:NAME",
      );
    }
    props.alarmTopic = Topic.fromTopicArn(scope, "AlarmTopic", topicArn);
  }
  return props as VipAllocatorProps;
}
