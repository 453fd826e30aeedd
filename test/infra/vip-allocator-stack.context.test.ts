import type { CfnElement } from "aws-cdk-lib";
import { Match } from "aws-cdk-lib/assertions";
import { describe, expect, test } from "vitest";
import { SETTINGS } from "../../functions/allocator/config.ts";
import { MESHES_TABLE } from "../../functions/store/table-definitions.ts";
import { VipAllocatorPropError } from "../../infra/vip-allocator.ts";
import { CONTEXT_KEYS } from "../../infra/vip-allocator-stack.ts";
import { synthStack } from "./synth.ts";

const MESHES_STREAM =
  "arn:aws:dynamodb:eu-west-1:123456789012:table/kuma-meshes/stream/2026-01-01T00:00:00.000";

function contextRejection(context: Record<string, unknown>): VipAllocatorPropError {
  try {
    synthStack(context);
  } catch (error) {
    if (error instanceof VipAllocatorPropError) return error;
    throw error;
  }
  throw new Error(`expected context ${JSON.stringify(context)} to be rejected`);
}

describe("the deployable stack", () => {
  test("outputs what a deployer and a downstream reader need", () => {
    const { template } = synthStack();
    for (const output of [
      "VipsTableName",
      "VipsTableArn",
      "MeshesTableName",
      "DataplanesTableName",
      "ClaimsTableName",
      "FunctionName",
      "FailureQueueUrl",
      "DashboardName",
    ]) {
      template.hasOutput(output, { Value: Match.anyValue() });
    }
  });

  test("exports the alarm topic's ARN", () => {
    const { stack, template } = synthStack();
    template.hasOutput("AlarmTopicArn", {
      Value: {
        Ref: stack.getLogicalId(stack.allocator.alarmTopic.node.defaultChild as CfnElement),
      },
      Export: { Name: `${stack.stackName}-AlarmTopicArn` },
    });
  });

  test("takes its settings from CDK context (-c key=value)", () => {
    const { template } = synthStack({
      [CONTEXT_KEYS.vipCidr]: "10.64.0.0/12",
      [CONTEXT_KEYS.quarantineSeconds]: "600",
      [CONTEXT_KEYS.meshesTableName]: "kuma-meshes",
      [CONTEXT_KEYS.meshesStreamArn]: MESHES_STREAM,
      [CONTEXT_KEYS.removalPolicy]: "destroy",
      [CONTEXT_KEYS.logRetentionDays]: 90,
      [CONTEXT_KEYS.alarmTopicArn]: "arn:aws:sns:eu-west-1:123456789012:ops",
    });
    template.hasResourceProperties("AWS::Lambda::Function", {
      Environment: {
        Variables: Match.objectLike({
          [SETTINGS.cidr.envVar]: "10.64.0.0/12",
          [SETTINGS.quarantineSeconds.envVar]: "600",
          [MESHES_TABLE.envVar]: "kuma-meshes",
        }),
      },
    });
    // dataplanes, vips, claims, index (the meshes table is an existing one)
    template.resourceCountIs("AWS::DynamoDB::GlobalTable", 4);
    template.hasResourceProperties("AWS::Lambda::EventSourceMapping", {
      EventSourceArn: MESHES_STREAM,
    });
    template.allResources("AWS::DynamoDB::GlobalTable", { DeletionPolicy: "Delete" });
    template.hasResourceProperties("AWS::Logs::LogGroup", { RetentionInDays: 90 });
    template.allResourcesProperties("AWS::CloudWatch::Alarm", {
      AlarmActions: ["arn:aws:sns:eu-west-1:123456789012:ops"],
    });
    // The given topic replaces the created one.
    template.resourceCountIs("AWS::SNS::Topic", 0);
    template.hasOutput("AlarmTopicArn", { Value: "arn:aws:sns:eu-west-1:123456789012:ops" });
  });

  test("rejects unparsable context values, naming the key and the value", () => {
    const quarantine = contextRejection({ [CONTEXT_KEYS.quarantineSeconds]: "1h" });
    expect(quarantine.message).toContain(`context ${CONTEXT_KEYS.quarantineSeconds} "1h"`);
    const removal = contextRejection({ [CONTEXT_KEYS.removalPolicy]: "snapshot" });
    expect(removal.message).toContain(
      '"snapshot": expected one of retain-on-update-or-delete, retain, destroy',
    );
    const halfTable = contextRejection({ [CONTEXT_KEYS.meshesTableName]: "kuma-meshes" });
    expect(halfTable.message).toContain(CONTEXT_KEYS.meshesStreamArn);
    const topic = contextRejection({ [CONTEXT_KEYS.alarmTopicArn]: "ops" });
    expect(topic.message).toContain('"ops"');
    const retention = contextRejection({ [CONTEXT_KEYS.logRetentionDays]: "42" });
    expect(retention.message).toContain("42");
  });

  test("sweepScheduleMinutes sets the sweep period; 0 turns the schedule off", () => {
    synthStack({ [CONTEXT_KEYS.sweepScheduleMinutes]: "60" }).template.hasResourceProperties(
      "AWS::Scheduler::Schedule",
      { ScheduleExpression: "rate(1 hour)" },
    );
    synthStack({ [CONTEXT_KEYS.sweepScheduleMinutes]: 0 }).template.resourceCountIs(
      "AWS::Scheduler::Schedule",
      0,
    );
    expect(contextRejection({ [CONTEXT_KEYS.sweepScheduleMinutes]: "15m" }).message).toContain(
      `context ${CONTEXT_KEYS.sweepScheduleMinutes} "15m"`,
    );
    expect(contextRejection({ [CONTEXT_KEYS.sweepScheduleMinutes]: "2000" }).prop).toBe(
      "sweepSchedule",
    );
  });

  test("validates context values like props", () => {
    const error = contextRejection({ [CONTEXT_KEYS.vipCidr]: "10.0.0.0/40" });
    expect(error.prop).toBe("vipCidr");
    expect(error.message).toContain('"10.0.0.0/40"');
  });
});
