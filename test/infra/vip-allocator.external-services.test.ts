import { Match } from "aws-cdk-lib/assertions";
import { describe, expect, test } from "vitest";
import { EXTERNAL_SERVICES_TABLE } from "../../functions/store/table-definitions.ts";
import { VipAllocatorPropError } from "../../infra/vip-allocator.ts";
import { build, ref, synth } from "./synth.ts";

const STREAM = (table: string) =>
  `arn:aws:dynamodb:eu-west-1:123456789012:table/${table}/stream/2026-01-01T00:00:00.000`;

function functionVariables(
  template: ReturnType<typeof synth>["template"],
): Record<string, unknown> {
  const functions = template.findResources("AWS::Lambda::Function", {
    Properties: { Description: Match.stringLikeRegexp("^VIP allocator: one VIP item") },
  });
  const [allocator] = Object.values(functions) as {
    Properties: { Environment: { Variables: Record<string, unknown> } };
  }[];
  if (allocator === undefined) throw new Error("no allocator function");
  return allocator.Properties.Environment.Variables;
}

describe("the optional external-services table", () => {
  test("absent by default: no table, no variable, two event sources", () => {
    const { template, allocator } = synth();
    expect(allocator.externalServicesTable).toBeUndefined();
    expect(allocator.externalServicesEventSource).toBeUndefined();
    expect(functionVariables(template)).not.toHaveProperty(EXTERNAL_SERVICES_TABLE.envVar);
    template.resourceCountIs("AWS::Lambda::EventSourceMapping", 2);
  });

  test("externalServices: true creates it with its stream, names it to the function, reads it from TRIM_HORIZON", () => {
    const { template, allocator } = synth({
      externalServices: true,
      tableNames: { externalServices: "kuma-external-services" },
    });
    template.hasResourceProperties("AWS::DynamoDB::GlobalTable", {
      TableName: "kuma-external-services",
      KeySchema: [
        { AttributeName: "mesh", KeyType: "HASH" },
        { AttributeName: "name", KeyType: "RANGE" },
      ],
      StreamSpecification: { StreamViewType: "NEW_AND_OLD_IMAGES" },
    });
    const table = allocator.externalServicesTable;
    if (table === undefined) throw new Error("no table");
    expect(functionVariables(template)[EXTERNAL_SERVICES_TABLE.envVar]).toEqual(ref(table));
    template.resourceCountIs("AWS::Lambda::EventSourceMapping", 3);
    template.allResourcesProperties("AWS::Lambda::EventSourceMapping", {
      StartingPosition: "TRIM_HORIZON",
    });
    expect(allocator.backfillTrigger).toBeUndefined();
  });

  test("an existing table is read from LATEST and triggers the backfill", () => {
    const arn = STREAM("kuma-es");
    const { template, allocator } = synth({
      existingExternalServicesTable: { tableName: "kuma-es", tableStreamArn: arn },
    });
    expect(functionVariables(template)[EXTERNAL_SERVICES_TABLE.envVar]).toBe("kuma-es");
    template.hasResourceProperties("AWS::Lambda::EventSourceMapping", {
      EventSourceArn: arn,
      StartingPosition: "LATEST",
    });
    expect(allocator.backfillTrigger).toBeDefined();
  });

  test("a name for a table that is not there, or both ways at once, is refused", () => {
    expect(() => build({ tableNames: { externalServices: "kuma-es" } })).toThrow(
      VipAllocatorPropError,
    );
    expect(() =>
      build({
        externalServices: false,
        existingExternalServicesTable: { tableName: "kuma-es", tableStreamArn: STREAM("kuma-es") },
      }),
    ).toThrow(VipAllocatorPropError);
  });
});
