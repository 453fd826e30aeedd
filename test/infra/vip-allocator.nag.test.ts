import { Validations } from "aws-cdk-lib";
import { SnsAction } from "aws-cdk-lib/aws-cloudwatch-actions";
import { Key } from "aws-cdk-lib/aws-kms";
import { Topic } from "aws-cdk-lib/aws-sns";
import { AwsSolutionsChecks } from "cdk-nag";
import type { IConstruct } from "constructs";
import { afterEach, describe, expect, test, vi } from "vitest";
import { build, synthStack } from "./synth.ts";

// cdk-nag v3: packs are CDK policy-validation plugins; `validateScope` runs the same checks
// `cdk synth` runs (infra/app.ts registers the pack) and returns the unacknowledged findings.
function violations(scope: IConstruct): string[] {
  const report = new AwsSolutionsChecks().validateScope(scope);
  return report.violations.flatMap((violation) =>
    violation.violatingResources.map(
      (resource) => `${violation.ruleName} at ${resource.constructPath}`,
    ),
  );
}

/** Every acknowledgement recorded in the tree: rule id -> reason. */
function acknowledgements(scope: IConstruct): Map<string, string> {
  const found = new Map<string, string>();
  for (const construct of scope.node.findAll()) {
    for (const entry of construct.node.metadata) {
      if (entry.type !== Validations.ACKNOWLEDGED_RULES_METADATA_KEY) continue;
      for (const [id, reason] of Object.entries(entry.data as Record<string, string>)) {
        found.set(id.replace(/^annotation::/i, ""), reason);
      }
    }
  }
  return found;
}

const STREAM = (table: string) =>
  `arn:aws:dynamodb:eu-west-1:123456789012:table/${table}/stream/2026-01-01T00:00:00.000`;

describe("cdk-nag AwsSolutions", () => {
  afterEach(() => {
    vi.restoreAllMocks();
  });

  test("has no unacknowledged finding in the deployable stack", () => {
    const { stack } = synthStack();
    expect(violations(stack)).toEqual([]);
  });

  test("has no unacknowledged finding with existing tables, a key and alarm actions", () => {
    const { app } = build((stack) => ({
      existingMeshesTable: {
        tableName: "kuma-meshes",
        tableStreamArn: STREAM("kuma-meshes"),
        encryptionKey: Key.fromKeyArn(
          stack,
          "Key",
          "arn:aws:kms:eu-west-1:123456789012:key/11111111-2222-3333-4444-555555555555",
        ),
      },
      existingDataplanesTable: {
        tableName: "kuma-dataplanes",
        tableStreamArn: STREAM("kuma-dataplanes"),
      },
      alarmActions: [new SnsAction(new Topic(stack, "Ops", { enforceSSL: true }))],
    }));
    expect(violations(app)).toEqual([]);
  });

  test("acknowledges only findings that exist, each with a reason", () => {
    const acknowledged = acknowledgements(build().app);
    expect([...acknowledged.keys()]).toEqual(["AwsSolutions-SQS3"]);
    for (const reason of acknowledged.values()) expect(reason.length).toBeGreaterThan(40);

    // Without the acknowledgements, exactly the acknowledged findings appear.
    vi.spyOn(Validations.prototype, "acknowledge").mockImplementation(() => undefined);
    const unacknowledged = violations(build().app).map((line) => line.split(" at ")[0]);
    expect(new Set(unacknowledged)).toEqual(new Set(acknowledged.keys()));
  });

  test("needs no further acknowledgement for the backfill trigger, the schedule and the alarm topic", () => {
    const existing = build({
      existingMeshesTable: { tableName: "kuma-meshes", tableStreamArn: STREAM("kuma-meshes") },
    }).app;
    expect([...acknowledgements(existing).keys()]).toEqual(["AwsSolutions-SQS3"]);
    expect(violations(existing)).toEqual([]);
  });
});
