import { Stack, Token } from "aws-cdk-lib";
import type { TableV2 } from "aws-cdk-lib/aws-dynamodb";
import type { Construct } from "constructs";
import { VIPS_TABLE } from "../functions/store/table-definitions.ts";
import type { VipAllocatorProps } from "./vip-allocator-props.ts";
import { VipAllocatorPropError } from "./vip-allocator-props.ts";
import { VipsReaders } from "./vip-allocator-readers.ts";
import { createTable, type TableOptions } from "./vip-allocator-tables.ts";

/**
 * The vips table, with its replicas in the reader regions (decision 121): the one table the
 * allocator replicates. It writes it in the stack's region alone; the private tables stay there
 * (decision 032).
 */
export function createVipsTable(
  scope: Construct,
  props: VipAllocatorProps,
  options: Required<Pick<TableOptions, "encryption">> & TableOptions,
): { readonly table: TableV2; readonly readers: VipsReaders } {
  const path = scope.node.path;
  const regions = validateReaderRegions(props.readerRegions, Stack.of(scope), path);
  const readers = new VipsReaders(regions, options.encryption, path);
  const table = createTable(
    scope,
    props.vipsStream === true ? { ...VIPS_TABLE, stream: "NEW_AND_OLD_IMAGES" } : VIPS_TABLE,
    props.tableNames?.vips,
    regions.length > 0 ? { ...options, replicas: readers.replicaProps() } : options,
  );
  readers.attach(table);
  return { table, readers };
}

/** AWS region names: `us-east-1`, `eu-central-2`, `us-gov-west-1`, `cn-north-1`. */
const REGION = /^[a-z]{2}(-[a-z]+)+-\d{1,2}$/;

/** Checks `readerRegions` against the stack's region; returns them (empty when not given). */
export function validateReaderRegions(
  given: readonly string[] | undefined,
  stack: Stack,
  path: string,
): readonly string[] {
  if (given === undefined) return [];
  const fail = (value: unknown, reason: string) =>
    new VipAllocatorPropError("readerRegions", value, reason).at(path);
  if (!Array.isArray(given)) throw fail(given, "expected an array of region names");
  if (given.length === 0) return [];
  if (Token.isUnresolved(stack.region)) {
    throw fail(
      given.join(", "),
      "replicas need a stack with an explicit region (StackProps env: { account, region })",
    );
  }
  const seen = new Set<string>();
  for (const region of given) {
    if (typeof region !== "string" || Token.isUnresolved(region) || !REGION.test(region)) {
      throw fail(region, "expected a region name such as eu-west-1 (not a token)");
    }
    if (region === stack.region) {
      throw fail(region, "is the stack's own region, where the vips table already is");
    }
    if (seen.has(region)) throw fail(region, "is listed twice");
    seen.add(region);
  }
  return [...seen];
}
