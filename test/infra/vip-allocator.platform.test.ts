/**
 * The construct in a platform team's app (issue 29): any number of allocators with default
 * props side by side (their own metrics, derived from the construct path), an explicit collision
 * still failing synth, a grant for whoever writes the input tables, and the stack's outputs.
 */
import { App, Stack } from "aws-cdk-lib";
import { Template } from "aws-cdk-lib/assertions";
import { Role, ServicePrincipal } from "aws-cdk-lib/aws-iam";
import { Key } from "aws-cdk-lib/aws-kms";
import { describe, expect, test } from "vitest";
import { VipAllocator } from "../../infra/vip-allocator.ts";
import { build, getAtt, permissionsOf, ref, synthStack, testApp } from "./synth.ts";

const WRITE = [
  "dynamodb:BatchWriteItem",
  "dynamodb:DeleteItem",
  "dynamodb:DescribeTable",
  "dynamodb:PutItem",
  "dynamodb:UpdateItem",
];

describe("allocators with default props", () => {
  const app = testApp();
  const stack = new Stack(app, "Platform");
  const blue = new VipAllocator(stack, "Blue");
  const green = new VipAllocator(stack, "Green");
  const other = new VipAllocator(new Stack(app, "Other"), "Blue");

  test("synthesize side by side, each with its own metrics dimension derived from its path", () => {
    expect(() => app.synth()).not.toThrow();
    expect(blue.serviceName).toMatch(/^Platform-Blue-[0-9A-F]{8}$/);
    expect(green.serviceName).toMatch(/^Platform-Green-[0-9A-F]{8}$/);
    // The same id in another stack (of the same account, perhaps) gets another name too.
    expect(other.serviceName).toMatch(/^Other-Blue-[0-9A-F]{8}$/);

    const template = Template.fromStack(stack);
    const own = Object.values(template.findResources("AWS::CloudWatch::Alarm")).filter(
      (alarm) => alarm.Properties.Namespace === "VipAllocator",
    );
    const dimensions = new Set(own.map((alarm) => JSON.stringify(alarm.Properties.Dimensions)));
    expect([...dimensions].sort()).toEqual(
      [blue, green].map((a) => JSON.stringify([{ Name: "service", Value: a.serviceName }])).sort(),
    );
    const functions = Object.values(template.findResources("AWS::Lambda::Function")).map(
      (fn) => fn.Properties.Environment.Variables.POWERTOOLS_SERVICE_NAME,
    );
    expect(functions.sort()).toEqual([blue.serviceName, green.serviceName].sort());
  });

  test("an explicit collision still fails synth, naming both allocators", () => {
    const clash = new App({ context: { "aws:cdk:bundling-stacks": [] } });
    const s = new Stack(clash, "Platform");
    new VipAllocator(s, "Blue", { serviceName: "vips" });
    new VipAllocator(s, "Green", { serviceName: "vips" });
    expect(() => clash.synth()).toThrow(
      /VipAllocator at 'Platform\/Blue' and at 'Platform\/Green' publish the same metrics \(namespace VipAllocator, service=vips\)/,
    );
  });

  test("a serviceName given equal to another allocator's derived default collides too", () => {
    const clash = new App({ context: { "aws:cdk:bundling-stacks": [] } });
    const s = new Stack(clash, "Platform");
    const first = new VipAllocator(s, "Blue");
    new VipAllocator(s, "Green", { serviceName: first.serviceName });
    expect(() => clash.synth()).toThrow(/publish the same metrics/);
  });
});

describe("grantWriteInputs", () => {
  test("grants the item writes on the three input tables, and nothing on the allocator's own", () => {
    let writer: Role | undefined;
    const { stack, allocator } = build((stack) => {
      writer = new Role(stack, "KumaSync", {
        assumedBy: new ServicePrincipal("ecs-tasks.amazonaws.com"),
      });
      return { externalServices: true };
    });
    if (!writer || !allocator.externalServicesTable) throw new Error("not built");
    allocator.grantWriteInputs(writer);
    const permissions = permissionsOf(Template.fromStack(stack), writer);
    expect([...permissions.keys()].sort()).toEqual(
      [allocator.meshesTable, allocator.dataplanesTable, allocator.externalServicesTable]
        .map((table) => JSON.stringify(getAtt(table, "Arn")))
        .sort(),
    );
    for (const actions of permissions.values()) expect(actions).toEqual(WRITE);
  });

  test("covers existing input tables and their customer-managed keys", () => {
    const stream = (name: string) =>
      `arn:aws:dynamodb:eu-west-1:123456789012:table/${name}/stream/2026-01-01T00:00:00.000`;
    let writer: Role | undefined;
    let key: Key | undefined;
    const built = build((stack) => {
      writer = new Role(stack, "KumaSync", {
        assumedBy: new ServicePrincipal("ecs-tasks.amazonaws.com"),
      });
      key = new Key(stack, "InputKey");
      return {
        existingMeshesTable: { tableStreamArn: stream("kuma-meshes"), encryptionKey: key },
        existingDataplanesTable: { tableStreamArn: stream("kuma-dataplanes") },
      };
    });
    if (!writer || !key) throw new Error("not built");
    built.allocator.grantWriteInputs(writer);
    const permissions = permissionsOf(Template.fromStack(built.stack), writer);
    const text = JSON.stringify([...permissions]);
    expect(text).toContain(":table/kuma-meshes");
    expect(text).toContain(":table/kuma-dataplanes");
    expect(permissions.get(JSON.stringify(getAtt(key, "Arn")))).toEqual(
      expect.arrayContaining(["kms:Decrypt", "kms:Encrypt", "kms:GenerateDataKey*"]),
    );
  });
});

describe("the stack's outputs", () => {
  test("name every table with its ARN, the input streams, the function, the topic and the metrics dimension", () => {
    const { stack, template } = synthStack({ vipsStream: undefined });
    const a = stack.allocator;
    const outputs = template.findOutputs("*");
    const value = (id: string) => outputs[id]?.Value;
    for (const [prefix, table] of [
      ["Meshes", a.meshesTable],
      ["Dataplanes", a.dataplanesTable],
      ["Vips", a.vipsTable],
      ["Claims", a.claimsTable],
      ["Index", a.indexTable],
    ] as const) {
      expect(value(`${prefix}TableName`), prefix).toEqual(ref(table));
      expect(value(`${prefix}TableArn`), prefix).toEqual(getAtt(table, "Arn"));
    }
    expect(value("MeshesStreamArn")).toEqual(getAtt(a.meshesTable, "StreamArn"));
    expect(value("DataplanesStreamArn")).toEqual(getAtt(a.dataplanesTable, "StreamArn"));
    expect(value("VipsStreamArn")).toBeUndefined();
    expect(value("FunctionName")).toEqual(ref(a.function));
    expect(value("MetricsService")).toBe(a.serviceName);
    expect(outputs.AlarmTopicArn).toMatchObject({
      Value: ref(a.alarmTopic),
      Export: { Name: `${stack.stackName}-AlarmTopicArn` },
    });
  });
});
