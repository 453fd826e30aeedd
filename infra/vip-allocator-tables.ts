import { Stack } from "aws-cdk-lib";
import {
  AttributeType,
  Billing,
  type CfnGlobalTable,
  type ITableV2,
  ProjectionType,
  StreamViewType,
  type TablePropsV2,
  TableV2,
} from "aws-cdk-lib/aws-dynamodb";
import type { Construct } from "constructs";
import {
  DATAPLANES_TABLE,
  EXTERNAL_SERVICES_TABLE,
  type KeyDefinition,
  MESHES_TABLE,
  parseStreamArn,
  type TableDefinition,
} from "../functions/store/table-definitions.ts";
import type { ExistingInputTable, VipAllocatorProps } from "./vip-allocator-props.ts";

/**
 * The construct's tables, from the one table definition of each
 * (`functions/store/table-definitions.ts`): created ones, imported input tables, and the guard
 * that keeps the private tables in one region.
 */

const KEY_TYPES: Record<KeyDefinition["type"], AttributeType> = {
  S: AttributeType.STRING,
  N: AttributeType.NUMBER,
  B: AttributeType.BINARY,
};

function attribute(key: KeyDefinition): { name: string; type: AttributeType } {
  return { name: key.name, type: KEY_TYPES[key.type] };
}

function tableConstructId(def: TableDefinition): string {
  return `${def.id[0]?.toUpperCase() ?? ""}${def.id.slice(1)}Table`;
}

export type TableOptions = Pick<
  TablePropsV2,
  "removalPolicy" | "deletionProtection" | "encryption" | "replicas"
>;

/** A table as its definition says: keys, stream, time to live, indexes; on demand, with PITR. */
export function createTable(
  scope: Construct,
  def: TableDefinition,
  tableName: string | undefined,
  options: TableOptions,
): TableV2 {
  return new TableV2(scope, tableConstructId(def), {
    tableName,
    partitionKey: attribute(def.partitionKey),
    ...(def.sortKey ? { sortKey: attribute(def.sortKey) } : {}),
    ...(def.stream ? { dynamoStream: StreamViewType[def.stream] } : {}),
    ...(def.timeToLiveAttribute ? { timeToLiveAttribute: def.timeToLiveAttribute } : {}),
    ...(def.indexes !== undefined && def.indexes.length > 0
      ? {
          globalSecondaryIndexes: def.indexes.map((index) => ({
            indexName: index.name,
            partitionKey: attribute(index.partitionKey),
            projectionType: ProjectionType.INCLUDE,
            nonKeyAttributes: [...index.include],
          })),
        }
      : {}),
    billing: Billing.onDemand(),
    // Explicit: cdk-nag's DDB3 checks only CfnTable, not the GlobalTable TableV2 emits.
    pointInTimeRecoverySpecification: { pointInTimeRecoveryEnabled: true },
    ...options,
  });
}

/** An existing input table (its name and stream ARN, and its key if customer-managed). */
export function importInputTable(
  scope: Construct,
  def: TableDefinition,
  existing: ExistingInputTable,
): ITableV2 {
  // By ARN, by name, or (neither given) by the name in the stream ARN (checked by validation).
  const table =
    existing.tableArn !== undefined
      ? { tableArn: existing.tableArn }
      : { tableName: existing.tableName ?? parseStreamArn(existing.tableStreamArn)?.tableName };
  return TableV2.fromTableAttributes(scope, tableConstructId(def), {
    ...table,
    tableStreamArn: existing.tableStreamArn,
    ...(existing.encryptionKey ? { encryptionKey: existing.encryptionKey } : {}),
  });
}

/**
 * Fails synth when a private table has replicas (`addReplica`, or `replicas` in its props):
 * the claims' conditional writes and transactions, and the index's version-conditional
 * records, hold only within one region.
 */
export function guardSingleRegion(table: TableV2, name: string, ownerPath: string): void {
  table.node.addValidation({
    validate: () => {
      const cfn = table.node.defaultChild as CfnGlobalTable;
      const replicas = renderedReplicas(cfn);
      if (replicas.length <= 1) return [];
      const regions = replicas
        .map((replica) => (typeof replica?.Region === "string" ? replica.Region : "(token)"))
        .join(", ");
      return [
        `VipAllocator at '${ownerPath}': the ${name} table must not have replicas ` +
          `(found ${replicas.length} regions: ${regions}): its conditional writes and ` +
          "transactions hold only within one region. Deploy one allocator per region, each " +
          "with its own private tables.",
      ];
    },
  });
}

/**
 * The `Replicas` a global table renders from its props and `addReplica` (public API only:
 * escape-hatch property overrides are not visible to it, see decision 032).
 */
function renderedReplicas(cfn: CfnGlobalTable): { Region?: unknown }[] {
  const replicas = Stack.of(cfn).resolve(cfn.replicas);
  if (!Array.isArray(replicas)) return [];
  return (replicas as { region?: unknown }[]).map((replica) => ({ Region: replica?.region }));
}

/**
 * The input tables: each imported when the props name an existing one, else created (the
 * external-services table only with `externalServices: true`).
 */
export function createInputTables(
  scope: Construct,
  props: VipAllocatorProps,
  options: TableOptions,
): { meshes: ITableV2; dataplanes: ITableV2; externalServices?: ITableV2 } {
  const names = props.tableNames;
  const existingExternal = props.existingExternalServicesTable;
  return {
    meshes: props.existingMeshesTable
      ? importInputTable(scope, MESHES_TABLE, props.existingMeshesTable)
      : createTable(scope, MESHES_TABLE, names?.meshes, options),
    dataplanes: props.existingDataplanesTable
      ? importInputTable(scope, DATAPLANES_TABLE, props.existingDataplanesTable)
      : createTable(scope, DATAPLANES_TABLE, names?.dataplanes, options),
    ...(existingExternal
      ? { externalServices: importInputTable(scope, EXTERNAL_SERVICES_TABLE, existingExternal) }
      : props.externalServices === true
        ? {
            externalServices: createTable(
              scope,
              EXTERNAL_SERVICES_TABLE,
              names?.externalServices,
              options,
            ),
          }
        : {}),
  };
}
