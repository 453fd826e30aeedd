/**
 * Props a platform team needs when it adds the construct to its own app (issue 22): telemetry
 * names, log level, existing input tables by name, ARN or stream ARN only, and the guard that
 * keeps several allocators of one app from colliding.
 */
import { Stack } from "aws-cdk-lib";
import { Match, Template } from "aws-cdk-lib/assertions";
import { describe, expect, test } from "vitest";
import {
  VipAllocator,
  VipAllocatorPropError,
  type VipAllocatorProps,
} from "../../infra/vip-allocator.ts";
import { build, synth, testApp } from "./synth.ts";

const STREAM =
  "arn:aws:dynamodb:eu-west-1:123456789012:table/kuma-meshes/stream/2026-01-01T00:00:00.000";

function rejection(props: VipAllocatorProps): VipAllocatorPropError {
  try {
    build(props);
  } catch (error) {
    if (error instanceof VipAllocatorPropError) return error;
    throw error;
  }
  throw new Error(`expected ${JSON.stringify(props)} to be rejected`);
}

describe("telemetry and logging props", () => {
  test("serviceName, metricsNamespace and logLevel reach the function and its alarms", () => {
    const { template } = synth({
      serviceName: "vips-blue",
      metricsNamespace: "Platform/Vips",
      logLevel: "WARN",
    });
    template.hasResourceProperties("AWS::Lambda::Function", {
      Environment: {
        Variables: Match.objectLike({
          POWERTOOLS_SERVICE_NAME: "vips-blue",
          POWERTOOLS_METRICS_NAMESPACE: "Platform/Vips",
          POWERTOOLS_LOG_LEVEL: "WARN",
        }),
      },
    });
    const own = template.findResources("AWS::CloudWatch::Alarm", {
      Properties: { Namespace: "Platform/Vips" },
    });
    // PoolExhausted, VipItemTooLarge, VipItemBytes, PoolUsedPercent, MeshFailures,
    // SweepRepairs, SweepCycles (the heartbeat).
    expect(Object.keys(own)).toHaveLength(7);
    for (const alarm of Object.values(own)) {
      expect(alarm.Properties.Dimensions).toEqual([{ Name: "service", Value: "vips-blue" }]);
    }
    expect(
      template.findResources("AWS::CloudWatch::Alarm", {
        Properties: { Namespace: "VipAllocator" },
      }),
    ).toEqual({});
  });

  test("rejects bad values, naming the construct and the prop", () => {
    expect(rejection({ serviceName: "has space" }).message).toMatch(
      /VipAllocator at 'Test\/VipAllocator': invalid serviceName "has space"/,
    );
    expect(rejection({ metricsNamespace: "AWS/Lambda" }).prop).toBe("metricsNamespace");
    expect(rejection({ logLevel: "VERBOSE" }).message).toMatch(
      /logLevel "VERBOSE": expected one of DEBUG/,
    );
  });
});

describe("existing input tables by name, by ARN, or by stream ARN only", () => {
  const grantsOn = (props: VipAllocatorProps): string => {
    const { template } = synth(props);
    return JSON.stringify(template.findResources("AWS::IAM::Policy"));
  };

  test("by ARN", () => {
    const policies = grantsOn({
      existingMeshesTable: {
        tableArn: "arn:aws:dynamodb:eu-west-1:123456789012:table/kuma-meshes",
        tableStreamArn: STREAM,
      },
    });
    expect(policies).toContain("arn:aws:dynamodb:eu-west-1:123456789012:table/kuma-meshes");
  });

  test("by the stream ARN alone (the table's name is in it)", () => {
    const policies = grantsOn({ existingMeshesTable: { tableStreamArn: STREAM } });
    expect(policies).toContain(":table/kuma-meshes");
  });

  test("rejects both a name and an ARN, an ARN that is not a table's, or another table's stream", () => {
    const arn = "arn:aws:dynamodb:eu-west-1:123456789012:table/kuma-meshes";
    expect(
      rejection({
        existingMeshesTable: { tableName: "kuma-meshes", tableArn: arn, tableStreamArn: STREAM },
      }).prop,
    ).toBe("existingMeshesTable.tableArn");
    expect(
      rejection({
        existingMeshesTable: { tableArn: "arn:aws:s3:::bucket", tableStreamArn: STREAM },
      }).message,
    ).toMatch(/expected a table ARN/);
    expect(
      rejection({
        existingMeshesTable: { tableArn: `${arn}-2`, tableStreamArn: STREAM },
      }).message,
    ).toMatch(/is the stream of table "kuma-meshes", not of "kuma-meshes-2"/);
  });
});

describe("several allocators in one app", () => {
  const two = (a: VipAllocatorProps, b: VipAllocatorProps) => {
    const app = testApp();
    const stack = new Stack(app, "Platform");
    new VipAllocator(stack, "Blue", a);
    new VipAllocator(stack, "Green", b);
    return { app, stack };
  };

  test("synthesize side by side with their own serviceName", () => {
    const { stack } = two({ serviceName: "vips-blue" }, { serviceName: "vips-green" });
    const template = Template.fromStack(stack);
    template.resourceCountIs("AWS::DynamoDB::GlobalTable", 10);
    template.resourceCountIs("AWS::CloudWatch::Dashboard", 2);
  });

  test("fail synth when they are given the same serviceName or a table name, naming both", () => {
    const { app } = two({ serviceName: "vips" }, { serviceName: "vips" });
    expect(() => app.synth()).toThrow(
      /VipAllocator at 'Platform\/Blue' and at 'Platform\/Green' publish the same metrics \(namespace VipAllocator, service=vips\)/,
    );
    const named = two(
      { serviceName: "a", tableNames: { vips: "shared-vips" } },
      { serviceName: "b", tableNames: { vips: "shared-vips" } },
    );
    expect(() => named.app.synth()).toThrow(/both name a table "shared-vips"/);
  });
});
