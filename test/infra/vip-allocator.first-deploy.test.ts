import { Duration, RemovalPolicy } from "aws-cdk-lib";
import { Match, Template } from "aws-cdk-lib/assertions";
import { Role, ServicePrincipal } from "aws-cdk-lib/aws-iam";
import { describe, expect, test } from "vitest";
import { inFlightGraceSeconds } from "../../functions/allocator/config.ts";
import { READER_INDEX_ACTIONS, READER_TABLE_ACTIONS } from "../../infra/vip-allocator.ts";
import { CONTEXT_KEYS } from "../../infra/vip-allocator-stack.ts";
import { build, getAtt, logicalId, permissionsOf, ref, synth, synthStack } from "./synth.ts";

const STREAM = (table: string) =>
  `arn:aws:dynamodb:eu-west-1:123456789012:table/${table}/stream/2026-01-01T00:00:00.000`;
const EXISTING = {
  existingMeshesTable: { tableName: "kuma-meshes", tableStreamArn: STREAM("kuma-meshes") },
  existingDataplanesTable: {
    tableName: "kuma-dataplanes",
    tableStreamArn: STREAM("kuma-dataplanes"),
  },
};

/** Resources that carry a DeletionPolicy: what a removal policy applies to. */
function withDeletionPolicy(template: Template): Map<string, { type: string; policy: unknown }> {
  const found = new Map<string, { type: string; policy: unknown }>();
  for (const [id, resource] of Object.entries(template.toJSON().Resources ?? {})) {
    const { Type, DeletionPolicy, UpdateReplacePolicy } = resource as Record<string, unknown>;
    if (DeletionPolicy === undefined && UpdateReplacePolicy === undefined) continue;
    found.set(id, { type: String(Type), policy: [DeletionPolicy, UpdateReplacePolicy] });
  }
  return found;
}

describe("removal policy for a first deployment", () => {
  test("by default a failed create removes what it made; an update or delete keeps it", () => {
    const { template } = synth(EXISTING);
    const retained = withDeletionPolicy(template);
    const types = new Set([...retained.values()].map((entry) => entry.type));
    for (const type of [
      "AWS::DynamoDB::GlobalTable",
      "AWS::SQS::Queue",
      "AWS::Logs::LogGroup",
      "AWS::KMS::Key",
      "AWS::SNS::Topic",
    ]) {
      expect(types, type).toContain(type);
    }
    for (const [id, { type, policy }] of retained) {
      // The trigger's custom resource holds nothing to keep.
      if (type === "Custom::Trigger") expect(policy, id).toEqual(["Delete", "Delete"]);
      else expect(policy, id).toEqual(["RetainExceptOnCreate", "Retain"]);
    }
    // A protected table could not be deleted by the rollback of a failed create.
    template.allResourcesProperties("AWS::DynamoDB::GlobalTable", {
      Replicas: [Match.objectLike({ DeletionProtectionEnabled: false })],
    });
  });

  test("RETAIN keeps everything also after a failed create, and protects the tables", () => {
    const { template } = synth({ removalPolicy: RemovalPolicy.RETAIN });
    for (const [id, { type, policy }] of withDeletionPolicy(template)) {
      if (type !== "Custom::Trigger") expect(policy, id).toEqual(["Retain", "Retain"]);
    }
    template.allResourcesProperties("AWS::DynamoDB::GlobalTable", {
      Replicas: [Match.objectLike({ DeletionProtectionEnabled: true })],
    });
  });

  test("deletion protection can still be turned on with the default policy", () => {
    synth({ deletionProtection: true }).template.allResourcesProperties(
      "AWS::DynamoDB::GlobalTable",
      { Replicas: [Match.objectLike({ DeletionProtectionEnabled: true })] },
    );
  });

  test("the context key accepts retain-on-update-or-delete, retain and destroy", () => {
    const policies = (value: string) =>
      new Set(
        [...withDeletionPolicy(synthStack({ [CONTEXT_KEYS.removalPolicy]: value }).template)].map(
          ([, entry]) => JSON.stringify(entry.policy),
        ),
      );
    expect(policies("retain-on-update-or-delete")).toEqual(
      new Set([JSON.stringify(["RetainExceptOnCreate", "Retain"])]),
    );
    expect(policies("retain")).toEqual(new Set([JSON.stringify(["Retain", "Retain"])]));
    expect(policies("destroy")).toEqual(new Set([JSON.stringify(["Delete", "Delete"])]));
  });
});

describe("the alarm topic's key", () => {
  test("lets CloudWatch use it only on behalf of this account", () => {
    const { template } = synth();
    template.hasResourceProperties("AWS::KMS::Key", {
      KeyPolicy: {
        Statement: Match.arrayWith([
          {
            Effect: "Allow",
            Principal: { Service: "cloudwatch.amazonaws.com" },
            Action: ["kms:Decrypt", "kms:GenerateDataKey*"],
            Resource: "*",
            Condition: { StringEquals: { "aws:SourceAccount": { Ref: "AWS::AccountId" } } },
          },
        ]),
      },
    });
    const statements = Object.values(template.findResources("AWS::KMS::Key")).flatMap(
      (key) => key.Properties.KeyPolicy.Statement as { Principal?: { Service?: string } }[],
    );
    const forCloudWatch = statements.filter(
      (statement) => statement.Principal?.Service === "cloudwatch.amazonaws.com",
    );
    expect(forCloudWatch).toHaveLength(1);
  });
});

describe("tags", () => {
  /** Resource types whose CloudFormation schema has Tags, as the construct creates them. */
  const TAGGED = [
    "AWS::DynamoDB::GlobalTable",
    "AWS::Lambda::Function",
    "AWS::IAM::Role",
    "AWS::SQS::Queue",
    "AWS::SNS::Topic",
    "AWS::KMS::Key",
    "AWS::Logs::LogGroup",
    "AWS::CloudWatch::Alarm",
  ];

  function tagsOf(resource: { Properties?: Record<string, unknown> }): Map<string, string> {
    const raw = resource.Properties?.Tags;
    if (Array.isArray(raw)) {
      return new Map(raw.map((tag: { Key: string; Value: string }) => [tag.Key, tag.Value]));
    }
    // TableV2 renders tags per replica.
    const replicas = resource.Properties?.Replicas as { Tags?: { Key: string; Value: string }[] }[];
    return new Map((replicas?.[0]?.Tags ?? []).map((tag) => [tag.Key, tag.Value]));
  }

  test("every taggable resource carries the default tag and the given ones", () => {
    const { template } = synth({ ...EXISTING, tags: { team: "mesh", "cost-center": "42" } });
    for (const type of TAGGED) {
      const resources = Object.entries(template.findResources(type));
      expect(resources.length, type).toBeGreaterThan(0);
      for (const [id, resource] of resources) {
        if (type === "AWS::Lambda::Function" && id.startsWith("AWSCDK")) continue; // raw provider
        if (type === "AWS::IAM::Role" && id.startsWith("AWSCDK")) continue;
        const tags = tagsOf(resource);
        expect(tags.get("application"), `${type} ${id}`).toBe("vip-allocator");
        expect(tags.get("team"), `${type} ${id}`).toBe("mesh");
        expect(tags.get("cost-center"), `${type} ${id}`).toBe("42");
      }
    }
  });

  test("a given tag overrides the default; an aws: key is rejected naming the prop", () => {
    const { template } = synth({ tags: { application: "dns" } });
    const [queue] = Object.values(template.findResources("AWS::SQS::Queue"));
    expect(queue && tagsOf(queue).get("application")).toBe("dns");
    expect(() => build({ tags: { "aws:owner": "x" } })).toThrow(/invalid tags "aws:owner"/);
    expect(() => build({ tags: { team: "x".repeat(257) } })).toThrow(/invalid tags\.team/);
  });

  test("the stack takes tags from context as JSON", () => {
    const { template } = synthStack({ [CONTEXT_KEYS.tags]: '{"team":"mesh"}' });
    const [queue] = Object.values(template.findResources("AWS::SQS::Queue"));
    expect(queue && tagsOf(queue).get("team")).toBe("mesh");
    expect(() => synthStack({ [CONTEXT_KEYS.tags]: "team=mesh" })).toThrow(
      /invalid context tags "team=mesh"/,
    );
  });
});

describe("log groups", () => {
  test("every log group expires, the trigger provider's included", () => {
    const { template, stack } = synth(EXISTING);
    // The function's, the backfill trigger's and the trigger provider's.
    template.resourceCountIs("AWS::Logs::LogGroup", 3);
    template.allResourcesProperties("AWS::Logs::LogGroup", { RetentionInDays: 30 });
    const provider = stack.node.findChild(
      "AWSCDK.TriggerCustomResourceProviderCustomResourceProvider",
    );
    const providerLogs = provider.node.findChild("LogGroup");
    const handler = template.toJSON().Resources[logicalId(provider.node.findChild("Handler"))];
    expect(handler.Properties.LoggingConfig).toEqual({ LogGroup: ref(providerLogs) });
  });

  test("every Lambda function of the stack logs to a log group the stack owns", () => {
    const { template } = synth(EXISTING);
    const functions = Object.values(template.findResources("AWS::Lambda::Function"));
    expect(functions).toHaveLength(3);
    for (const fn of functions) {
      expect(fn.Properties.LoggingConfig?.LogGroup).toMatchObject({ Ref: expect.any(String) });
    }
  });
});

describe("reader access", () => {
  test("grantReadVips grants exactly what VipReader sends: GetItem/Scan on the table, Scan/Query on the versions index", () => {
    const { stack, allocator } = build();
    const reader = new Role(stack, "DnsTask", {
      assumedBy: new ServicePrincipal("ecs-tasks.amazonaws.com"),
    });
    allocator.grantReadVips(reader);
    const versions = {
      "Fn::Join": ["", [getAtt(allocator.vipsTable, "Arn"), "/index/versions"]],
    };
    expect(permissionsOf(Template.fromStack(stack), reader)).toEqual(
      new Map([
        [JSON.stringify(getAtt(allocator.vipsTable, "Arn")), ["dynamodb:GetItem", "dynamodb:Scan"]],
        [JSON.stringify(versions), ["dynamodb:Query", "dynamodb:Scan"]],
      ]),
    );
    expect([...READER_TABLE_ACTIONS]).toEqual(["dynamodb:GetItem", "dynamodb:Scan"]);
    expect([...READER_INDEX_ACTIONS]).toEqual(["dynamodb:Query", "dynamodb:Scan"]);
  });

  test("the stack outputs the vips table's and the versions index's ARNs", () => {
    const { template, stack } = synthStack();
    const outputs = template.toJSON().Outputs as Record<string, { Value: unknown }>;
    const table = getAtt(stack.allocator.vipsTable, "Arn");
    expect(outputs.VipsTableArn?.Value).toEqual(table);
    expect(outputs.VipsVersionsIndexArn?.Value).toEqual({
      "Fn::Join": ["", [table, "/index/versions"]],
    });
  });
});

describe("batching window", () => {
  test("defaults to 1 s; a given window goes to both event sources and the sweep's grace follows it", () => {
    const grace = (template: Template) =>
      Object.values(template.findResources("AWS::Lambda::Function")).map(
        (fn) => fn.Properties.Environment?.Variables?.SWEEP_GRACE_SECONDS,
      );
    const plain = synth().template;
    plain.allResourcesProperties("AWS::Lambda::EventSourceMapping", {
      MaximumBatchingWindowInSeconds: 1,
    });
    expect(grace(plain)).toEqual([String(inFlightGraceSeconds(1))]);
    expect(inFlightGraceSeconds(1)).toBe(7);
    const five = synth({ batchingWindow: Duration.seconds(5) }).template;
    five.allResourcesProperties("AWS::Lambda::EventSourceMapping", {
      MaximumBatchingWindowInSeconds: 5,
    });
    expect(grace(five)).toEqual(["15"]);
    expect(() => build({ batchingWindow: Duration.seconds(301) })).toThrow(
      /invalid batchingWindow .*0 to 300 seconds/,
    );
  });
});
