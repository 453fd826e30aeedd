import { type App, Duration, Stack } from "aws-cdk-lib";
import { Match, Template } from "aws-cdk-lib/assertions";
import { describe, expect, test } from "vitest";
import {
  BACKFILL,
  EVENT_SOURCE_SETTINGS,
  SCHEDULED_SWEEP,
} from "../../functions/allocator/config.ts";
import { METRIC } from "../../functions/allocator/telemetry-names.ts";
import { VipAllocator } from "../../infra/vip-allocator.ts";
import { getAtt, logicalId, permissionsOf, ref, synth, testApp } from "./synth.ts";

const STREAM = (table: string) =>
  `arn:aws:dynamodb:eu-west-1:123456789012:table/${table}/stream/2026-01-01T00:00:00.000`;
const EXISTING_MESHES = { tableName: "kuma-meshes", tableStreamArn: STREAM("kuma-meshes") };
const EXISTING_DATAPLANES = {
  tableName: "kuma-dataplanes",
  tableStreamArn: STREAM("kuma-dataplanes"),
};

describe("repair sweep schedule", () => {
  const { template, allocator } = synth();
  const schedule = allocator.sweepSchedule;
  if (!schedule) throw new Error("no sweep schedule by default");

  test("invokes the allocator function with the sweep payload every 15 minutes", () => {
    template.resourceCountIs("AWS::Scheduler::Schedule", 1);
    template.hasResourceProperties("AWS::Scheduler::Schedule", {
      ScheduleExpression: "rate(15 minutes)",
      State: "ENABLED",
      FlexibleTimeWindow: { Mode: "OFF" },
      Target: {
        Arn: getAtt(allocator.function, "Arn"),
        Input: JSON.stringify(SCHEDULED_SWEEP),
        RoleArn: Match.anyValue(),
        // Undelivered sweeps are retried a little and expire after one period (the next
        // sweep supersedes them); no dead-letter queue.
        RetryPolicy: { MaximumRetryAttempts: 2, MaximumEventAgeInSeconds: 15 * 60 },
        DeadLetterConfig: Match.absent(),
      },
    });
    expect(JSON.parse(JSON.stringify(SCHEDULED_SWEEP))).toEqual({ vipAllocator: "sweep" });
  });

  test("runs under a role that EventBridge Scheduler of this account assumes and that may only invoke the function", () => {
    const role = allocator.node.findChild("SweepScheduleRole");
    const roleId = logicalId(role);
    template.hasResourceProperties("AWS::Scheduler::Schedule", {
      Target: Match.objectLike({ RoleArn: getAtt(role, "Arn") }),
    });
    expect(permissionsOf(template, role)).toEqual(
      new Map([[JSON.stringify(getAtt(allocator.function, "Arn")), ["lambda:InvokeFunction"]]]),
    );
    expect(template.toJSON().Resources[roleId].Properties.AssumeRolePolicyDocument).toEqual({
      Version: "2012-10-17",
      Statement: [
        {
          Action: "sts:AssumeRole",
          Effect: "Allow",
          Principal: { Service: "scheduler.amazonaws.com" },
          Condition: { StringEquals: { "aws:SourceAccount": { Ref: "AWS::AccountId" } } },
        },
      ],
    });
  });

  test("takes another period, which is also the SweepRepairs alarm's period", () => {
    const { template: hourly } = synth({ sweepSchedule: Duration.hours(1) });
    hourly.hasResourceProperties("AWS::Scheduler::Schedule", {
      ScheduleExpression: "rate(1 hour)",
      Target: Match.objectLike({
        RetryPolicy: Match.objectLike({ MaximumEventAgeInSeconds: 3600 }),
      }),
    });
    hourly.hasResourceProperties("AWS::CloudWatch::Alarm", {
      MetricName: METRIC.sweepRepairs,
      Period: 3600,
    });
  });

  test("sweepSchedule false creates no schedule and no scheduler role", () => {
    const { template: off, allocator: offAllocator } = synth({ sweepSchedule: false });
    expect(offAllocator.sweepSchedule).toBeUndefined();
    off.resourceCountIs("AWS::Scheduler::Schedule", 0);
    off.resourceCountIs("AWS::IAM::Role", 1);
    // The SweepRepairs alarm stays (a backfill or a manual sweep may still repair).
    off.hasResourceProperties("AWS::CloudWatch::Alarm", {
      MetricName: METRIC.sweepRepairs,
      Period: 15 * 60,
    });
  });
});

describe("alarm topic", () => {
  const { template, allocator } = synth();
  const key = allocator.alarmTopicKey;
  if (!key) throw new Error("no alarm topic key by default");

  test("is created, encrypted with a rotated customer-managed key", () => {
    template.resourceCountIs("AWS::SNS::Topic", 1);
    template.hasResourceProperties("AWS::SNS::Topic", {
      KmsMasterKeyId: getAtt(key, "Arn"),
    });
    template.hasResourceProperties("AWS::KMS::Key", { EnableKeyRotation: true });
  });

  test("accepts only TLS, and lets CloudWatch alarms of this account publish and use the key", () => {
    template.hasResourceProperties("AWS::SNS::TopicPolicy", {
      Topics: [ref(allocator.alarmTopic)],
      PolicyDocument: {
        Statement: Match.arrayWith([
          Match.objectLike({
            Effect: "Deny",
            Action: "sns:Publish",
            Condition: { Bool: { "aws:SecureTransport": "false" } },
          }),
          Match.objectLike({
            Effect: "Allow",
            Action: "sns:Publish",
            Principal: { Service: "cloudwatch.amazonaws.com" },
            Condition: {
              ArnLike: { "aws:SourceArn": Match.anyValue() },
              StringEquals: { "aws:SourceAccount": { Ref: "AWS::AccountId" } },
            },
          }),
        ]),
      },
    });
    template.hasResourceProperties("AWS::KMS::Key", {
      KeyPolicy: {
        Statement: Match.arrayWith([
          Match.objectLike({
            Effect: "Allow",
            Principal: { Service: "cloudwatch.amazonaws.com" },
            Action: ["kms:Decrypt", "kms:GenerateDataKey*"],
          }),
        ]),
      },
    });
  });

  test("every alarm notifies it", () => {
    const alarms = Object.values(template.findResources("AWS::CloudWatch::Alarm"));
    // 10 of the function, the queue and its own metrics, the heartbeat, one per table (5).
    expect(alarms).toHaveLength(16);
    for (const alarm of alarms) {
      expect(alarm.Properties.AlarmActions).toEqual([ref(allocator.alarmTopic)]);
    }
  });
});

describe("backfill after deploying onto existing tables", () => {
  test("is absent when the construct creates both input tables", () => {
    const { template, allocator } = synth();
    expect(allocator.backfillTrigger).toBeUndefined();
    template.resourceCountIs("Custom::Trigger", 0);
    template.resourceCountIs("AWS::Lambda::Function", 1);
    template.allResourcesProperties("AWS::Lambda::EventSourceMapping", {
      StartingPosition: EVENT_SOURCE_SETTINGS.startingPosition,
    });
    expect(EVENT_SOURCE_SETTINGS.startingPosition).toBe("TRIM_HORIZON");
  });

  for (const [mode, props] of [
    [
      "both input tables existing",
      { existingMeshesTable: EXISTING_MESHES, existingDataplanesTable: EXISTING_DATAPLANES },
    ],
    ["only the meshes table existing", { existingMeshesTable: EXISTING_MESHES }],
    ["only the dataplanes table existing", { existingDataplanesTable: EXISTING_DATAPLANES }],
  ] as const) {
    test(`${mode}: one trigger invokes the allocator with the backfill payload after the event source mappings exist`, () => {
      const { template, allocator } = synth(props);
      const trigger = allocator.backfillTrigger;
      if (!trigger) throw new Error("no backfill trigger");
      template.resourceCountIs("Custom::Trigger", 1);
      template.hasResourceProperties("AWS::Lambda::Function", {
        Handler: "index.handler",
        Runtime: "nodejs24.x",
        Environment: {
          Variables: Match.objectLike({
            ALLOCATOR_FUNCTION: ref(allocator.function),
            PAYLOAD: JSON.stringify(BACKFILL),
          }),
        },
      });
      expect(JSON.parse(JSON.stringify(BACKFILL))).toEqual({ vipAllocator: "backfill" });
      const code = JSON.stringify(template.toJSON().Resources[logicalId(trigger)].Properties.Code);
      expect(code).toContain("InvokeCommand");
      expect(code).toContain('InvocationType: \\"Event\\"');

      const [customResource] = Object.values(template.findResources("Custom::Trigger"));
      const dependsOn = customResource?.DependsOn as string[];
      const mappings = Object.keys(template.findResources("AWS::Lambda::EventSourceMapping"));
      expect(mappings).toHaveLength(2);
      for (const dependency of [
        ...mappings,
        logicalId(allocator.function),
        logicalId(allocator.claimsTable),
        logicalId(allocator.indexTable),
        logicalId(allocator.vipsTable),
        // The backfill goes on in invocations of its own (decision 160).
        logicalId(allocator.node.findChild("ContinuationPolicy")),
      ]) {
        expect(dependsOn).toContain(dependency);
      }

      // Its role may only invoke the allocator (and write its own log group).
      const role = trigger.role;
      if (!role) throw new Error("trigger function has no role");
      const permissions = permissionsOf(template, role);
      expect(permissions.get(JSON.stringify(getAtt(allocator.function, "Arn")))).toEqual([
        "lambda:InvokeFunction",
      ]);
      expect([...permissions.values()].flat().sort()).toEqual([
        "lambda:InvokeFunction",
        "logs:CreateLogStream",
        "logs:PutLogEvents",
      ]);
    });
  }

  test("existing tables' event sources start at LATEST, a created table's at TRIM_HORIZON", () => {
    const { template, allocator } = synth({ existingMeshesTable: EXISTING_MESHES });
    template.hasResourceProperties("AWS::Lambda::EventSourceMapping", {
      EventSourceArn: EXISTING_MESHES.tableStreamArn,
      StartingPosition: "LATEST",
    });
    template.hasResourceProperties("AWS::Lambda::EventSourceMapping", {
      EventSourceArn: getAtt(allocator.dataplanesTable, "StreamArn"),
      StartingPosition: "TRIM_HORIZON",
    });
  });
});

describe("the private tables stay in one region", () => {
  function regional(): { app: App; stack: Stack; allocator: VipAllocator } {
    const app = testApp();
    const stack = new Stack(app, "Regional", {
      env: { account: "123456789012", region: "eu-west-1" },
    });
    return { app, stack, allocator: new VipAllocator(stack, "VipAllocator") };
  }

  test("synth fails when the claims table gets a replica", () => {
    const { stack, allocator } = regional();
    allocator.claimsTable.addReplica({ region: "us-east-1" });
    expect(() => Template.fromStack(stack)).toThrow(
      /ClaimsTable\] VipAllocator at 'Regional\/VipAllocator': the claims table must not have replicas \(found 2 regions: [^)]*us-east-1[^)]*\).*one region/,
    );
  });

  test("synth fails when the index table gets a replica", () => {
    const { stack, allocator } = regional();
    allocator.indexTable.addReplica({ region: "us-west-2" });
    expect(() => Template.fromStack(stack)).toThrow(/the index table must not have replicas/);
  });

  test("the vips table may have replicas (readers in other regions), and one region synthesizes", () => {
    const plain = regional();
    expect(() => Template.fromStack(plain.stack)).not.toThrow();
    const { stack, allocator } = regional();
    allocator.vipsTable.addReplica({ region: "us-east-1" });
    expect(() => Template.fromStack(stack)).not.toThrow();
  });
});
