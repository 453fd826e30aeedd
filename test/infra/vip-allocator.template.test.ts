import { Duration, RemovalPolicy } from "aws-cdk-lib";
import { Match, Template } from "aws-cdk-lib/assertions";
import { SnsAction } from "aws-cdk-lib/aws-cloudwatch-actions";
import { Role, ServicePrincipal } from "aws-cdk-lib/aws-iam";
import { Key } from "aws-cdk-lib/aws-kms";
import { Topic } from "aws-cdk-lib/aws-sns";
import type { IConstruct } from "constructs";
import { describe, expect, test } from "vitest";
import {
  EVENT_SOURCE_SETTINGS,
  inFlightGraceSeconds,
  SETTINGS,
} from "../../functions/allocator/config.ts";
import { METRICS_NAMESPACE } from "../../functions/allocator/telemetry-names.ts";
import {
  ALL_TABLES,
  CLAIMS_TABLE,
  DATAPLANES_TABLE,
  INDEX_TABLE,
  MESHES_TABLE,
  type TableDefinition,
  VIPS_TABLE,
} from "../../functions/store/table-definitions.ts";
import { build, getAtt, permissionsOf, ref, synth } from "./synth.ts";

const READ_DATA = [
  "dynamodb:BatchGetItem",
  "dynamodb:ConditionCheckItem",
  "dynamodb:DescribeTable",
  "dynamodb:GetItem",
  "dynamodb:GetRecords",
  "dynamodb:GetShardIterator",
  "dynamodb:Query",
  "dynamodb:Scan",
];
const READ_WRITE_DATA = [
  ...READ_DATA,
  "dynamodb:BatchWriteItem",
  "dynamodb:DeleteItem",
  "dynamodb:PutItem",
  "dynamodb:UpdateItem",
].sort();
const STREAM_READ = [
  "dynamodb:DescribeStream",
  "dynamodb:GetRecords",
  "dynamodb:GetShardIterator",
  "dynamodb:ListStreams",
];

function keySchema(def: TableDefinition) {
  return [
    { AttributeName: def.partitionKey.name, KeyType: "HASH" },
    ...(def.sortKey ? [{ AttributeName: def.sortKey.name, KeyType: "RANGE" }] : []),
  ];
}

describe("tables", () => {
  const { template } = synth();

  test("creates every table (five) from the shared definitions, on demand, encrypted, with PITR", () => {
    template.resourceCountIs("AWS::DynamoDB::GlobalTable", ALL_TABLES.length);
    for (const def of ALL_TABLES) {
      template.hasResource("AWS::DynamoDB::GlobalTable", {
        Properties: Match.objectLike({
          KeySchema: keySchema(def),
          BillingMode: "PAY_PER_REQUEST",
          SSESpecification: { SSEEnabled: true, SSEType: "KMS" },
          Replicas: [
            Match.objectLike({
              PointInTimeRecoverySpecification: { PointInTimeRecoveryEnabled: true },
              // Off by default: a protected table would block the cleanup of a failed create.
              DeletionProtectionEnabled: false,
            }),
          ],
          StreamSpecification: def.stream ? { StreamViewType: def.stream } : Match.absent(),
        }),
        DeletionPolicy: "RetainExceptOnCreate",
        UpdateReplacePolicy: "Retain",
      });
    }
  });

  test("streams NEW_AND_OLD_IMAGES on meshes and dataplanes only, not on vips or claims", () => {
    expect(MESHES_TABLE.stream).toBe("NEW_AND_OLD_IMAGES");
    expect(DATAPLANES_TABLE.stream).toBe("NEW_AND_OLD_IMAGES");
    const streamed = template.findResources("AWS::DynamoDB::GlobalTable", {
      Properties: { StreamSpecification: { StreamViewType: "NEW_AND_OLD_IMAGES" } },
    });
    expect(Object.keys(streamed)).toHaveLength(2);
    for (const def of [VIPS_TABLE, CLAIMS_TABLE]) {
      template.hasResourceProperties("AWS::DynamoDB::GlobalTable", {
        KeySchema: keySchema(def),
        StreamSpecification: Match.absent(),
      });
    }
  });

  test("names the tables when asked, and otherwise leaves naming to CloudFormation", () => {
    const named = synth({ tableNames: { vips: "prod-vips" } }).template;
    named.hasResourceProperties("AWS::DynamoDB::GlobalTable", {
      TableName: "prod-vips",
      KeySchema: keySchema(VIPS_TABLE),
    });
    template.allResourcesProperties("AWS::DynamoDB::GlobalTable", { TableName: Match.absent() });
  });

  test("removalPolicy DESTROY deletes the tables and turns deletion protection off", () => {
    const { template: destroyed } = synth({ removalPolicy: RemovalPolicy.DESTROY });
    destroyed.allResources("AWS::DynamoDB::GlobalTable", {
      DeletionPolicy: "Delete",
      Properties: Match.objectLike({
        Replicas: [Match.objectLike({ DeletionProtectionEnabled: false })],
      }),
    });
    destroyed.allResources("AWS::SQS::Queue", { DeletionPolicy: "Delete" });
  });
});

describe("function", () => {
  const { template, allocator } = synth({
    vipCidr: "10.64.0.0/12",
    quarantine: Duration.minutes(30),
  });

  test("runs a current Node.js on arm64 with the chosen memory and timeout", () => {
    template.resourceCountIs("AWS::Lambda::Function", 1);
    template.hasResourceProperties("AWS::Lambda::Function", {
      Runtime: "nodejs24.x",
      Architectures: ["arm64"],
      Handler: "index.handler",
      MemorySize: 512,
      Timeout: 60,
      LoggingConfig: { LogGroup: ref(allocator.logGroup) },
    });
  });

  test("is configured from the same constants the function's config reads, and nothing else", () => {
    // Exactly: a setting the construct forgets (or adds) fails here. One variable per table
    // definition, naming the construct's table of that id.
    const tables: Record<Exclude<TableDefinition["id"], "externalServices">, IConstruct> = {
      meshes: allocator.meshesTable,
      dataplanes: allocator.dataplanesTable,
      vips: allocator.vipsTable,
      claims: allocator.claimsTable,
      index: allocator.indexTable,
    };
    const variables = {
      ...Object.fromEntries(
        ALL_TABLES.map((def) => [def.envVar, ref(tables[def.id as keyof typeof tables])]),
      ),
      [SETTINGS.cidr.envVar]: "10.64.0.0/12",
      [SETTINGS.quarantineSeconds.envVar]: "1800",
      [SETTINGS.sweepGraceSeconds.envVar]: String(
        inFlightGraceSeconds(EVENT_SOURCE_SETTINGS.maxBatchingWindowSeconds),
      ),
      // The default serviceName: derived from the construct's path (stack Test, id VipAllocator).
      POWERTOOLS_SERVICE_NAME: "Test-VipAllocator-E904E517",
      POWERTOOLS_METRICS_NAMESPACE: METRICS_NAMESPACE,
      POWERTOOLS_LOG_LEVEL: "INFO",
      NODE_OPTIONS: "--enable-source-maps",
    };
    expect(Object.keys(variables)).toHaveLength(ALL_TABLES.length + 7);
    template.hasResourceProperties("AWS::Lambda::Function", {
      Environment: { Variables: Match.exact(variables) },
    });
  });

  test("defaults to the contract's range and quarantine, in canonical form", () => {
    synth().template.hasResourceProperties("AWS::Lambda::Function", {
      Environment: {
        Variables: Match.objectLike({
          [SETTINGS.cidr.envVar]: SETTINGS.cidr.default,
          [SETTINGS.quarantineSeconds.envVar]: SETTINGS.quarantineSeconds.default,
        }),
      },
    });
    synth({ vipCidr: " fd00:0:0:0::/64 " }).template.hasResourceProperties(
      "AWS::Lambda::Function",
      {
        Environment: { Variables: Match.objectLike({ [SETTINGS.cidr.envVar]: "fd00::/64" }) },
      },
    );
  });

  test("keeps its logs for a month by default", () => {
    template.hasResourceProperties("AWS::Logs::LogGroup", { RetentionInDays: 30 });
  });

  test("accepts another memory size and timeout", () => {
    synth({ memorySize: 1024, timeout: Duration.minutes(2) }).template.hasResourceProperties(
      "AWS::Lambda::Function",
      { MemorySize: 1024, Timeout: 120 },
    );
  });
});

describe("event sources", () => {
  const { template, allocator } = synth();
  const settings = EVENT_SOURCE_SETTINGS;

  test("maps each input stream to the function with the shared, bounded settings", () => {
    template.resourceCountIs("AWS::Lambda::EventSourceMapping", 2);
    for (const table of [allocator.meshesTable, allocator.dataplanesTable]) {
      template.hasResourceProperties("AWS::Lambda::EventSourceMapping", {
        EventSourceArn: getAtt(table, "StreamArn"),
        FunctionName: ref(allocator.function),
        StartingPosition: "TRIM_HORIZON",
        BatchSize: settings.batchSize,
        MaximumBatchingWindowInSeconds: settings.maxBatchingWindowSeconds,
        MaximumRetryAttempts: settings.retryAttempts,
        MaximumRecordAgeInSeconds: settings.maxRecordAgeSeconds,
        BisectBatchOnFunctionError: true,
        FunctionResponseTypes: ["ReportBatchItemFailures"],
        ParallelizationFactor: 1,
        DestinationConfig: { OnFailure: { Destination: getAtt(allocator.failureQueue, "Arn") } },
        MetricsConfig: { Metrics: ["EventCount"] },
      });
    }
  });

  test("bounds retries and record age below the 24 h stream retention", () => {
    expect(settings.retryAttempts).toBeGreaterThan(0);
    expect(settings.retryAttempts).toBeLessThanOrEqual(10);
    expect(settings.maxRecordAgeSeconds).toBeLessThan(24 * 3600);
  });

  test("sends failures to an encrypted, TLS-only queue that keeps them 14 days", () => {
    template.resourceCountIs("AWS::SQS::Queue", 1);
    template.hasResourceProperties("AWS::SQS::Queue", {
      MessageRetentionPeriod: 14 * 24 * 3600,
      SqsManagedSseEnabled: true,
    });
    template.hasResourceProperties("AWS::SQS::QueuePolicy", {
      Queues: [ref(allocator.failureQueue)],
      PolicyDocument: {
        Statement: Match.arrayWith([
          Match.objectLike({
            Effect: "Deny",
            Condition: { Bool: { "aws:SecureTransport": "false" } },
          }),
        ]),
      },
    });
  });
});

describe("least privilege", () => {
  test("the function may read the input tables and streams, read/write only its own tables, and invoke itself", () => {
    const { template, allocator } = synth();
    const expected = new Map<string, string[]>([
      [JSON.stringify(getAtt(allocator.meshesTable, "Arn")), READ_DATA],
      [JSON.stringify(getAtt(allocator.dataplanesTable, "Arn")), READ_DATA],
      [JSON.stringify(getAtt(allocator.vipsTable, "Arn")), READ_WRITE_DATA],
      [JSON.stringify(getAtt(allocator.claimsTable, "Arn")), READ_WRITE_DATA],
      [JSON.stringify(getAtt(allocator.indexTable, "Arn")), READ_WRITE_DATA],
      [JSON.stringify(getAtt(allocator.meshesTable, "StreamArn")), STREAM_READ],
      [JSON.stringify(getAtt(allocator.dataplanesTable, "StreamArn")), STREAM_READ],
      [
        JSON.stringify(getAtt(allocator.failureQueue, "Arn")),
        ["sqs:GetQueueAttributes", "sqs:GetQueueUrl", "sqs:SendMessage"],
      ],
      [
        JSON.stringify(getAtt(allocator.logGroup, "Arn")),
        ["logs:CreateLogStream", "logs:PutLogEvents"],
      ],
      // Itself, asynchronously: a pass that runs out of time goes on (decision 160).
      [JSON.stringify(getAtt(allocator.function, "Arn")), ["lambda:InvokeFunction"]],
    ]);
    const role = allocator.function.role;
    if (!role) throw new Error("function has no role");
    expect(permissionsOf(template, role)).toEqual(expected);
  });

  test("the roles have no managed policy and nothing in the stack is granted on *", () => {
    const { template } = synth();
    // The function's role and the sweep schedule's role.
    template.resourceCountIs("AWS::IAM::Role", 2);
    template.hasResourceProperties("AWS::IAM::Role", {
      AssumeRolePolicyDocument: {
        Statement: [Match.objectLike({ Principal: { Service: "lambda.amazonaws.com" } })],
      },
      ManagedPolicyArns: Match.absent(),
    });
    template.allResourcesProperties("AWS::IAM::Role", { ManagedPolicyArns: Match.absent() });
    const policies = JSON.stringify(template.findResources("AWS::IAM::Policy"));
    expect(policies).not.toContain('"*"');
    expect(policies).not.toMatch(/"dynamodb:\*"|"sqs:\*"|"logs:\*"/);
  });

  test("grantRead lets a downstream reader read the vips table and its versions index, nothing else", () => {
    const { stack, allocator } = build();
    const reader = new Role(stack, "DownstreamReader", {
      assumedBy: new ServicePrincipal("ecs-tasks.amazonaws.com"),
    });
    allocator.grantRead(reader);
    const versions = {
      "Fn::Join": ["", [getAtt(allocator.vipsTable, "Arn"), "/index/versions"]],
    };
    expect(permissionsOf(Template.fromStack(stack), reader)).toEqual(
      new Map([
        [JSON.stringify(getAtt(allocator.vipsTable, "Arn")), READ_DATA],
        [JSON.stringify(versions), READ_DATA],
      ]),
    );
  });
});

describe("existing input tables", () => {
  const meshesStream =
    "arn:aws:dynamodb:eu-west-1:123456789012:table/kuma-meshes/stream/2026-01-01T00:00:00.000";
  const dataplanesStream =
    "arn:aws:dynamodb:eu-west-1:123456789012:table/kuma-dataplanes/stream/2026-01-01T00:00:00.000";

  test("creates only the allocator's own tables and reads the given streams", () => {
    const { template, allocator } = synth({
      existingMeshesTable: { tableName: "kuma-meshes", tableStreamArn: meshesStream },
      existingDataplanesTable: { tableName: "kuma-dataplanes", tableStreamArn: dataplanesStream },
    });
    template.resourceCountIs("AWS::DynamoDB::GlobalTable", 3);
    for (const def of [VIPS_TABLE, CLAIMS_TABLE, INDEX_TABLE]) {
      template.hasResourceProperties("AWS::DynamoDB::GlobalTable", { KeySchema: keySchema(def) });
    }
    for (const arn of [meshesStream, dataplanesStream]) {
      template.hasResourceProperties("AWS::Lambda::EventSourceMapping", {
        EventSourceArn: arn,
        // The backfill covers what was in the tables before; no replay of a day of records.
        StartingPosition: "LATEST",
        BisectBatchOnFunctionError: true,
      });
    }
    template.hasResourceProperties("AWS::Lambda::Function", {
      Environment: {
        Variables: Match.objectLike({
          [MESHES_TABLE.envVar]: "kuma-meshes",
          [DATAPLANES_TABLE.envVar]: "kuma-dataplanes",
        }),
      },
    });
    const role = allocator.function.role;
    if (!role) throw new Error("function has no role");
    const permissions = permissionsOf(template, role);
    expect(permissions.get(JSON.stringify(meshesStream))).toEqual(STREAM_READ);
    expect(permissions.get(JSON.stringify(dataplanesStream))).toEqual(STREAM_READ);
    const tableArns = [...permissions.keys()].filter((key) =>
      /:table\/kuma-(meshes|dataplanes)"/.test(key),
    );
    expect(tableArns).toHaveLength(2);
    for (const key of tableArns) expect(permissions.get(key)).toEqual(READ_DATA);
  });

  test("grants decrypt on the customer-managed key of an existing table", () => {
    const keyArn = "arn:aws:kms:eu-west-1:123456789012:key/11111111-2222-3333-4444-555555555555";
    const { template, allocator } = synth((stack) => ({
      existingMeshesTable: {
        tableName: "kuma-meshes",
        tableStreamArn: meshesStream,
        encryptionKey: Key.fromKeyArn(stack, "MeshesKey", keyArn),
      },
    }));
    const role = allocator.function.role;
    if (!role) throw new Error("function has no role");
    expect(permissionsOf(template, role).get(JSON.stringify(keyArn))).toEqual([
      "kms:Decrypt",
      "kms:DescribeKey",
    ]);
  });
});

describe("observability", () => {
  // Each alarm's metric, threshold, datapoints and missing data: vip-allocator.alarms.test.ts.

  test("every alarm notifies the alarm topic, then the further alarm actions, when it fires and when it clears", () => {
    const { template: plain, allocator } = synth();
    plain.allResourcesProperties("AWS::CloudWatch::Alarm", {
      AlarmActions: [ref(allocator.alarmTopic)],
      OKActions: [ref(allocator.alarmTopic)],
    });

    let topic: Topic | undefined;
    const { template: withActions, allocator: withActionsAllocator } = synth((stack) => {
      topic = new Topic(stack, "Ops");
      return { alarmActions: [new SnsAction(topic)] };
    });
    if (!topic) throw new Error("topic not created");
    withActions.allResourcesProperties("AWS::CloudWatch::Alarm", {
      AlarmActions: [ref(withActionsAllocator.alarmTopic), ref(topic)],
      OKActions: [ref(withActionsAllocator.alarmTopic), ref(topic)],
    });
  });

  test("a given alarm topic replaces the created one", () => {
    let topic: Topic | undefined;
    const { template: given, allocator } = synth((stack) => {
      topic = new Topic(stack, "Ops");
      return { alarmTopic: topic };
    });
    if (!topic) throw new Error("topic not created");
    expect(allocator.alarmTopic).toBe(topic);
    expect(allocator.alarmTopicKey).toBeUndefined();
    given.resourceCountIs("AWS::SNS::Topic", 1);
    given.resourceCountIs("AWS::KMS::Key", 0);
    given.allResourcesProperties("AWS::CloudWatch::Alarm", { AlarmActions: [ref(topic)] });
  });

  // The dashboard: vip-allocator.alarms.test.ts.
});
