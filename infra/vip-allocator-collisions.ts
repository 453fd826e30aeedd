import { Names, Stack } from "aws-cdk-lib";
import type { Construct, IConstruct } from "constructs";
import type { ResolvedProps, VipAllocatorTableNames } from "./vip-allocator-props.ts";

/**
 * Synth-time guard for several allocators in one app: two allocators deployed to the same
 * account and region must not share their metrics (namespace and `service` dimension: their
 * alarms and dashboards would read each other's) or a physical table name.
 */

/**
 * The default `serviceName` of an allocator: its stack's name and construct path with a hash of
 * the path (`Names.uniqueResourceName`), e.g. `Platform-Blue-6BB2820B`; at most 64 characters of
 * the ones a serviceName allows. Unique per construct path, so two allocators with default props
 * never share their metrics, in one app or across the stacks of an account.
 */
export function defaultServiceName(allocator: IConstruct): string {
  return Names.uniqueResourceName(allocator, {
    maxLength: 64,
    separator: "-",
    allowedSpecialCharacters: "-_.",
  });
}

const IDENTITY = Symbol.for("serverless-vip-allocator.identity");

interface Identity {
  /** Account and region of the allocator's stack (tokens for env-agnostic stacks). */
  readonly place: string;
  readonly telemetry: string;
  readonly tableNames: readonly string[];
}

function identityOf(construct: IConstruct): Identity | undefined {
  return (construct as unknown as { [IDENTITY]?: Identity })[IDENTITY];
}

export function guardNoCollision(
  allocator: Construct,
  resolved: ResolvedProps,
  tableNames: VipAllocatorTableNames | undefined,
): void {
  const stack = Stack.of(allocator);
  const mine: Identity = {
    place: `${stack.account}/${stack.region}`,
    telemetry: `namespace ${resolved.metricsNamespace}, service=${resolved.serviceName}`,
    tableNames: Object.values(tableNames ?? {}).filter((name): name is string => !!name),
  };
  Object.defineProperty(allocator, IDENTITY, { value: mine });
  allocator.node.addValidation({
    validate: () => {
      const errors: string[] = [];
      for (const other of allocator.node.root.node.findAll()) {
        const theirs = identityOf(other);
        if (other === allocator || theirs === undefined || theirs.place !== mine.place) continue;
        const where = `VipAllocator at '${allocator.node.path}' and at '${other.node.path}'`;
        if (theirs.telemetry === mine.telemetry) {
          errors.push(
            `${where} publish the same metrics (${mine.telemetry}): their alarms and dashboards ` +
              "would mix; give each its own serviceName",
          );
        }
        for (const name of mine.tableNames.filter((n) => theirs.tableNames.includes(n))) {
          errors.push(`${where} both name a table ${JSON.stringify(name)} (tableNames)`);
        }
      }
      return errors;
    },
  });
}
