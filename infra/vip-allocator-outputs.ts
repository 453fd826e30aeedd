import { CfnOutput, Stack } from "aws-cdk-lib";
import type { ITableV2 } from "aws-cdk-lib/aws-dynamodb";
import type { Construct } from "constructs";
import type { VipAllocator } from "./vip-allocator.ts";

/**
 * The stack outputs of one allocator: every table's name and ARN, the input tables' (and, with
 * `vipsStream`, the vips table's) stream ARNs, the function, the failure queue, the dashboard and
 * the alarm topic (exported as `<stack>-AlarmTopicArn`). In an app of its own, the same values
 * are the construct's properties (`meshesTable.tableArn`, `alarmTopic.topicArn`, ...).
 */
export function addAllocatorOutputs(scope: Construct, allocator: VipAllocator): void {
  const output = (id: string, value: string | undefined, description: string): void => {
    if (value !== undefined) new CfnOutput(scope, id, { value, description });
  };
  const table = (prefix: string, t: ITableV2, what: string, stream: boolean): void => {
    output(`${prefix}TableName`, t.tableName, what);
    output(`${prefix}TableArn`, t.tableArn, `${what}: ARN`);
    if (stream) output(`${prefix}StreamArn`, t.tableStreamArn, `${what}: stream ARN`);
  };
  table("Meshes", allocator.meshesTable, "Input: Kuma meshes", true);
  table("Dataplanes", allocator.dataplanesTable, "Input: Kuma dataplanes", true);
  if (allocator.externalServicesTable) {
    table(
      "ExternalServices",
      allocator.externalServicesTable,
      "Input: Kuma external services",
      true,
    );
  }
  output(
    "VipsTableName",
    allocator.vipsTable.tableName,
    "VIP items, one per mesh (GetItem by mesh)",
  );
  output(
    "VipsTableArn",
    allocator.vipsTable.tableArn,
    "Grant downstream readers GetItem and Scan on this ARN",
  );
  if (allocator.vipsStream) {
    output("VipsStreamArn", allocator.vipsTable.tableStreamArn, "The vips table's change feed");
  }
  output(
    "VipsVersionsIndexArn",
    allocator.versionsIndexArn,
    "The vips table's versions index: a VipReader's probe (Scan, Query) reads it",
  );
  table("Claims", allocator.claimsTable, "Allocator state (private)", false);
  table("Index", allocator.indexTable, "Membership index (private)", false);
  output("FunctionName", allocator.function.functionName, "The allocator function");
  output("FailureQueueUrl", allocator.failureQueue.queueUrl, "Metadata of failed stream batches");
  output("DashboardName", allocator.dashboard.dashboardName, "CloudWatch dashboard");
  output(
    "MetricsService",
    allocator.serviceName,
    "The service dimension of the function's metrics",
  );
  new CfnOutput(scope, "AlarmTopicArn", {
    value: allocator.alarmTopic.topicArn,
    description: "SNS topic every alarm notifies: subscribe to it",
    exportName: `${Stack.of(scope).stackName}-AlarmTopicArn`,
  });
}
