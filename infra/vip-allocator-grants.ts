import type { TableV2 } from "aws-cdk-lib/aws-dynamodb";
import { Grant, type IGrantable } from "aws-cdk-lib/aws-iam";
import { VERSIONS_INDEX } from "../functions/store/table-definitions.ts";

/** What `VipReader` sends to the vips table (fetches, and the probe without the index). */
export const READER_TABLE_ACTIONS = ["dynamodb:GetItem", "dynamodb:Scan"] as const;
/** What `VipReader` sends to the `versions` index (the default probe; Query for listed meshes). */
export const READER_INDEX_ACTIONS = ["dynamodb:Query", "dynamodb:Scan"] as const;

/** DynamoDB's data reads and writes, as TableV2's `readData`/`readWriteData` grant them. */
export const DATA_READ = [
  "dynamodb:BatchGetItem",
  "dynamodb:ConditionCheckItem",
  "dynamodb:DescribeTable",
  "dynamodb:GetItem",
  "dynamodb:GetRecords",
  "dynamodb:GetShardIterator",
  "dynamodb:Query",
  "dynamodb:Scan",
];
export const DATA_WRITE = [
  "dynamodb:BatchWriteItem",
  "dynamodb:DeleteItem",
  "dynamodb:PutItem",
  "dynamodb:UpdateItem",
];

/** The ARN of the vips table's `versions` index (the reader's default probe). */
export function versionsIndexArn(table: TableV2): string {
  return `${table.tableArn}/index/${VERSIONS_INDEX.name}`;
}

/**
 * A grant on the vips table scoped to exact ARNs: the table, and (for readers) its `versions`
 * index by name, where TableV2's grants add `index/*` for a table with an index. The table's
 * customer-managed key, if any, is granted as TableV2 would.
 */
export function grantOnTable(
  table: TableV2,
  grantee: IGrantable,
  actions: readonly string[],
  withVersionsIndex: boolean,
): Grant {
  const grant = Grant.addToPrincipal({
    grantee,
    actions: [...actions],
    resourceArns: [table.tableArn, ...(withVersionsIndex ? [versionsIndexArn(table)] : [])],
  });
  const writes = actions.some((action) => DATA_WRITE.includes(action));
  if (table.encryptionKey !== undefined) {
    if (writes) table.encryptionKey.grantEncryptDecrypt(grantee);
    else table.encryptionKey.grantDecrypt(grantee);
  }
  return grant;
}
