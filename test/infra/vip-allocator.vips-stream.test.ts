import { Template } from "aws-cdk-lib/assertions";
import { Role, ServicePrincipal } from "aws-cdk-lib/aws-iam";
import { describe, expect, test } from "vitest";
import { build, getAtt, logicalId, permissionsOf, synth } from "./synth.ts";

const STREAM_READ = [
  "dynamodb:DescribeStream",
  "dynamodb:GetRecords",
  "dynamodb:GetShardIterator",
  "dynamodb:ListStreams",
];

function vipsTableResource(template: Template, id: string): Record<string, unknown> {
  const resources = template.findResources("AWS::DynamoDB::GlobalTable");
  const resource = resources[id] as { Properties: Record<string, unknown> } | undefined;
  if (resource === undefined) throw new Error(`no table ${id} in the template`);
  return resource.Properties;
}

describe("vipsStream: the change feed of the vips table", () => {
  test("is off by default: no stream on the vips table, and no grant is possible", () => {
    const { template, allocator, stack } = synth();
    const props = vipsTableResource(template, logicalId(allocator.vipsTable));
    expect(props.StreamSpecification).toBeUndefined();
    const consumer = new Role(stack, "Consumer", {
      assumedBy: new ServicePrincipal("lambda.amazonaws.com"),
    });
    expect(() => allocator.grantVipsStreamRead(consumer)).toThrow(/vipsStream: true/);
  });

  test("vipsStream: true streams NEW_AND_OLD_IMAGES on the vips table only (plus the two inputs)", () => {
    const { template, allocator } = synth({ vipsStream: true });
    const props = vipsTableResource(template, logicalId(allocator.vipsTable));
    expect(props.StreamSpecification).toEqual({ StreamViewType: "NEW_AND_OLD_IMAGES" });
    const streamed = template.findResources("AWS::DynamoDB::GlobalTable", {
      Properties: { StreamSpecification: { StreamViewType: "NEW_AND_OLD_IMAGES" } },
    });
    expect(Object.keys(streamed).sort()).toEqual(
      [allocator.meshesTable, allocator.dataplanesTable, allocator.vipsTable]
        .map((table) => logicalId(table))
        .sort(),
    );
    // The allocator's own function does not consume it.
    template.resourceCountIs("AWS::Lambda::EventSourceMapping", 2);
  });

  test("grantVipsStreamRead lets a consumer read the vips stream and nothing else", () => {
    const { stack, allocator } = build({ vipsStream: true });
    const consumer = new Role(stack, "Consumer", {
      assumedBy: new ServicePrincipal("lambda.amazonaws.com"),
    });
    allocator.grantVipsStreamRead(consumer);
    expect(permissionsOf(Template.fromStack(stack), consumer)).toEqual(
      new Map([[JSON.stringify(getAtt(allocator.vipsTable, "StreamArn")), STREAM_READ]]),
    );
  });
});
