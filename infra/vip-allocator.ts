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
import {
  EVENT_SOURCE_SETTINGS,
  inFlightGraceSeconds,
  SETTINGS,
} from "../functions/allocator/config.ts";
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
import { defaultServiceName, guardNoCollision } from "./vip-allocator-collisions.ts";
import { grantSelfInvoke } from "./vip-allocator-continuation.ts";
import {
  DATA_READ,
  DATA_WRITE,
  grantOnTable,
  READER_INDEX_ACTIONS,
  READER_TABLE_ACTIONS,
  versionsIndexArn,
} from "./vip-allocator-grants.ts";
import { monitorAllocator, type VipAllocatorAlarms } from "./vip-allocator-monitoring.ts";
import { VIP_ALLOCATOR_DEFAULTS, type VipAllocatorProps } from "./vip-allocator-props.ts";
import type { VipsGrantOptions, VipsReaders } from "./vip-allocator-readers.ts";
import { createVipsTable } from "./vip-allocator-replicas.ts";
import { addSweepSchedule } from "./vip-allocator-schedule.ts";
import { createInputTables, createTable, guardSingleRegion } from "./vip-allocator-tables.ts";
import { validateProps } from "./vip-allocator-validation.ts";

export { READER_INDEX_ACTIONS, READER_TABLE_ACTIONS } from "./vip-allocator-grants.ts";
export type { VipAllocatorAlarms, VipAllocatorTableAlarms } from "./vip-allocator-monitoring.ts";
export type {
  ExistingInputTable,
  VipAllocatorProps,
  VipAllocatorTableNames,
} from "./vip-allocator-props.ts";
export { VIP_ALLOCATOR_DEFAULTS, VipAllocatorPropError } from "./vip-allocator-props.ts";
export type { VipsGrantOptions } from "./vip-allocator-readers.ts";

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
  /**
   * The `service` dimension of the function's own metrics and the `service` key of its log
   * lines: the prop `serviceName`, or the default derived from this construct's path.
   */
  readonly serviceName: string;
  /** The CloudWatch namespace of the function's own metrics (the prop `metricsNamespace`). */
  readonly metricsNamespace: string;
  /** The regions of the vips table's replicas for readers (the prop `readerRegions`). */
  readonly readerRegions: readonly string[];
  private readonly readers: VipsReaders;

  constructor(scope: Construct, id: string, props: VipAllocatorProps = {}) {
    super(scope, id);
    const resolved = validateProps(props, this.node.path, defaultServiceName(this));
    this.serviceName = resolved.serviceName;
    this.metricsNamespace = resolved.metricsNamespace;
    for (const [key, value] of resolved.tags) Tags.of(this).add(key, value);
    this.vipCidr = resolved.vipCidr;
    this.vipsStream = props.vipsStream === true;

    const tableOptions = {
      removalPolicy: resolved.removalPolicy,
      deletionProtection: resolved.deletionProtection,
      encryption: props.tableEncryption ?? TableEncryptionV2.awsManagedKey(),
    };
    ({
      meshes: this.meshesTable,
      dataplanes: this.dataplanesTable,
      externalServices: this.externalServicesTable,
    } = createInputTables(this, props, tableOptions));
    const existingExternal = props.existingExternalServicesTable;
    const inputTables = [this.meshesTable, this.dataplanesTable];
    if (this.externalServicesTable) inputTables.push(this.externalServicesTable);
    // With replicas in the reader regions, if any (decision 121).
    ({ table: this.vipsTable, readers: this.readers } = createVipsTable(this, props, tableOptions));
    this.readerRegions = this.readers.regions;
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

    const monitoring = monitorAllocator(this, resolved, alarmActions);
    this.alarms = monitoring.alarms;
    this.dashboard = monitoring.dashboard;

    guardNoCollision(this, resolved, props.tableNames);
    guardSingleRegion(this.claimsTable, "claims", this.node.path);
    guardSingleRegion(this.indexTable, "index", this.node.path);
    this.acknowledgeNagFindings();
  }

  /**
   * Lets a downstream service read the VIP items: TableV2's `readData` actions on the table and
   * its `versions` index. Covers every replica unless `options.regions` says fewer; another
   * account's principal gets resource-based policies instead (decision 120).
   */
  grantRead(grantee: IGrantable, options?: VipsGrantOptions): Grant {
    const request = { tableActions: DATA_READ, indexActions: DATA_READ };
    return this.readers.grantRead(grantee, request, options);
  }

  /**
   * Lets a `VipReader` (or `vips dns`) read the VIPs, and nothing more: `GetItem` and `Scan` on
   * the table, `Scan` and `Query` on its `versions` index, `kms:Decrypt` on a customer-managed
   * key; on every replica (`readerRegions`) unless `options.regions` says fewer. A principal of
   * another account gets no IAM policy here but the replicas' resource-based policies
   * (`GetItem`, `Query`, `Scan`) and the key policy's `kms:Decrypt` through DynamoDB; under the
   * AWS-managed key (the default `tableEncryption`) that fails synth (decision 120).
   */
  grantReadVips(grantee: IGrantable, options?: VipsGrantOptions): Grant {
    const request = { tableActions: READER_TABLE_ACTIONS, indexActions: READER_INDEX_ACTIONS };
    return this.readers.grantRead(grantee, request, options);
  }

  /**
   * Lets whoever keeps the input tables (a sync from Kuma's store, an operator's tool) write
   * them: `PutItem`, `UpdateItem`, `DeleteItem`, `BatchWriteItem` (and `DescribeTable`) on the
   * `meshes`, `dataplanes` and, when the deployment has one, `external-services` tables, created
   * or existing, and their customer-managed keys if any. No read, and nothing of the
   * allocator's own tables.
   */
  grantWriteInputs(grantee: IGrantable): Grant {
    const tables = [this.meshesTable, this.dataplanesTable];
    if (this.externalServicesTable) tables.push(this.externalServicesTable);
    const [first, ...rest] = tables.map((table) => table.grants.writeData(grantee));
    return rest.reduce((all, grant) => all.combine(grant), first as Grant);
  }

  /** The ARN of the vips table's `versions` index (the reader's default probe). */
  get versionsIndexArn(): string {
    return versionsIndexArn(this.vipsTable);
  }

  /** The ARN of the vips table's replica in a region (the home region's is the table's ARN). */
  vipsTableArnIn(region: string): string {
    return this.readers.tableArn(region);
  }

  /**
   * Lets a consumer read the `vips` table's change feed (DescribeStream, GetRecords,
   * GetShardIterator, ListStreams): the home region's stream, or the regions given; another
   * account's principal through the stream's resource-based policy. Needs `vipsStream: true`.
   */
  grantVipsStreamRead(grantee: IGrantable, options?: VipsGrantOptions): Grant {
    if (!this.vipsStream) {
      throw new Error(
        `VipAllocator at '${this.node.path}': the vips table has no stream; set vipsStream: true`,
      );
    }
    return this.readers.grantStreamRead(grantee, options);
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
   * Not needed with aws-cdk-lib 2.276.0 (tested): IAM4 (our role has no managed policy), IAM5
   * (every grant is scoped to one ARN, `dynamodb:ListStreams` to the stream ARNs).
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
