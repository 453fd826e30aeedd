import { ArnFormat, type CfnResource, Duration, Stack, Tags, Validations } from "aws-cdk-lib";
import type { Dashboard, IAlarmAction } from "aws-cdk-lib/aws-cloudwatch";
import { SnsAction } from "aws-cdk-lib/aws-cloudwatch-actions";
import {
  AttributeType,
  Billing,
  type CfnGlobalTable,
  type ITableV2,
  ProjectionType,
  StreamViewType,
  TableEncryptionV2,
  type TablePropsV2,
  TableV2,
} from "aws-cdk-lib/aws-dynamodb";
import {
  Grant,
  type IGrantable,
  type IRole,
  PolicyStatement,
  Role,
  ServicePrincipal,
} from "aws-cdk-lib/aws-iam";
import { Key } from "aws-cdk-lib/aws-kms";
import { Code, MetricType, StartingPosition } from "aws-cdk-lib/aws-lambda";
import { DynamoEventSource, SqsDlq } from "aws-cdk-lib/aws-lambda-event-sources";
import { NodejsFunction } from "aws-cdk-lib/aws-lambda-nodejs";
import { LogGroup } from "aws-cdk-lib/aws-logs";
import { Schedule, ScheduleExpression, ScheduleTargetInput } from "aws-cdk-lib/aws-scheduler";
import { LambdaInvoke } from "aws-cdk-lib/aws-scheduler-targets";
import { type ITopic, Topic } from "aws-cdk-lib/aws-sns";
import { Queue, QueueEncryption } from "aws-cdk-lib/aws-sqs";
import { TriggerFunction } from "aws-cdk-lib/triggers";
import { Construct } from "constructs";
import { SETTINGS } from "../functions/allocator/config.ts";
import {
  EVENT_SOURCE_SETTINGS,
  inFlightGraceSeconds,
} from "../functions/allocator/event-source-settings.ts";
import { BACKFILL, SCHEDULED_SWEEP } from "../functions/allocator/sweep-event.ts";
import { METRICS_NAMESPACE, SERVICE_NAME } from "../functions/allocator/telemetry-names.ts";
import {
  CLAIMS_TABLE,
  DATAPLANES_TABLE,
  INDEX_TABLE,
  type KeyDefinition,
  MESHES_TABLE,
  type TableDefinition,
  VERSIONS_INDEX,
  VIPS_TABLE,
} from "../functions/store/table-definitions.ts";
import {
  ALLOCATOR_ARCHITECTURE,
  ALLOCATOR_BUNDLING,
  ALLOCATOR_ENTRY,
  ALLOCATOR_LOCK_FILE,
  ALLOCATOR_RUNTIME,
  PROJECT_ROOT,
} from "./allocator-bundling.ts";

import { type VipAllocatorAlarms, VipAllocatorMonitoring } from "./vip-allocator-monitoring.ts";
import {
  type ExistingInputTable,
  type ResolvedProps,
  VIP_ALLOCATOR_DEFAULTS,
  type VipAllocatorProps,
  validateProps,
} from "./vip-allocator-props.ts";

export type { VipAllocatorAlarms } from "./vip-allocator-monitoring.ts";
export type {
  ExistingInputTable,
  VipAllocatorProps,
  VipAllocatorTableNames,
} from "./vip-allocator-props.ts";

/**
 * The backfill trigger's handler (inline, CommonJS): one asynchronous invocation of the
 * allocator with the payload in `PAYLOAD`. Asynchronous, so a long backfill never holds the
 * deployment and a failed one is retried by Lambda (and shows in the Errors alarm) instead of
 * rolling the stack back; only a refused invocation (permissions, missing function) fails
 * the deployment.
 */
const BACKFILL_TRIGGER_CODE = `const { LambdaClient, InvokeCommand } = require("@aws-sdk/client-lambda");
const client = new LambdaClient({});
exports.handler = async () => {
  const out = await client.send(new InvokeCommand({
    FunctionName: process.env.ALLOCATOR_FUNCTION,
    InvocationType: "Event",
    Payload: process.env.PAYLOAD,
  }));
  if (out.StatusCode !== 202) throw new Error("allocator invocation returned " + out.StatusCode);
  console.log(JSON.stringify({ invoked: process.env.ALLOCATOR_FUNCTION, payload: process.env.PAYLOAD }));
  return { statusCode: out.StatusCode };
};
`;

export { VIP_ALLOCATOR_DEFAULTS, VipAllocatorPropError } from "./vip-allocator-props.ts";

/** The id aws-cdk-lib gives the stack-level provider of every `Trigger` (aws-cdk-lib/triggers). */
const TRIGGER_PROVIDER_ID = "AWSCDK.TriggerCustomResourceProviderCustomResourceProvider";

const KEY_TYPES: Record<KeyDefinition["type"], AttributeType> = {
  S: AttributeType.STRING,
  N: AttributeType.NUMBER,
  B: AttributeType.BINARY,
};

function attribute(key: KeyDefinition): { name: string; type: AttributeType } {
  return { name: key.name, type: KEY_TYPES[key.type] };
}

function tableConstructId(def: TableDefinition): string {
  return `${def.id[0]?.toUpperCase() ?? ""}${def.id.slice(1)}Table`;
}

/**
 * The serverless VIP allocator: the tables (new, or existing input tables), one function
 * fed by the `meshes` and `dataplanes` streams, a failure queue, a repair-sweep schedule,
 * alarms notifying an (encrypted, by default created) SNS topic, a dashboard and, on existing
 * input tables, a one-shot backfill after the deployment.
 *
 * Safe by default: a poison record is retried a bounded number of times and for a bounded
 * time, bisected, and its metadata lands in an encrypted queue instead of blocking a shard
 * for a day; the function may touch only its streams and tables.
 */
export class VipAllocator extends Construct {
  readonly meshesTable: ITableV2;
  readonly dataplanesTable: ITableV2;
  /** The public output: one item per mesh. Read it with {@link grantRead}. */
  readonly vipsTable: TableV2;
  /** The allocator's private state; nothing else should read or write it. */
  readonly claimsTable: TableV2;
  /** The allocator's private membership index (derived from the dataplanes table). */
  readonly indexTable: TableV2;
  readonly function: NodejsFunction;
  readonly logGroup: LogGroup;
  /** On-failure destination of both event sources (metadata of the records that gave up). */
  readonly failureQueue: Queue;
  readonly meshesEventSource: DynamoEventSource;
  readonly dataplanesEventSource: DynamoEventSource;
  readonly alarms: VipAllocatorAlarms;
  /** The topic every alarm notifies (`alarmTopic`, or the encrypted one created here). */
  readonly alarmTopic: ITopic;
  /** The KMS key of the created alarm topic (undefined when `alarmTopic` was given). */
  readonly alarmTopicKey?: Key;
  /** The repair sweep schedule (undefined when `sweepSchedule` is false). */
  readonly sweepSchedule?: Schedule;
  /**
   * The one-shot backfill run after deploying onto existing input tables (undefined when
   * both input tables are created here, so they start empty).
   */
  readonly backfillTrigger?: TriggerFunction;
  readonly dashboard: Dashboard;
  /** The validated, canonical VIP range the function is configured with. */
  readonly vipCidr: string;
  /** Whether the vips table has a stream (the prop `vipsStream`). */
  readonly vipsStream: boolean;

  constructor(scope: Construct, id: string, props: VipAllocatorProps = {}) {
    super(scope, id);
    const resolved = validateProps(props, this.node.path);
    for (const [key, value] of resolved.tags) Tags.of(this).add(key, value);
    this.vipCidr = resolved.vipCidr;
    this.vipsStream = props.vipsStream === true;

    const tableOptions = {
      removalPolicy: resolved.removalPolicy,
      deletionProtection: resolved.deletionProtection,
      encryption: props.tableEncryption ?? TableEncryptionV2.awsManagedKey(),
    };
    this.meshesTable = props.existingMeshesTable
      ? this.importInputTable(MESHES_TABLE, props.existingMeshesTable)
      : this.createTable(MESHES_TABLE, props.tableNames?.meshes, tableOptions);
    this.dataplanesTable = props.existingDataplanesTable
      ? this.importInputTable(DATAPLANES_TABLE, props.existingDataplanesTable)
      : this.createTable(DATAPLANES_TABLE, props.tableNames?.dataplanes, tableOptions);
    this.vipsTable = this.createTable(
      this.vipsStream ? { ...VIPS_TABLE, stream: "NEW_AND_OLD_IMAGES" } : VIPS_TABLE,
      props.tableNames?.vips,
      tableOptions,
    );
    this.claimsTable = this.createTable(CLAIMS_TABLE, props.tableNames?.claims, tableOptions);
    this.indexTable = this.createTable(INDEX_TABLE, props.tableNames?.index, tableOptions);

    this.logGroup = new LogGroup(this, "LogGroup", {
      retention: resolved.logRetention,
      removalPolicy: resolved.removalPolicy,
    });

    // Our own role instead of the default one: the default attaches the AWS-managed
    // AWSLambdaBasicExecutionRole (logs on every log group in the account, cdk-nag IAM4);
    // this one may only write to the function's own log group.
    const role = new Role(this, "Role", {
      assumedBy: new ServicePrincipal("lambda.amazonaws.com"),
      description: "VIP allocator: read the input streams and tables, read/write vips and claims",
    });
    this.logGroup.grants.write(role);

    this.function = new NodejsFunction(this, "Function", {
      entry: ALLOCATOR_ENTRY,
      handler: "handler",
      projectRoot: PROJECT_ROOT,
      depsLockFilePath: ALLOCATOR_LOCK_FILE,
      runtime: ALLOCATOR_RUNTIME,
      architecture: ALLOCATOR_ARCHITECTURE,
      memorySize: resolved.memorySize,
      timeout: resolved.timeout,
      role,
      logGroup: this.logGroup,
      description: `VIP allocator: one VIP item per mesh from ${resolved.vipCidr}`,
      bundling: ALLOCATOR_BUNDLING,
      environment: {
        [MESHES_TABLE.envVar]: this.meshesTable.tableName,
        [DATAPLANES_TABLE.envVar]: this.dataplanesTable.tableName,
        [VIPS_TABLE.envVar]: this.vipsTable.tableName,
        [CLAIMS_TABLE.envVar]: this.claimsTable.tableName,
        [INDEX_TABLE.envVar]: this.indexTable.tableName,
        [SETTINGS.cidr.envVar]: resolved.vipCidr,
        [SETTINGS.quarantineSeconds.envVar]: String(resolved.quarantineSeconds),
        // The sweep's second look waits out what the event path normally takes (decision 071).
        [SETTINGS.sweepGraceSeconds.envVar]: String(
          inFlightGraceSeconds(resolved.batchingWindowSeconds),
        ),
        POWERTOOLS_SERVICE_NAME: SERVICE_NAME,
        POWERTOOLS_METRICS_NAMESPACE: METRICS_NAMESPACE,
        NODE_OPTIONS: "--enable-source-maps",
      },
    });

    // Least privilege: read the inputs, read/write the allocator's own tables. The event
    // sources add the stream reads and the failure-queue sends.
    this.meshesTable.grants.readData(this.function);
    this.dataplanesTable.grants.readData(this.function);
    // The vips table's own items only: the function never reads its versions index.
    grantOnTable(this.vipsTable, this.function, [...DATA_READ, ...DATA_WRITE], false);
    this.claimsTable.grants.readWriteData(this.function);
    this.indexTable.grants.readWriteData(this.function);

    this.failureQueue = new Queue(this, "FailureQueue", {
      encryption: QueueEncryption.SQS_MANAGED,
      enforceSSL: true,
      retentionPeriod: VIP_ALLOCATOR_DEFAULTS.failureRetention,
      removalPolicy: resolved.removalPolicy,
    });

    // An existing table's stream starts at LATEST: its last 24 hours are not replayed (they
    // would be up to a day old, past the 1-hour record age, and land in the failure queue);
    // the backfill below covers everything before the deployment. A new table starts empty.
    const window = resolved.batchingWindowSeconds;
    this.meshesEventSource = this.addStream(this.meshesTable, !!props.existingMeshesTable, window);
    this.dataplanesEventSource = this.addStream(
      this.dataplanesTable,
      !!props.existingDataplanesTable,
      window,
    );

    if (resolved.sweepSchedule) this.sweepSchedule = this.addSweepSchedule(resolved.sweepSchedule);
    if (props.existingMeshesTable || props.existingDataplanesTable) {
      this.backfillTrigger = this.addBackfillTrigger(role, resolved);
    }

    if (props.alarmTopic) {
      this.alarmTopic = props.alarmTopic;
    } else {
      const created = this.createAlarmTopic(resolved.removalPolicy);
      this.alarmTopic = created.topic;
      this.alarmTopicKey = created.key;
    }
    const alarmActions: IAlarmAction[] = [
      new SnsAction(this.alarmTopic),
      ...(props.alarmActions ?? []),
    ];

    const monitoring = new VipAllocatorMonitoring(this, "Monitoring", {
      function: this.function,
      failureQueue: this.failureQueue,
      meshesEventSource: this.meshesEventSource,
      dataplanesEventSource: this.dataplanesEventSource,
      vipCidr: this.vipCidr,
      alarmActions,
      ...(resolved.sweepSchedule ? { sweepSchedule: resolved.sweepSchedule } : {}),
    });
    this.alarms = monitoring.alarms;
    this.dashboard = monitoring.dashboard;

    this.guardSingleRegion(this.claimsTable, "claims");
    this.guardSingleRegion(this.indexTable, "index");
    this.acknowledgeNagFindings();
  }

  /**
   * The default alarm topic: encrypted with a customer-managed key (the AWS-managed SNS key's
   * policy cannot let CloudWatch use it), TLS only, and CloudWatch alarms of this account may
   * publish to it and use the key.
   */
  private createAlarmTopic(removalPolicy: ResolvedProps["removalPolicy"]): {
    topic: Topic;
    key: Key;
  } {
    const stack = Stack.of(this);
    const cloudwatch = new ServicePrincipal("cloudwatch.amazonaws.com");
    const key = new Key(this, "AlarmTopicKey", {
      description: "VIP allocator: encrypts the alarm topic",
      enableKeyRotation: true,
      removalPolicy,
    });
    key.addToResourcePolicy(
      new PolicyStatement({
        principals: [cloudwatch],
        actions: ["kms:Decrypt", "kms:GenerateDataKey*"],
        resources: ["*"],
        // Only on behalf of this account's alarms (confused deputy).
        conditions: { StringEquals: { "aws:SourceAccount": stack.account } },
      }),
    );
    const topic = new Topic(this, "AlarmTopic", {
      displayName: "VIP allocator alarms",
      masterKey: key,
      enforceSSL: true,
    });
    topic.applyRemovalPolicy(removalPolicy);
    topic.addToResourcePolicy(
      new PolicyStatement({
        principals: [cloudwatch],
        actions: ["sns:Publish"],
        resources: [topic.topicArn],
        conditions: {
          ArnLike: {
            "aws:SourceArn": stack.formatArn({
              service: "cloudwatch",
              resource: "alarm",
              resourceName: "*",
              arnFormat: ArnFormat.COLON_RESOURCE_NAME,
            }),
          },
          StringEquals: { "aws:SourceAccount": stack.account },
        },
      }),
    );
    return { topic, key };
  }

  /**
   * Lets a downstream service read the VIP items (GetItem by `mesh`, Query, Scan): the
   * public output of the allocator. The private `claims` table is not included.
   */
  grantRead(grantee: IGrantable): Grant {
    return grantOnTable(this.vipsTable, grantee, DATA_READ, true);
  }

  /**
   * Lets a `VipReader` (or `vips dns`) read the VIPs, and nothing more: exactly the requests the
   * reader sends. On the table: `GetItem` (the fetch of a moved item, and the probe of a listed
   * mesh without the index) and `Scan` (the probe without the index: `probe: "table"`,
   * `consistentRead: true`, or a reader denied the index). On the `versions` index: `Scan` (the
   * default probe) and `Query` (the probe of a listed mesh). The table's customer-managed key,
   * if any: `kms:Decrypt`.
   */
  grantReadVips(grantee: IGrantable): Grant {
    const table = Grant.addToPrincipal({
      grantee,
      actions: [...READER_TABLE_ACTIONS],
      resourceArns: [this.vipsTable.tableArn],
    });
    const index = Grant.addToPrincipal({
      grantee,
      actions: [...READER_INDEX_ACTIONS],
      resourceArns: [this.versionsIndexArn],
    });
    this.vipsTable.encryptionKey?.grantDecrypt(grantee);
    return table.combine(index);
  }

  /** The ARN of the vips table's `versions` index (the reader's default probe). */
  get versionsIndexArn(): string {
    return `${this.vipsTable.tableArn}/index/${VERSIONS_INDEX.name}`;
  }

  /**
   * Lets a downstream consumer read the `vips` table's change feed (DescribeStream, GetRecords,
   * GetShardIterator, ListStreams). Needs the prop `vipsStream: true`.
   */
  grantVipsStreamRead(grantee: IGrantable): Grant {
    if (!this.vipsStream) {
      throw new Error(
        `VipAllocator at '${this.node.path}': the vips table has no stream; set vipsStream: true`,
      );
    }
    return this.vipsTable.grantStreamRead(grantee);
  }

  private createTable(
    def: TableDefinition,
    tableName: string | undefined,
    options: Pick<TablePropsV2, "removalPolicy" | "deletionProtection" | "encryption">,
  ): TableV2 {
    return new TableV2(this, tableConstructId(def), {
      tableName,
      partitionKey: attribute(def.partitionKey),
      ...(def.sortKey ? { sortKey: attribute(def.sortKey) } : {}),
      ...(def.stream ? { dynamoStream: StreamViewType[def.stream] } : {}),
      ...(def.timeToLiveAttribute ? { timeToLiveAttribute: def.timeToLiveAttribute } : {}),
      ...(def.indexes !== undefined && def.indexes.length > 0
        ? {
            globalSecondaryIndexes: def.indexes.map((index) => ({
              indexName: index.name,
              partitionKey: attribute(index.partitionKey),
              projectionType: ProjectionType.INCLUDE,
              nonKeyAttributes: [...index.include],
            })),
          }
        : {}),
      billing: Billing.onDemand(),
      // Explicit: cdk-nag's DDB3 checks only CfnTable, not the GlobalTable TableV2 emits.
      pointInTimeRecoverySpecification: { pointInTimeRecoveryEnabled: true },
      ...options,
    });
  }

  private importInputTable(def: TableDefinition, existing: ExistingInputTable): ITableV2 {
    return TableV2.fromTableAttributes(this, tableConstructId(def), {
      tableName: existing.tableName,
      tableStreamArn: existing.tableStreamArn,
      ...(existing.encryptionKey ? { encryptionKey: existing.encryptionKey } : {}),
    });
  }

  private addStream(
    table: ITableV2,
    existing: boolean,
    batchingWindowSeconds: number,
  ): DynamoEventSource {
    const settings = EVENT_SOURCE_SETTINGS;
    const source = new DynamoEventSource(table, {
      startingPosition: existing
        ? StartingPosition.LATEST
        : StartingPosition[settings.startingPosition],
      batchSize: settings.batchSize,
      maxBatchingWindow: Duration.seconds(batchingWindowSeconds),
      retryAttempts: settings.retryAttempts,
      maxRecordAge: Duration.seconds(settings.maxRecordAgeSeconds),
      bisectBatchOnError: settings.bisectBatchOnError,
      reportBatchItemFailures: settings.reportBatchItemFailures,
      parallelizationFactor: settings.parallelizationFactor,
      onFailure: new SqsDlq(this.failureQueue),
      metricsConfig: { metrics: [MetricType.EVENT_COUNT] },
    });
    this.function.addEventSource(source);
    return source;
  }

  /**
   * EventBridge Scheduler invokes the function with {@link SCHEDULED_SWEEP} every `period`,
   * under a role of its own that may only invoke this function.
   */
  private addSweepSchedule(period: Duration): Schedule {
    const stack = Stack.of(this);
    const role = new Role(this, "SweepScheduleRole", {
      assumedBy: new ServicePrincipal("scheduler.amazonaws.com", {
        conditions: { StringEquals: { "aws:SourceAccount": stack.account } },
      }),
      description: "VIP allocator repair sweep schedule: invoke the allocator function only",
    });
    return new Schedule(this, "SweepSchedule", {
      schedule: ScheduleExpression.rate(period),
      description: `VIP allocator: repair sweep over every mesh, every ${period.toHumanString()}`,
      target: new InvokeUnqualified(this.function, {
        role,
        input: ScheduleTargetInput.fromObject(SCHEDULED_SWEEP),
        // A sweep that could not be delivered within one period is superseded by the next
        // one (the sweep keeps its position in the claims table), so no dead-letter queue.
        retryAttempts: VIP_ALLOCATOR_DEFAULTS.sweepRetryAttempts,
        maxEventAge: Duration.seconds(Math.max(60, Math.min(period.toSeconds(), 86_400))),
      }),
    });
  }

  /**
   * After a deployment onto existing input tables: one asynchronous invocation of the
   * allocator with {@link BACKFILL} (a fresh sweep cycle that also rebuilds the membership
   * index), once the function, its permissions, its tables and its event source mappings
   * exist. `Trigger` invokes its handler without a payload, so a tiny inline function passes
   * the payload on; its role may only invoke the allocator and write its own log group.
   */
  private addBackfillTrigger(allocatorRole: Role, resolved: ResolvedProps): TriggerFunction {
    const logGroup = new LogGroup(this, "BackfillLogGroup", {
      retention: resolved.logRetention,
      removalPolicy: resolved.removalPolicy,
    });
    const role = new Role(this, "BackfillRole", {
      assumedBy: new ServicePrincipal("lambda.amazonaws.com"),
      description: "VIP allocator backfill trigger: invoke the allocator function only",
    });
    logGroup.grants.write(role);
    role.addToPrincipalPolicy(
      new PolicyStatement({
        actions: ["lambda:InvokeFunction"],
        resources: [this.function.functionArn],
      }),
    );
    const trigger = new TriggerFunction(this, "Backfill", {
      code: Code.fromInline(BACKFILL_TRIGGER_CODE),
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
        ALLOCATOR_FUNCTION: this.function.functionName,
        PAYLOAD: JSON.stringify(BACKFILL),
        // Not read by the code: part of the function's version, so pointing the allocator at
        // other input tables runs the backfill again.
        INPUT_TABLES: `${this.meshesTable.tableName} ${this.dataplanesTable.tableName}`,
      },
      // The function, its permissions, its own tables and its event source mappings (children
      // of the function) first: the backfill's cycle starts after the streams are read.
      executeAfter: [
        this.function,
        allocatorRole,
        this.vipsTable,
        this.claimsTable,
        this.indexTable,
        this.logGroup,
      ],
    });
    this.retainTriggerProviderLogs(resolved);
    return trigger;
  }

  /**
   * The trigger's provider (CDK's stack-level `AWSCDK.TriggerCustomResourceProvider`, a raw
   * `AWS::Lambda::Function`) would log to `/aws/lambda/<name>`, created by Lambda on its first
   * run and never expiring. It gets a log group of its own with the construct's retention
   * (one per stack, shared with any other trigger in it; its role's AWS-managed policy already
   * allows writing to any log group).
   */
  private retainTriggerProviderLogs(resolved: ResolvedProps): void {
    const provider = Stack.of(this).node.tryFindChild(TRIGGER_PROVIDER_ID);
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

  /**
   * Fails synth when a private table has replicas (`addReplica`, or an escape-hatch override
   * of `Replicas`): the claims' conditional writes and transactions, and the index's
   * version-conditional records, hold only within one region.
   */
  private guardSingleRegion(table: TableV2, name: string): void {
    table.node.addValidation({
      validate: () => {
        const cfn = table.node.defaultChild as CfnGlobalTable;
        const replicas = renderedReplicas(cfn);
        if (replicas.length <= 1) return [];
        const regions = replicas
          .map((replica) => (typeof replica?.Region === "string" ? replica.Region : "(token)"))
          .join(", ");
        return [
          `VipAllocator at '${this.node.path}': the ${name} table must not have replicas ` +
            `(found ${replicas.length} regions: ${regions}): its conditional writes and ` +
            "transactions hold only within one region. Deploy one allocator per region, each " +
            "with its own private tables.",
        ];
      },
    });
  }

  /**
   * cdk-nag (AwsSolutions) findings that are intended, each with its reason, acknowledged on
   * the construct that owns the finding. The test "acknowledges only findings that exist"
   * keeps this list honest: an acknowledgement that no longer matches a finding fails it.
   *
   * Not needed with aws-cdk-lib 2.276.0 (checked by the tests): IAM4 (our own role has no
   * managed policy), IAM5 (every grant is scoped to one ARN: TableV2 scopes
   * `dynamodb:ListStreams` to the stream ARNs, and the tables have no index wildcard).
   */
  private acknowledgeNagFindings(): void {
    Validations.of(this.failureQueue).acknowledge({
      id: "AwsSolutions-SQS3",
      reason:
        "This queue is itself the on-failure destination (dead-letter queue) of both event " +
        "sources. It keeps the metadata of failed stream batches for 14 days for an operator; " +
        "nothing consumes it automatically, so there is no consumer failure for a further " +
        "dead-letter queue to catch.",
    });
  }
}

/**
 * `LambdaInvoke` whose role may invoke only the function's unqualified ARN (the schedule's
 * target), not every version and alias of it (`grantInvoke`'s `ARN:*`, cdk-nag IAM5).
 */
class InvokeUnqualified extends LambdaInvoke {
  protected override addTargetActionToRole(role: IRole): void {
    role.addToPrincipalPolicy(
      new PolicyStatement({ actions: ["lambda:InvokeFunction"], resources: [this.targetArn] }),
    );
  }
}

/** The `Replicas` a global table renders, property overrides (escape hatches) included. */
function renderedReplicas(cfn: CfnGlobalTable): { Region?: unknown }[] {
  const stack = Stack.of(cfn);
  const render = (cfn as unknown as { _toCloudFormation?: () => unknown })._toCloudFormation;
  let replicas: unknown;
  if (typeof render === "function") {
    const rendered = stack.resolve(render.call(cfn)) as {
      Resources?: Record<string, { Properties?: { Replicas?: unknown } }>;
    };
    replicas = Object.values(rendered.Resources ?? {})[0]?.Properties?.Replicas;
  } else {
    replicas = stack.resolve(cfn.replicas);
  }
  return Array.isArray(replicas) ? (replicas as { Region?: unknown }[]) : [];
}

/** What `VipReader` sends to the vips table (fetches, and the probe without the index). */
export const READER_TABLE_ACTIONS = ["dynamodb:GetItem", "dynamodb:Scan"] as const;
/** What `VipReader` sends to the `versions` index (the default probe; Query for listed meshes). */
export const READER_INDEX_ACTIONS = ["dynamodb:Query", "dynamodb:Scan"] as const;

/** DynamoDB's data reads and writes, as TableV2's `readData`/`readWriteData` grant them. */
const DATA_READ = [
  "dynamodb:BatchGetItem",
  "dynamodb:ConditionCheckItem",
  "dynamodb:DescribeTable",
  "dynamodb:GetItem",
  "dynamodb:GetRecords",
  "dynamodb:GetShardIterator",
  "dynamodb:Query",
  "dynamodb:Scan",
];
const DATA_WRITE = [
  "dynamodb:BatchWriteItem",
  "dynamodb:DeleteItem",
  "dynamodb:PutItem",
  "dynamodb:UpdateItem",
];

/**
 * A grant on the vips table scoped to exact ARNs: the table, and (for readers) its `versions`
 * index by name, where TableV2's grants add `index/*` for a table with an index. The table's
 * customer-managed key, if any, is granted as TableV2 would.
 */
function grantOnTable(
  table: TableV2,
  grantee: IGrantable,
  actions: readonly string[],
  withVersionsIndex: boolean,
): Grant {
  const grant = Grant.addToPrincipal({
    grantee,
    actions: [...actions],
    resourceArns: [
      table.tableArn,
      ...(withVersionsIndex ? [`${table.tableArn}/index/${VERSIONS_INDEX.name}`] : []),
    ],
  });
  const writes = actions.some((action) => DATA_WRITE.includes(action));
  if (table.encryptionKey !== undefined) {
    if (writes) table.encryptionKey.grantEncryptDecrypt(grantee);
    else table.encryptionKey.grantDecrypt(grantee);
  }
  return grant;
}
