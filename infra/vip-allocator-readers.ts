import { Annotations, FeatureFlags, Stack, Token, TokenComparison } from "aws-cdk-lib";
import {
  type ReplicaTableProps,
  TableEncryption,
  type TableEncryptionV2,
  type TableV2,
} from "aws-cdk-lib/aws-dynamodb";
import {
  type AddToResourcePolicyResult,
  ArnPrincipal,
  Grant,
  type IGrantable,
  type IPrincipal,
  type IResourceWithPolicyV2,
  PolicyDocument,
  PolicyStatement,
} from "aws-cdk-lib/aws-iam";
import { DYNAMODB_TABLEV2_RESOURCE_POLICY_PER_REPLICA } from "aws-cdk-lib/cx-api";
import { VERSIONS_INDEX } from "../functions/store/table-definitions.ts";
import { VipAllocatorPropError } from "./vip-allocator-props.ts";

/**
 * Readers anywhere (decisions 120 and 121): replicas of the vips table in reader regions, and
 * grants that reach a reader wherever it is. A principal of this account gets an identity policy
 * on its role covering every replica it is granted; a principal of another account gets
 * statements on the replicas' resource-based policies (and on the stream's, and the table key's
 * policy), never an IAM policy in the allocator's account.
 */

/** What a grant of the vips table covers: the regions of its replicas. */
export interface VipsGrantOptions {
  /**
   * The regions whose replica of the vips table the grant covers: the home region (the stack's)
   * and any of `readerRegions`. Give fewer for a grant to another account on a replica being
   * created in the same deployment (CloudFormation cannot create a replica in another region
   * and put a resource-based policy on it in one stack update; docs/deploy.md).
   *
   * @default every region the vips table is in (home region first, then `readerRegions`)
   */
  readonly regions?: readonly string[];
}

/** The actions one grant gives on the table and on its `versions` index. */
export interface VipsReadRequest {
  readonly tableActions: readonly string[];
  readonly indexActions: readonly string[];
}

export const STREAM_READ_ACTIONS = [
  "dynamodb:DescribeStream",
  "dynamodb:GetRecords",
  "dynamodb:GetShardIterator",
] as const;

/** The account of a principal, when it is known at synth time (a role, an account, an ARN). */
function accountOf(principal: IPrincipal): string | undefined {
  if (principal.principalAccount !== undefined) return principal.principalAccount;
  if (principal instanceof ArnPrincipal && !Token.isUnresolved(principal.arn)) {
    const account = principal.arn.split(":")[4];
    return account === undefined || account === "" ? undefined : account;
  }
  return undefined;
}

/**
 * Whether a principal is of another account than the stack: its account is a literal and the
 * stack's differs, or the stack has no explicit account (then a literal account is taken as
 * another one: a resource-based policy works for both, an identity policy written here does not).
 */
export function isOtherAccount(principal: IPrincipal, stack: Stack): boolean {
  const account = accountOf(principal);
  if (account === undefined || Token.isUnresolved(account)) return false;
  const comparison = Token.compareStrings(stack.account, account);
  return comparison === TokenComparison.DIFFERENT || comparison === TokenComparison.ONE_UNRESOLVED;
}

/**
 * The vips table's readers: its replicas (with their resource-based policies, one document per
 * replica region, filled by grants) and the grants themselves.
 */
export class VipsReaders {
  private readonly tablePolicies = new Map<string, PolicyDocument>();
  private readonly streamPolicies = new Map<string, PolicyDocument>();
  private table: TableV2 | undefined;

  constructor(
    /** The reader regions (replicas); the home region is the stack's. */
    readonly regions: readonly string[],
    private readonly encryption: TableEncryptionV2,
    private readonly path: string,
  ) {}

  /**
   * The vips table's `replicas`: each replica's resource-based policies are read when the
   * template is rendered, so grants made after the construct (by its methods) reach them.
   */
  replicaProps(): ReplicaTableProps[] {
    const tables = this.tablePolicies;
    const streams = this.streamPolicies;
    return this.regions.map((region) => ({
      region,
      get resourcePolicy() {
        return tables.get(region);
      },
      get streamResourcePolicy() {
        return streams.get(region);
      },
    }));
  }

  /** The table the replicas belong to (after it is created). */
  attach(table: TableV2): void {
    this.table = table;
    table.node.addValidation({ validate: () => this.checkPerReplicaFlag(table) });
  }

  /** Every region of the vips table, home first. */
  allRegions(): string[] {
    return [this.stack().region, ...this.regions];
  }

  /**
   * Grants reads of the vips table (and its `versions` index) in the chosen regions: an
   * identity policy for a principal of this account, resource-based policies (and the key's
   * policy) for one of another account.
   */
  grantRead(grantee: IGrantable, request: VipsReadRequest, options: VipsGrantOptions = {}): Grant {
    const table = this.requireTable();
    const regions = this.chosenRegions(options.regions);
    const principal = grantee.grantPrincipal;
    if (!isOtherAccount(principal, this.stack())) {
      const identity = this.identityGrant(grantee, request, regions);
      if (identity.success) return identity;
    }
    this.requireKeyForOtherAccounts(principal);
    const actions = [...new Set([...request.tableActions, ...request.indexActions])].sort();
    // `*` in a table's policy is that table and its indexes: CloudFormation cannot name a
    // generated table's own ARN inside its definition (decision 120).
    const statement = new PolicyStatement({ actions, resources: ["*"], principals: [principal] });
    const grant = Grant.addStatementToResourcePolicy({
      grantee,
      actions,
      resourceArns: regions.flatMap((region) => [
        this.tableArn(region),
        this.versionsIndexArn(region),
      ]),
      statement,
      resource: this.policyTarget(
        regions,
        (added) => table.addToResourcePolicy(added),
        this.tablePolicies,
      ),
    });
    this.allowKey(principal, regions);
    return grant;
  }

  /** Grants reads of the vips stream in the chosen regions (home region by default). */
  grantStreamRead(grantee: IGrantable, options: VipsGrantOptions = {}): Grant {
    const table = this.requireTable();
    const regions = this.chosenRegions(options.regions ?? [this.stack().region]);
    const principal = grantee.grantPrincipal;
    if (!isOtherAccount(principal, this.stack())) {
      const identity = this.identityStreamGrant(grantee, regions);
      if (identity.success) return identity;
    }
    this.requireKeyForOtherAccounts(principal);
    const statement = new PolicyStatement({
      actions: [...STREAM_READ_ACTIONS],
      resources: ["*"],
      principals: [principal],
    });
    const grant = Grant.addStatementToResourcePolicy({
      grantee,
      actions: [...STREAM_READ_ACTIONS],
      resourceArns: regions.map((region) => `${this.tableArn(region)}/stream/*`),
      statement,
      resource: this.policyTarget(
        regions,
        (added) => table.addToStreamResourcePolicy(added),
        this.streamPolicies,
      ),
    });
    this.allowKey(principal, regions);
    return grant;
  }

  /** The ARN of the vips table's replica in a region (the home region's is the table's). */
  tableArn(region: string): string {
    const table = this.requireTable();
    if (region === this.stack().region) return table.tableArn;
    return this.stack().formatArn({
      region,
      service: "dynamodb",
      resource: "table",
      resourceName: table.tableName,
    });
  }

  /** The ARN of the `versions` index of the replica in a region. */
  versionsIndexArn(region: string): string {
    return `${this.tableArn(region)}/index/${VERSIONS_INDEX.name}`;
  }

  private identityGrant(grantee: IGrantable, request: VipsReadRequest, regions: string[]): Grant {
    const table = this.requireTable();
    const onTable = Grant.addToPrincipal({
      grantee,
      actions: [...request.tableActions],
      resourceArns: regions.map((region) => this.tableArn(region)),
    });
    if (!onTable.success) return onTable;
    const onIndex = Grant.addToPrincipal({
      grantee,
      actions: [...request.indexActions],
      resourceArns: regions.map((region) => this.versionsIndexArn(region)),
    });
    table.encryptionKey?.grantDecrypt(grantee);
    this.replicaKeyGrant(grantee, regions);
    return onTable.combine(onIndex);
  }

  private identityStreamGrant(grantee: IGrantable, regions: string[]): Grant {
    const table = this.requireTable();
    const home = this.stack().region;
    // A replica's stream label is known only in its region: `stream/*` under its table ARN.
    const streams = regions.map((region) =>
      region === home ? (table.tableStreamArn as string) : `${this.tableArn(region)}/stream/*`,
    );
    const grant = Grant.addToPrincipal({
      grantee,
      actions: ["dynamodb:ListStreams", ...STREAM_READ_ACTIONS],
      resourceArns: streams,
    });
    if (!grant.success) return grant;
    if (regions.includes(home)) table.encryptionKey?.grantDecrypt(grantee);
    this.replicaKeyGrant(grantee, regions);
    return grant;
  }

  private replicaKeyGrant(grantee: IGrantable, regions: string[]): void {
    const arns = regions.flatMap((region) => {
      const arn = this.encryption.replicaKeyArns?.[region];
      return arn === undefined ? [] : [arn];
    });
    if (arns.length > 0) {
      Grant.addToPrincipal({ grantee, actions: ["kms:Decrypt"], resourceArns: arns });
    }
  }

  /**
   * DynamoDB does not let another account read a table encrypted with the AWS-managed key
   * (`aws/dynamodb`, the construct's default): its key policy cannot be changed.
   */
  private requireKeyForOtherAccounts(principal: IPrincipal): void {
    if (this.encryption.type !== TableEncryption.AWS_MANAGED) return;
    throw new VipAllocatorPropError(
      "tableEncryption",
      "TableEncryptionV2.awsManagedKey()",
      `a reader of another account (${accountOf(principal) ?? "unknown account"}) cannot ` +
        "decrypt a table under the AWS-managed key aws/dynamodb, whose policy cannot be " +
        "changed; deploy with TableEncryptionV2.dynamoOwnedKey() or customerManagedKey(key). " +
        "If the reader is in this account, give the stack an explicit account (env)",
    ).at(this.path);
  }

  /** The customer-managed key's policy: decrypt through DynamoDB in the granted regions. */
  private allowKey(principal: IPrincipal, regions: string[]): void {
    if (this.encryption.type !== TableEncryption.CUSTOMER_MANAGED) return;
    const home = this.stack().region;
    const key = this.encryption.tableKey;
    if (key !== undefined && regions.includes(home)) {
      const added = key.addToResourcePolicy(
        new PolicyStatement({
          actions: ["kms:Decrypt"],
          resources: ["*"],
          principals: [principal],
          conditions: { StringEquals: { "kms:ViaService": `dynamodb.${home}.amazonaws.com` } },
        }),
      );
      if (!added.statementAdded) this.warnKey(key.keyArn, principal);
    }
    for (const region of regions) {
      const arn = this.encryption.replicaKeyArns?.[region];
      if (region !== home && arn !== undefined) this.warnKey(arn, principal);
    }
  }

  private warnKey(keyArn: string, principal: IPrincipal): void {
    const key = Token.isUnresolved(keyArn) ? "the table key" : keyArn;
    Annotations.of(this.requireTable()).addWarningV2(
      "vips:cross-account-key",
      `${key} is not managed by this stack: allow ${accountOf(principal) ?? "the reader"} ` +
        "kms:Decrypt on it (condition kms:ViaService dynamodb.<region>.amazonaws.com) in its " +
        "key policy, or the reader cannot decrypt the vips table (docs/deploy.md)",
    );
  }

  /**
   * Without `@aws-cdk/aws-dynamodb:resourcePolicyPerReplica`, TableV2 copies the home region's
   * policy to every replica that has none: a grant would reach regions it was not given for.
   */
  private checkPerReplicaFlag(table: TableV2): string[] {
    if (FeatureFlags.of(table).isEnabled(DYNAMODB_TABLEV2_RESOURCE_POLICY_PER_REPLICA)) return [];
    if (table.resourcePolicy === undefined) return [];
    const bare = this.regions.filter((region) => !this.tablePolicies.has(region));
    if (bare.length === 0) return [];
    return [
      `VipAllocator at '${this.path}': the vips table's resource policy would be copied to ` +
        `its replicas in ${bare.join(", ")}; set the feature flag ` +
        `${DYNAMODB_TABLEV2_RESOURCE_POLICY_PER_REPLICA} to true (cdk.json context)`,
    ];
  }

  private chosenRegions(given: readonly string[] | undefined): string[] {
    const all = this.allRegions();
    if (given === undefined) return all;
    const chosen = [...new Set(given)];
    for (const region of chosen) {
      if (!all.includes(region)) {
        throw new VipAllocatorPropError(
          "regions",
          region,
          `the vips table has no replica there (its regions: ${all.join(", ")})`,
        ).at(this.path);
      }
    }
    if (chosen.length === 0) {
      throw new VipAllocatorPropError("regions", "[]", "expected at least one region").at(
        this.path,
      );
    }
    return chosen;
  }

  /**
   * The resource-based policies of the chosen regions as one grant target: the home region's
   * through the table, the replicas' through their documents (read when the template renders).
   */
  private policyTarget(
    regions: readonly string[],
    addHome: (statement: PolicyStatement) => AddToResourcePolicyResult,
    replicas: Map<string, PolicyDocument>,
  ): IResourceWithPolicyV2 {
    const table = this.requireTable();
    const home = this.stack().region;
    return {
      env: table.env,
      addToResourcePolicy: (statement) => {
        for (const region of regions) {
          if (region === home) addHome(statement);
          else this.documentFor(replicas, region).addStatements(statement);
        }
        return { statementAdded: true, policyDependable: table };
      },
    };
  }

  private documentFor(documents: Map<string, PolicyDocument>, region: string): PolicyDocument {
    let document = documents.get(region);
    if (document === undefined) {
      document = new PolicyDocument();
      documents.set(region, document);
    }
    return document;
  }

  private requireTable(): TableV2 {
    if (this.table === undefined) throw new Error("VipsReaders: the vips table is not attached");
    return this.table;
  }

  private stack(): Stack {
    return Stack.of(this.requireTable());
  }
}
