/**
 * Readers anywhere (decisions 120, 121): a grant to a principal of another account goes on the
 * vips table's resource-based policies (table, index, stream) and the table key's policy, never
 * into an IAM policy of the allocator's account; `readerRegions` puts replicas of the vips table
 * (only) in other regions, and the grants cover them. cdk-nag stays clean.
 */
import { Stack } from "aws-cdk-lib";
import { Template } from "aws-cdk-lib/assertions";
import { TableEncryptionV2 } from "aws-cdk-lib/aws-dynamodb";
import { AccountPrincipal, type IRole, Role, ServicePrincipal } from "aws-cdk-lib/aws-iam";
import { Key } from "aws-cdk-lib/aws-kms";
import { AwsSolutionsChecks } from "cdk-nag";
import type { IConstruct } from "constructs";
import { describe, expect, test } from "vitest";
import {
  VipAllocator,
  VipAllocatorPropError,
  type VipAllocatorProps,
} from "../../infra/vip-allocator.ts";
import { getAtt, logicalId, permissionsOf, testApp } from "./synth.ts";

const HOME = "us-east-1";
const ACCOUNT = "111111111111";
const OTHER = "222222222222";
const READER_ARN = `arn:aws:iam::${OTHER}:role/vip-reader`;
const READ_ACTIONS = ["dynamodb:GetItem", "dynamodb:Query", "dynamodb:Scan"];
const STREAM_ACTIONS = [
  "dynamodb:DescribeStream",
  "dynamodb:GetRecords",
  "dynamodb:GetShardIterator",
];

interface World {
  readonly stack: Stack;
  readonly allocator: VipAllocator;
}

/** A VipAllocator in a stack of account 111111111111 in us-east-1 (or env-agnostic). */
function world(
  props: VipAllocatorProps | ((stack: Stack) => VipAllocatorProps) = {},
  options: { envAgnostic?: boolean; context?: Record<string, unknown> } = {},
): World {
  const app = testApp(options.context);
  const stack = new Stack(
    app,
    "Mesh",
    options.envAgnostic ? {} : { env: { account: ACCOUNT, region: HOME } },
  );
  const resolved = typeof props === "function" ? props(stack) : props;
  return { stack, allocator: new VipAllocator(stack, "Vips", resolved) };
}

function otherAccountReader(stack: Stack): IRole {
  return Role.fromRoleArn(stack, "Reader", READER_ARN);
}

type PolicyStatementJson = {
  Effect: string;
  Action: string | string[];
  Principal: unknown;
  Resource: unknown;
  Condition?: unknown;
};
type Replica = {
  Region: string;
  ResourcePolicy?: { PolicyDocument: { Statement: PolicyStatementJson[] } };
  ReplicaStreamSpecification?: {
    ResourcePolicy: { PolicyDocument: { Statement: PolicyStatementJson[] } };
  };
};

function tableProps(template: Template, table: IConstruct): Record<string, unknown> {
  const resource = template.toJSON().Resources[logicalId(table)] as {
    Properties: Record<string, unknown>;
  };
  return resource.Properties;
}

function replicas(template: Template, table: IConstruct): Map<string, Replica> {
  const list = tableProps(template, table).Replicas as Replica[];
  return new Map(list.map((replica) => [replica.Region, replica]));
}

const actionsOf = (statement: PolicyStatementJson) => [statement.Action].flat().sort();

/** Every IAM::Policy of the template, as JSON text (what the allocator's account would get). */
function iamPolicies(template: Template): string {
  return JSON.stringify(template.findResources("AWS::IAM::Policy"));
}

function violations(scope: IConstruct): string[] {
  const report = new AwsSolutionsChecks().validateScope(scope);
  return report.violations.flatMap((violation) =>
    violation.violatingResources.map(
      (resource) => `${violation.ruleName} at ${resource.constructPath}`,
    ),
  );
}

const OWNED = { tableEncryption: TableEncryptionV2.dynamoOwnedKey() };

describe("a reader in another account", () => {
  test("gets GetItem, Query and Scan on the vips table's resource policy, and no IAM policy here", () => {
    const { stack, allocator } = world(OWNED);
    const before = iamPolicies(Template.fromStack(world(OWNED).stack));
    allocator.grantReadVips(otherAccountReader(stack));
    const template = Template.fromStack(stack);

    expect(iamPolicies(template)).toBe(before);
    expect(iamPolicies(template)).not.toContain("vip-reader");
    const home = replicas(template, allocator.vipsTable).get(HOME);
    const statements = home?.ResourcePolicy?.PolicyDocument.Statement ?? [];
    expect(statements).toHaveLength(1);
    const [statement] = statements as [PolicyStatementJson];
    expect(statement.Effect).toBe("Allow");
    expect(statement.Principal).toEqual({ AWS: READER_ARN });
    expect(actionsOf(statement)).toEqual(READ_ACTIONS);
    // `*` in a table's policy is that table and its indexes (the versions index included).
    expect(statement.Resource).toBe("*");
    expect(home?.ReplicaStreamSpecification).toBeUndefined();
    // The private tables get no resource policy.
    for (const table of [allocator.claimsTable, allocator.indexTable, allocator.meshesTable]) {
      expect(JSON.stringify(tableProps(template, table))).not.toContain("ResourcePolicy");
    }
  });

  test("an account principal is named in the policy the same way", () => {
    const { stack, allocator } = world(OWNED);
    allocator.grantReadVips(new AccountPrincipal(OTHER));
    const home = replicas(Template.fromStack(stack), allocator.vipsTable).get(HOME);
    const [statement] = home?.ResourcePolicy?.PolicyDocument.Statement ?? [];
    expect(JSON.stringify(statement?.Principal)).toContain(`:iam::${OTHER}:root`);
    expect(actionsOf(statement as PolicyStatementJson)).toEqual(READ_ACTIONS);
  });

  test("in an env-agnostic stack a role of a literal account is taken as another account", () => {
    const { stack, allocator } = world(OWNED, { envAgnostic: true });
    const before = iamPolicies(Template.fromStack(world(OWNED, { envAgnostic: true }).stack));
    allocator.grantReadVips(otherAccountReader(stack));
    const template = Template.fromStack(stack);
    expect(iamPolicies(template)).toBe(before);
    const list = tableProps(template, allocator.vipsTable).Replicas as Replica[];
    expect(list).toHaveLength(1);
    expect(
      actionsOf(list[0]?.ResourcePolicy?.PolicyDocument.Statement[0] as PolicyStatementJson),
    ).toEqual(READ_ACTIONS);
  });

  test("fails synth under the AWS-managed key (the default), which cannot be shared", () => {
    const { stack, allocator } = world();
    let error: unknown;
    try {
      allocator.grantReadVips(otherAccountReader(stack));
    } catch (caught) {
      error = caught;
    }
    expect(error).toBeInstanceOf(VipAllocatorPropError);
    expect((error as VipAllocatorPropError).prop).toBe("tableEncryption");
    expect((error as Error).message).toContain("Mesh/Vips");
    expect((error as Error).message).toContain(OTHER);
    expect((error as Error).message).toMatch(/dynamoOwnedKey\(\) or customerManagedKey/);
  });

  test("the stream's resource policy, when asked, with the stream reads only", () => {
    const { stack, allocator } = world({ ...OWNED, vipsStream: true });
    const reader = otherAccountReader(stack);
    allocator.grantVipsStreamRead(reader);
    const template = Template.fromStack(stack);
    const home = replicas(template, allocator.vipsTable).get(HOME);
    const statements = home?.ReplicaStreamSpecification?.ResourcePolicy.PolicyDocument.Statement;
    expect(statements).toHaveLength(1);
    expect(statements?.[0]?.Principal).toEqual({ AWS: READER_ARN });
    expect(actionsOf(statements?.[0] as PolicyStatementJson)).toEqual(STREAM_ACTIONS);
    // Asking for the stream alone opens no table read.
    expect(home?.ResourcePolicy).toBeUndefined();
    expect(iamPolicies(template)).not.toContain("vip-reader");
  });

  test("a customer-managed key's policy lets that principal decrypt through DynamoDB only", () => {
    const { stack, allocator } = world((scope) => ({
      tableEncryption: TableEncryptionV2.customerManagedKey(
        new Key(scope, "TableKey", { enableKeyRotation: true }),
      ),
    }));
    allocator.grantReadVips(otherAccountReader(stack));
    const template = Template.fromStack(stack);
    const keys = Object.values(template.findResources("AWS::KMS::Key")).map(
      (key) => key.Properties.KeyPolicy.Statement as PolicyStatementJson[],
    );
    const forReader = keys
      .flat()
      .filter((statement) => JSON.stringify(statement.Principal).includes("vip-reader"));
    expect(forReader).toEqual([
      {
        Effect: "Allow",
        Action: "kms:Decrypt",
        Principal: { AWS: READER_ARN },
        Resource: "*",
        Condition: { StringEquals: { "kms:ViaService": `dynamodb.${HOME}.amazonaws.com` } },
      },
    ]);
    expect(iamPolicies(template)).not.toContain("vip-reader");
  });

  test("a principal of this account keeps its identity policy, without a resource policy", () => {
    const { stack, allocator } = world();
    const reader = new Role(stack, "Local", {
      assumedBy: new ServicePrincipal("ecs-tasks.amazonaws.com"),
    });
    allocator.grantReadVips(reader);
    const template = Template.fromStack(stack);
    expect(permissionsOf(template, reader).size).toBe(2);
    expect(JSON.stringify(tableProps(template, allocator.vipsTable))).not.toContain(
      "ResourcePolicy",
    );
  });
});

describe("readers in other regions (readerRegions)", () => {
  const REGIONS = ["eu-west-1", "ap-southeast-2"];

  test("puts replicas of the vips table, with its versions index, in both; the private tables stay home", () => {
    const { stack, allocator } = world({ readerRegions: REGIONS });
    const template = Template.fromStack(stack);
    expect([...replicas(template, allocator.vipsTable).keys()].sort()).toEqual(
      [HOME, ...REGIONS].sort(),
    );
    // A global table's indexes exist in every replica.
    const indexes = tableProps(template, allocator.vipsTable).GlobalSecondaryIndexes as {
      IndexName: string;
    }[];
    expect(indexes.map((index) => index.IndexName)).toEqual(["versions"]);
    for (const table of [
      allocator.claimsTable,
      allocator.indexTable,
      allocator.meshesTable,
      allocator.dataplanesTable,
    ]) {
      expect([...replicas(template, table).keys()]).toEqual([HOME]);
    }
    expect(allocator.readerRegions).toEqual(REGIONS);
  });

  test("grantReadVips covers every replica's table and versions index, exactly", () => {
    const { stack, allocator } = world({ readerRegions: REGIONS });
    const reader = new Role(stack, "Dns", {
      assumedBy: new ServicePrincipal("ecs-tasks.amazonaws.com"),
    });
    allocator.grantReadVips(reader);
    const replicaArn = (region: string) => ({
      "Fn::Join": [
        "",
        [`arn:aws:dynamodb:${region}:${ACCOUNT}:table/`, { Ref: logicalId(allocator.vipsTable) }],
      ],
    });
    const permissions = permissionsOf(Template.fromStack(stack), reader);
    const homeArn = getAtt(allocator.vipsTable, "Arn");
    const expected = new Map<string, string[]>([
      [JSON.stringify(homeArn), ["dynamodb:GetItem", "dynamodb:Scan"]],
      [
        JSON.stringify({ "Fn::Join": ["", [homeArn, "/index/versions"]] }),
        ["dynamodb:Query", "dynamodb:Scan"],
      ],
    ]);
    for (const region of REGIONS) {
      const [prefix, name] = replicaArn(region)["Fn::Join"][1] as [string, unknown];
      expected.set(JSON.stringify(replicaArn(region)), ["dynamodb:GetItem", "dynamodb:Scan"]);
      expected.set(JSON.stringify({ "Fn::Join": ["", [prefix, name, "/index/versions"]] }), [
        "dynamodb:Query",
        "dynamodb:Scan",
      ]);
      expect(stack.resolve(allocator.vipsTableArnIn(region))).toEqual(replicaArn(region));
    }
    expect(permissions).toEqual(expected);
  });

  test("a grant to another account goes on every replica's resource policy, or on the regions given", () => {
    const all = world({ ...OWNED, readerRegions: REGIONS, vipsStream: true });
    const reader = otherAccountReader(all.stack);
    all.allocator.grantReadVips(reader);
    all.allocator.grantVipsStreamRead(reader, { regions: ["eu-west-1"] });
    const everywhere = replicas(Template.fromStack(all.stack), all.allocator.vipsTable);
    for (const region of [HOME, ...REGIONS]) {
      const [statement] = everywhere.get(region)?.ResourcePolicy?.PolicyDocument.Statement ?? [];
      expect(statement?.Principal, region).toEqual({ AWS: READER_ARN });
      expect(actionsOf(statement as PolicyStatementJson), region).toEqual(READ_ACTIONS);
    }
    const streamIn = (region: string) =>
      everywhere.get(region)?.ReplicaStreamSpecification?.ResourcePolicy.PolicyDocument.Statement;
    expect(actionsOf(streamIn("eu-west-1")?.[0] as PolicyStatementJson)).toEqual(STREAM_ACTIONS);
    expect(streamIn(HOME)).toBeUndefined();
    expect(streamIn("ap-southeast-2")).toBeUndefined();

    const some = world({ ...OWNED, readerRegions: REGIONS });
    const homeReader = otherAccountReader(some.stack);
    some.allocator.grantReadVips(homeReader, { regions: [HOME] });
    const only = replicas(Template.fromStack(some.stack), some.allocator.vipsTable);
    expect(only.get(HOME)?.ResourcePolicy).toBeDefined();
    expect(only.get("eu-west-1")?.ResourcePolicy).toBeUndefined();
    expect(only.get("ap-southeast-2")?.ResourcePolicy).toBeUndefined();
    expect(() => some.allocator.grantReadVips(homeReader, { regions: ["us-west-2"] })).toThrow(
      /regions "us-west-2".*no replica there/,
    );
  });

  test("without the per-replica policy flag, a grant that would leak to other replicas fails synth", () => {
    const { stack, allocator } = world(
      { ...OWNED, readerRegions: REGIONS },
      { context: { "@aws-cdk/aws-dynamodb:resourcePolicyPerReplica": false } },
    );
    allocator.grantReadVips(otherAccountReader(stack), { regions: [HOME] });
    expect(() => Template.fromStack(stack)).toThrow(/resourcePolicyPerReplica/);
  });

  test("is checked: an explicit region, region names, not the home region, no repeats", () => {
    const rejected = (
      props: VipAllocatorProps,
      options?: { envAgnostic?: boolean },
    ): VipAllocatorPropError => {
      try {
        world(props, options);
      } catch (error) {
        if (error instanceof VipAllocatorPropError) return error;
        throw error;
      }
      throw new Error("expected a VipAllocatorPropError");
    };
    expect(rejected({ readerRegions: ["eu-west-1"] }, { envAgnostic: true }).message).toMatch(
      /readerRegions "eu-west-1": replicas need a stack with an explicit region/,
    );
    expect(rejected({ readerRegions: ["Europe"] }).message).toMatch(/expected a region name/);
    expect(rejected({ readerRegions: [HOME] }).message).toMatch(/the stack's own region/);
    expect(rejected({ readerRegions: ["eu-west-1", "eu-west-1"] }).message).toMatch(/twice/);
    expect(rejected({ readerRegions: ["eu-west-1"] }, { envAgnostic: true }).prop).toBe(
      "readerRegions",
    );
    expect(() => world({ readerRegions: [] }, { envAgnostic: true })).not.toThrow();
  });
});

describe("cdk-nag AwsSolutions with readers anywhere", () => {
  const grantEverything = ({ stack, allocator }: World): void => {
    const reader = otherAccountReader(stack);
    allocator.grantReadVips(reader);
    allocator.grantVipsStreamRead(reader);
    allocator.grantReadVips(
      new Role(stack, "Local", { assumedBy: new ServicePrincipal("ecs-tasks.amazonaws.com") }),
    );
  };

  test("no finding with reader regions and grants within and across accounts", () => {
    const built = world({ ...OWNED, readerRegions: ["eu-west-1"], vipsStream: true });
    grantEverything(built);
    expect(violations(built.stack)).toEqual([]);
  });

  test("with a customer-managed key, the grants and the key policy add no finding", () => {
    const cmk = (scope: Stack): VipAllocatorProps => ({
      readerRegions: ["eu-west-1"],
      vipsStream: true,
      tableEncryption: TableEncryptionV2.customerManagedKey(
        new Key(scope, "TableKey", { enableKeyRotation: true }),
        { "eu-west-1": "arn:aws:kms:eu-west-1:111111111111:key/replica-key" },
      ),
    });
    const before = violations(world(cmk).stack);
    const granted = world(cmk);
    grantEverything(granted);
    expect(violations(granted.stack)).toEqual(before);
  });
});
