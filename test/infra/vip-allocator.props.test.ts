import { Duration, Lazy, RemovalPolicy } from "aws-cdk-lib";
import type { RetentionDays } from "aws-cdk-lib/aws-logs";
import { describe, expect, test } from "vitest";
import { VipAllocatorPropError, type VipAllocatorProps } from "../../infra/vip-allocator.ts";
import { build } from "./synth.ts";

const STREAM =
  "arn:aws:dynamodb:eu-west-1:123456789012:table/kuma-meshes/stream/2026-01-01T00:00:00.000";

/** Builds the construct and returns the validation error it throws. */
function rejection(props: VipAllocatorProps): VipAllocatorPropError {
  try {
    build(props);
  } catch (error) {
    if (error instanceof VipAllocatorPropError) return error;
    throw error;
  }
  throw new Error(`expected ${JSON.stringify(props)} to be rejected`);
}

describe("synth-time validation names the prop and the value", () => {
  test("names the construct path of the allocator", () => {
    const error = rejection({ memorySize: 64 });
    expect(error.path).toBe("Test/VipAllocator");
    expect(error.message).toContain(`VipAllocator at '${error.path}': invalid memorySize 64`);
  });

  test("vipCidr: rejects a range that is not a CIDR", () => {
    const error = rejection({ vipCidr: "10.0.0.0/33" });
    expect(error.prop).toBe("vipCidr");
    expect(error.message).toContain('"10.0.0.0/33"');
    expect(rejection({ vipCidr: "240.0.0.0" }).message).toMatch(
      /vipCidr "240\.0\.0\.0".*address\/prefix/,
    );
    // A range with host bits set is a typing slip the function would refuse at cold start.
    expect(rejection({ vipCidr: "10.1.2.3/16" }).message).toContain(
      "host bits set: 10.1.2.3 is not the first address of a /16 range (did you mean 10.1.0.0/16?)",
    );
  });

  test("vipCidr: accepts IPv6 and leaves an unresolved token to the function's start-up check", () => {
    expect(() => build({ vipCidr: "fd00:1234::/64" })).not.toThrow();
    expect(() => build({ vipCidr: Lazy.string({ produce: () => "10.0.0.0/8" }) })).not.toThrow();
  });

  test("quarantine: rejects a fraction of a second", () => {
    const error = rejection({ quarantine: Duration.millis(1500) });
    expect(error.prop).toBe("quarantine");
    expect(error.message).toContain("quarantine Duration.millis(1500)");
    expect(error.message).toContain("whole number of seconds");
  });

  test("quarantine: rejects more than the function accepts (366 days), naming the bound", () => {
    const error = rejection({ quarantine: Duration.days(400) });
    expect(error.prop).toBe("quarantine");
    expect(error.message).toContain("quarantine Duration.days(400)");
    expect(error.message).toContain("VIP_QUARANTINE_SECONDS");
    expect(error.message).toContain(String(366 * 24 * 3600));
    expect(() => build({ quarantine: Duration.seconds(0) })).not.toThrow();
  });

  test("removalPolicy: rejects SNAPSHOT, which DynamoDB global tables do not support", () => {
    const error = rejection({ removalPolicy: RemovalPolicy.SNAPSHOT });
    expect(error.prop).toBe("removalPolicy");
    expect(error.message).toContain("snapshot");
  });

  test("deletionProtection: rejects true together with removalPolicy DESTROY", () => {
    const error = rejection({ removalPolicy: RemovalPolicy.DESTROY, deletionProtection: true });
    expect(error.prop).toBe("deletionProtection");
    expect(error.message).toMatch(/deletionProtection true: .*destroy/);
  });

  test("logRetention: rejects a retention CloudWatch Logs does not offer", () => {
    const error = rejection({ logRetention: 42 as RetentionDays });
    expect(error.prop).toBe("logRetention");
    expect(error.message).toContain("logRetention 42");
  });

  test("memorySize: rejects sizes outside 128..10240 MB and fractions", () => {
    for (const memorySize of [64, 10241, 512.5]) {
      const error = rejection({ memorySize });
      expect(error.prop).toBe("memorySize");
      expect(error.message).toContain(`memorySize ${memorySize}:`);
    }
  });

  test("timeout: rejects more than 15 minutes and less than a second", () => {
    expect(rejection({ timeout: Duration.minutes(16) }).message).toContain(
      "timeout Duration.minutes(16)",
    );
    expect(rejection({ timeout: Duration.millis(500) }).prop).toBe("timeout");
  });

  test("sweepSchedule: rejects fractions of a minute, more than a day and periods shorter than the timeout", () => {
    const seconds = rejection({ sweepSchedule: Duration.seconds(90) });
    expect(seconds.prop).toBe("sweepSchedule");
    expect(seconds.message).toContain("sweepSchedule Duration.seconds(90)");
    expect(seconds.message).toContain("whole number of minutes");
    expect(rejection({ sweepSchedule: Duration.hours(25) }).message).toContain(
      "1 minute to 24 hours",
    );
    expect(rejection({ sweepSchedule: Duration.seconds(0) }).prop).toBe("sweepSchedule");
    const overlap = rejection({ sweepSchedule: Duration.minutes(2), timeout: Duration.minutes(5) });
    expect(overlap.prop).toBe("sweepSchedule");
    expect(overlap.message).toContain("shorter than the function timeout Duration.minutes(5)");
    expect(rejection({ sweepSchedule: true as unknown as Duration }).message).toContain(
      "expected a Duration or false",
    );
    expect(() => build({ sweepSchedule: Duration.minutes(1) })).not.toThrow();
    expect(() => build({ sweepSchedule: Duration.hours(24) })).not.toThrow();
    expect(() => build({ sweepSchedule: false, timeout: Duration.minutes(15) })).not.toThrow();
  });

  test("sweepSchedule: false is rejected with existing input tables, naming them", () => {
    const error = rejection({
      sweepSchedule: false,
      existingDataplanesTable: {
        tableName: "kuma-dataplanes",
        tableStreamArn: STREAM.replace("kuma-meshes", "kuma-dataplanes"),
      },
    });
    expect(error.prop).toBe("sweepSchedule");
    expect(error.message).toContain("invalid sweepSchedule false");
    expect(error.message).toContain("existingDataplanesTable is given");
    const both = rejection({
      sweepSchedule: false,
      existingMeshesTable: { tableName: "kuma-meshes", tableStreamArn: STREAM },
      existingDataplanesTable: {
        tableName: "kuma-dataplanes",
        tableStreamArn: STREAM.replace("kuma-meshes", "kuma-dataplanes"),
      },
    });
    expect(both.message).toContain("existingMeshesTable and existingDataplanesTable are given");
  });

  test("existing table: rejects an invalid table name", () => {
    const error = rejection({ existingMeshesTable: { tableName: "a b", tableStreamArn: STREAM } });
    expect(error.prop).toBe("existingMeshesTable.tableName");
    expect(error.message).toContain('"a b"');
  });

  test("existing table: rejects a stream ARN that is not a DynamoDB stream ARN", () => {
    const tableStreamArn = "arn:aws:dynamodb:eu-west-1:123456789012:table/kuma-meshes";
    const error = rejection({
      existingDataplanesTable: { tableName: "kuma-meshes", tableStreamArn },
    });
    expect(error.prop).toBe("existingDataplanesTable.tableStreamArn");
    expect(error.message).toContain(tableStreamArn);
  });

  test("existing table: rejects the stream of another table", () => {
    const error = rejection({
      existingMeshesTable: { tableName: "meshes", tableStreamArn: STREAM },
    });
    expect(error.prop).toBe("existingMeshesTable.tableStreamArn");
    expect(error.message).toContain('is the stream of table "kuma-meshes", not of "meshes"');
  });

  test("tableNames: rejects an invalid name, a duplicate, and a name for an existing table", () => {
    expect(rejection({ tableNames: { vips: "x" } }).prop).toBe("tableNames.vips");
    const duplicate = rejection({ tableNames: { vips: "same", claims: "same" } });
    expect(duplicate.message).toContain("tableNames.claims");
    expect(duplicate.message).toContain("tableNames.vips");
    const existing = rejection({
      existingMeshesTable: { tableName: "kuma-meshes", tableStreamArn: STREAM },
      tableNames: { meshes: "other-meshes" },
    });
    expect(existing.prop).toBe("tableNames.meshes");
  });
});
