import { Duration, Tags, Validations } from "aws-cdk-lib";
import type { Dashboard, IAlarmAction } from "aws-cdk-lib/aws-cloudwatch";
import { SnsAction } from "aws-cdk-lib/aws-cloudwatch-actions";
import { type ITableV2, TableEncryptionV2, type TableV2 } from "aws-cdk-lib/aws-dynamodb";
import { type Grant, type IGrantable, Role, ServicePrincipal } from "aws-cdk-lib/aws-iam";
import type { Key } from "aws-cdk-lib/aws-kms";
import {
  Code,
  type FunctionProps,
  Function as LambdaFunction,
  MetricType,
  StartingPosition,
} from "aws-cdk-lib/aws-lambda";
import { DynamoEventSource, SqsDlq } from "aws-cdk-lib/aws-lambda-event-sources";
import { NodejsFunction } from "aws-cdk-lib/aws-lambda-nodejs";
import { LogGroup } from "aws-cdk-lib/aws-logs";
import type { Schedule } from "aws-cdk-lib/aws-scheduler";
import type { ITopic } from "aws-cdk-lib/aws-sns";
import { Queue, QueueEncryption } from "aws-cdk-lib/aws-sqs";
import type { TriggerFunction } from "aws-cdk-lib/triggers";
import { Construct } from "constructs";
import { SETTINGS } from "../functions/allocator/config.ts";
import {
  EVENT_SOURCE_SETTINGS,
  inFlightGraceSeconds,
} from "../functions/allocator/event-source-settings.ts";
import {
  CLAIMS_TABLE,
  DATAPLANES_TABLE,
  EXTERNAL_SERVICES_TABLE,
  INDEX_TABLE,
  MESHES_TABLE,
  VIPS_TABLE,
} from "../functions/store/table-definitions.ts";
import {
  ALLOCATOR_ARCHITECTURE,
  ALLOCATOR_BUNDLING,
  ALLOCATOR_ENTRY,
  ALLOCATOR_LOCK_FILE,
  ALLOCATOR_RUNTIME,
  FROM_PACKAGE,
  PREBUILT_ALLOCATOR_DIR,
  PROJECT_ROOT,
} from "./allocator-bundling.ts";
import { createAlarmTopic } from "./vip-allocator-alarm-topic.ts";
import { addBackfillTrigger } from "./vip-allocator-backfill.ts";
import { guardNoCollision } from "./vip-allocator-collisions.ts";
import { grantSelfInvoke } from "./vip-allocator-continuation.ts";
import {
  DATA_READ,
  DATA_WRITE,
  grantOnTable,
  grantReaderRequests,
  versionsIndexArn,
} from "./vip-allocator-grants.ts";
import { type VipAllocatorAlarms, VipAllocatorMonitoring } from "./vip-allocator-monitoring.ts";
import { VIP_ALLOCATOR_DEFAULTS, type VipAllocatorProps } from "./vip-allocator-props.ts";
import { addSweepSchedule } from "./vip-allocator-schedule.ts";
import { createTable, guardSingleRegion, importInputTable } from "./vip-allocator-tables.ts";
import { validateProps } from "./vip-allocator-validation.ts";

export { READER_INDEX_ACTIONS, READER_TABLE_ACTIONS } from "./vip-allocator-grants.ts";
export type { VipAllocatorAlarms } from "./vip-allocator-monitoring.ts";
export type {
  ExistingInputTable,
  VipAllocatorProps,
  VipAllocatorTableNames,
} from "./vip-allocator-props.ts";
export { VIP_ALLOCATOR_DEFAULTS, VipAllocatorPropError } from "./vip-allocator-props.ts";

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
  /** The optional external-services input table (undefined: the deployment has none). */
  readonly externalServicesTable?: ITableV2;
  /** The public output: one item per mesh. Read it with {@link grantRead}. */
  readonly vipsTable: TableV2;
  /** The allocator's private state; nothing else should read or write it. */
  readonly claimsTable: TableV2;
  /** The allocator's private membership index (derived from the dataplanes table). */
  readonly indexTable: TableV2;
  /**
   * The allocator function: a NodejsFunction bundled at synth time in this repository, a
   * Function on the prebuilt bundle in an installed package (the same code, decision 082).
   */
  readonly function: LambdaFunction;
  readonly logGroup: LogGroup;
  /** On-failure destination of both event sources (metadata of the records that gave up). */
  readonly failureQueue: Queue;
  readonly meshesEventSource: DynamoEventSource;
  readonly dataplanesEventSource: DynamoEventSource;
  readonly externalServicesEventSource?: DynamoEventSource;
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
      ? importInputTable(this, MESHES_TABLE, props.existingMeshesTable)
      : createTable(this, MESHES_TABLE, props.tableNames?.meshes, tableOptions);
    this.dataplanesTable = props.existingDataplanesTable
      ? importInputTable(this, DATAPLANES_TABLE, props.existingDataplanesTable)
      : createTable(this, DATAPLANES_TABLE, props.tableNames?.dataplanes, tableOptions);
    const existingExternal = props.existingExternalServicesTable;
    if (existingExternal) {
      this.externalServicesTable = importInputTable(
        this,
        EXTERNAL_SERVICES_TABLE,
        existingExternal,
      );
    } else if (props.externalServices === true) {
      this.externalServicesTable = createTable(
        this,
        EXTERNAL_SERVICES_TABLE,
        props.tableNames?.externalServices,
        tableOptions,
      );
    }
    const inputTables = [this.meshesTable, this.dataplanesTable];
    if (this.externalServicesTable) inputTables.push(this.externalServicesTable);
    this.vipsTable = createTable(
      this,
      this.vipsStream ? { ...VIPS_TABLE, stream: "NEW_AND_OLD_IMAGES" } : VIPS_TABLE,
      props.tableNames?.vips,
      tableOptions,
    );
    this.claimsTable = createTable(this, CLAIMS_TABLE, props.tableNames?.claims, tableOptions);
    this.indexTable = createTable(this, INDEX_TABLE, props.tableNames?.index, tableOptions);

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

    const functionProps = {
      runtime: ALLOCATOR_RUNTIME,
      architecture: ALLOCATOR_ARCHITECTURE,
      memorySize: resolved.memorySize,
      timeout: resolved.timeout,
      role,
      logGroup: this.logGroup,
      description: `VIP allocator: one VIP item per mesh from ${resolved.vipCidr}`,
      environment: {
        [MESHES_TABLE.envVar]: this.meshesTable.tableName,
        [DATAPLANES_TABLE.envVar]: this.dataplanesTable.tableName,
        ...(this.externalServicesTable
          ? { [EXTERNAL_SERVICES_TABLE.envVar]: this.externalServicesTable.tableName }
          : {}),
        [VIPS_TABLE.envVar]: this.vipsTable.tableName,
        [CLAIMS_TABLE.envVar]: this.claimsTable.tableName,
        [INDEX_TABLE.envVar]: this.indexTable.tableName,
        [SETTINGS.cidr.envVar]: resolved.vipCidr,
        [SETTINGS.quarantineSeconds.envVar]: String(resolved.quarantineSeconds),
        // The sweep's second look waits out what the event path normally takes (decision 071).
        [SETTINGS.sweepGraceSeconds.envVar]: String(
          inFlightGraceSeconds(resolved.batchingWindowSeconds),
        ),
        POWERTOOLS_SERVICE_NAME: resolved.serviceName,
        POWERTOOLS_METRICS_NAMESPACE: resolved.metricsNamespace,
        POWERTOOLS_LOG_LEVEL: resolved.logLevel,
        NODE_OPTIONS: "--enable-source-maps",
      },
    } satisfies Omit<FunctionProps, "code" | "handler">;
    this.function = FROM_PACKAGE
      ? new LambdaFunction(this, "Function", {
          ...functionProps,
          code: Code.fromAsset(PREBUILT_ALLOCATOR_DIR),
          handler: "index.handler",
        })
      : new NodejsFunction(this, "Function", {
          ...functionProps,
          entry: ALLOCATOR_ENTRY,
          handler: "handler",
          projectRoot: PROJECT_ROOT,
          depsLockFilePath: ALLOCATOR_LOCK_FILE,
          bundling: ALLOCATOR_BUNDLING,
        });

    // Least privilege: read the inputs, read/write the allocator's own tables. The event
    // sources add the stream reads and the failure-queue sends.
    for (const table of inputTables) table.grants.readData(this.function);
    // The vips table's own items only: the function never reads its versions index.
    grantOnTable(this.vipsTable, this.function, [...DATA_READ, ...DATA_WRITE], false);
    this.claimsTable.grants.readWriteData(this.function);
    this.indexTable.grants.readWriteData(this.function);
    const continuation = grantSelfInvoke(this, this.function, role);

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
    if (this.externalServicesTable) {
      this.externalServicesEventSource = this.addStream(
        this.externalServicesTable,
        !!existingExternal,
        window,
      );
    }

    if (resolved.sweepSchedule) {
      this.sweepSchedule = addSweepSchedule(this, this.function, resolved.sweepSchedule);
    }
    if (props.existingMeshesTable || props.existingDataplanesTable || existingExternal) {
      this.backfillTrigger = addBackfillTrigger(this, {
        allocator: this.function,
        inputTables,
        executeAfter: [
          this.function,
          role,
          continuation,
          this.vipsTable,
          this.claimsTable,
          this.indexTable,
          this.logGroup,
        ],
        resolved,
      });
    }

    if (props.alarmTopic) {
      this.alarmTopic = props.alarmTopic;
    } else {
      const created = createAlarmTopic(this, resolved.removalPolicy);
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
      telemetry: { namespace: resolved.metricsNamespace, service: resolved.serviceName },
      alarmActions,
      ...(resolved.sweepSchedule ? { sweepSchedule: resolved.sweepSchedule } : {}),
    });
    this.alarms = monitoring.alarms;
    this.dashboard = monitoring.dashboard;

    guardNoCollision(this, resolved, props.tableNames);
    guardSingleRegion(this.claimsTable, "claims", this.node.path);
    guardSingleRegion(this.indexTable, "index", this.node.path);
    this.acknowledgeNagFindings();
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
    return grantReaderRequests(this.vipsTable, grantee);
  }

  /** The ARN of the vips table's `versions` index (the reader's default probe). */
  get versionsIndexArn(): string {
    return versionsIndexArn(this.vipsTable);
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
