import { Duration, Validations } from "aws-cdk-lib";
import type { Dashboard } from "aws-cdk-lib/aws-cloudwatch";
import {
  AttributeType,
  Billing,
  type ITableV2,
  StreamViewType,
  TableEncryptionV2,
  type TablePropsV2,
  TableV2,
} from "aws-cdk-lib/aws-dynamodb";
import { type Grant, type IGrantable, Role, ServicePrincipal } from "aws-cdk-lib/aws-iam";
import { MetricType, StartingPosition } from "aws-cdk-lib/aws-lambda";
import { DynamoEventSource, SqsDlq } from "aws-cdk-lib/aws-lambda-event-sources";
import { NodejsFunction } from "aws-cdk-lib/aws-lambda-nodejs";
import { LogGroup } from "aws-cdk-lib/aws-logs";
import { Queue, QueueEncryption } from "aws-cdk-lib/aws-sqs";
import { Construct } from "constructs";
import { SETTINGS } from "../functions/allocator/config.ts";
import { EVENT_SOURCE_SETTINGS } from "../functions/allocator/event-source-settings.ts";
import { METRICS_NAMESPACE, SERVICE_NAME } from "../functions/allocator/telemetry-names.ts";
import {
  CLAIMS_TABLE,
  DATAPLANES_TABLE,
  INDEX_TABLE,
  type KeyDefinition,
  MESHES_TABLE,
  type TableDefinition,
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
export { VIP_ALLOCATOR_DEFAULTS, VipAllocatorPropError } from "./vip-allocator-props.ts";

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
 * fed by the `meshes` and `dataplanes` streams, a failure queue, alarms and a dashboard.
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
  readonly dashboard: Dashboard;
  /** The validated, canonical VIP range the function is configured with. */
  readonly vipCidr: string;
  /** Whether the vips table has a stream (the prop `vipsStream`). */
  readonly vipsStream: boolean;

  constructor(scope: Construct, id: string, props: VipAllocatorProps = {}) {
    super(scope, id);
    const resolved = validateProps(props, this.node.path);
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
        POWERTOOLS_SERVICE_NAME: SERVICE_NAME,
        POWERTOOLS_METRICS_NAMESPACE: METRICS_NAMESPACE,
        NODE_OPTIONS: "--enable-source-maps",
      },
    });

    // Least privilege: read the inputs, read/write the allocator's own tables. The event
    // sources add the stream reads and the failure-queue sends.
    this.meshesTable.grants.readData(this.function);
    this.dataplanesTable.grants.readData(this.function);
    this.vipsTable.grants.readWriteData(this.function);
    this.claimsTable.grants.readWriteData(this.function);
    this.indexTable.grants.readWriteData(this.function);

    this.failureQueue = new Queue(this, "FailureQueue", {
      encryption: QueueEncryption.SQS_MANAGED,
      enforceSSL: true,
      retentionPeriod: VIP_ALLOCATOR_DEFAULTS.failureRetention,
      removalPolicy: resolved.removalPolicy,
    });

    this.meshesEventSource = this.addStream(this.meshesTable);
    this.dataplanesEventSource = this.addStream(this.dataplanesTable);

    const monitoring = new VipAllocatorMonitoring(this, "Monitoring", {
      function: this.function,
      failureQueue: this.failureQueue,
      meshesEventSource: this.meshesEventSource,
      dataplanesEventSource: this.dataplanesEventSource,
      vipCidr: this.vipCidr,
      alarmActions: props.alarmActions ?? [],
    });
    this.alarms = monitoring.alarms;
    this.dashboard = monitoring.dashboard;
    this.acknowledgeNagFindings();
  }

  /**
   * Lets a downstream service read the VIP items (GetItem by `mesh`, Query, Scan): the
   * public output of the allocator. The private `claims` table is not included.
   */
  grantRead(grantee: IGrantable): Grant {
    return this.vipsTable.grants.readData(grantee);
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

  private addStream(table: ITableV2): DynamoEventSource {
    const settings = EVENT_SOURCE_SETTINGS;
    const source = new DynamoEventSource(table, {
      startingPosition: StartingPosition[settings.startingPosition],
      batchSize: settings.batchSize,
      maxBatchingWindow: Duration.seconds(settings.maxBatchingWindowSeconds),
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
