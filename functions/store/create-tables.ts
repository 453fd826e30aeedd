import {
  CreateTableCommand,
  type CreateTableCommandInput,
  DescribeTableCommand,
  type DynamoDBClient,
  ResourceInUseException,
  UpdateTimeToLiveCommand,
  waitUntilTableExists,
} from "@aws-sdk/client-dynamodb";
import {
  ALL_TABLES,
  EXTERNAL_SERVICES_TABLE,
  type TableDefinition,
  type TableNames,
} from "./table-definitions.ts";

/** Maps one table definition to the CreateTable input (on-demand, as in the CDK stack). */
export function createTableInput(def: TableDefinition, tableName: string): CreateTableCommandInput {
  const keys = def.sortKey ? [def.partitionKey, def.sortKey] : [def.partitionKey];
  for (const index of def.indexes ?? []) {
    if (!keys.some((key) => key.name === index.partitionKey.name)) keys.push(index.partitionKey);
  }
  return {
    TableName: tableName,
    BillingMode: "PAY_PER_REQUEST",
    AttributeDefinitions: keys.map((key) => ({ AttributeName: key.name, AttributeType: key.type })),
    KeySchema: [
      { AttributeName: def.partitionKey.name, KeyType: "HASH" },
      ...(def.sortKey ? [{ AttributeName: def.sortKey.name, KeyType: "RANGE" as const }] : []),
    ],
    ...(def.stream
      ? { StreamSpecification: { StreamEnabled: true, StreamViewType: def.stream } }
      : {}),
    ...(def.indexes !== undefined && def.indexes.length > 0
      ? {
          GlobalSecondaryIndexes: def.indexes.map((index) => ({
            IndexName: index.name,
            KeySchema: [{ AttributeName: index.partitionKey.name, KeyType: "HASH" as const }],
            Projection: {
              ProjectionType: "INCLUDE" as const,
              NonKeyAttributes: [...index.include],
            },
          })),
        }
      : {}),
  };
}

export interface CreatedTable {
  readonly id: TableDefinition["id"];
  readonly name: string;
  readonly created: boolean;
  readonly streamArn: string | undefined;
}

/**
 * Creates every table that does not exist yet (the optional ones when named); idempotent.
 * `vipsStream`: the vips table gets the change feed's stream, as the construct's `vipsStream`
 * prop gives it (decision 065; the CLI's local runtime, for `vips watch`).
 */
export async function createTables(
  client: DynamoDBClient,
  names: TableNames,
  options: { readonly vipsStream?: boolean } = {},
): Promise<CreatedTable[]> {
  const results: CreatedTable[] = [];
  const wanted: [TableDefinition, string][] = ALL_TABLES.map((def) => [
    def.id === "vips" && options.vipsStream === true
      ? { ...def, stream: "NEW_AND_OLD_IMAGES" }
      : def,
    names[def.id as Exclude<TableDefinition["id"], "externalServices">],
  ]);
  if (names.externalServices !== undefined) {
    wanted.splice(2, 0, [EXTERNAL_SERVICES_TABLE, names.externalServices]);
  }
  for (const [def, name] of wanted) {
    let created = true;
    try {
      await client.send(new CreateTableCommand(createTableInput(def, name)));
    } catch (error) {
      if (!(error instanceof ResourceInUseException)) throw error;
      created = false;
    }
    await waitUntilTableExists({ client, maxWaitTime: 30, minDelay: 1 }, { TableName: name });
    if (created && def.timeToLiveAttribute !== undefined) {
      await client.send(
        new UpdateTimeToLiveCommand({
          TableName: name,
          TimeToLiveSpecification: { Enabled: true, AttributeName: def.timeToLiveAttribute },
        }),
      );
    }
    const described = await client.send(new DescribeTableCommand({ TableName: name }));
    results.push({ id: def.id, name, created, streamArn: described.Table?.LatestStreamArn });
  }
  return results;
}
