import { METRIC } from "../telemetry-names.ts";
import { AddressFinder } from "./address-finder.ts";
import type { PassBudget, PassPorts, PassSettings, ReconcileDeps } from "./deps.ts";
import { BatchIngresses } from "./service-set-view.ts";

/**
 * The one place an address finder is created and flushed. An invocation (a batch, a sweep, the
 * sweep's wake-up of waiting meshes) shares one finder among its passes, so its meshes never
 * race each other for an address, and one read of the ingresses; `finish()` persists the
 * finder's cursor and reports the range's use (again harmless: the sweep also finishes before
 * it compares the range's counter with the claims).
 */
export interface Invocation {
  readonly deps: ReconcileDeps & {
    readonly addresses: AddressFinder;
    readonly ingresses: BatchIngresses;
  };
  finish(): Promise<void>;
}

export function createInvocation(
  ports: PassPorts,
  settings: PassSettings & { readonly budget?: PassBudget },
): Invocation {
  const addresses = newFinder(ports, settings);
  const deps = {
    source: ports.source,
    vipItems: ports.vipItems,
    claims: ports.claims,
    passState: ports.passState,
    telemetry: ports.telemetry,
    pool: settings.pool,
    quarantineSeconds: settings.quarantineSeconds,
    maxAttempts: settings.maxAttempts,
    now: settings.now,
    newId: settings.newId,
    sleep: settings.sleep,
    random: settings.random,
    addresses,
    ingresses: new BatchIngresses(ports.source),
    ...(settings.budget !== undefined ? { budget: settings.budget } : {}),
  };
  return { deps, finish: () => flushFinder(addresses, deps) };
}

/**
 * The finder of one attempt of a pass: the invocation's, or (a pass run on its own) a finder
 * of the attempt's, flushed by `finish()` once the attempt has its addresses.
 */
export function attemptFinder(deps: ReconcileDeps): {
  readonly finder: AddressFinder;
  finish(): Promise<void>;
} {
  if (deps.addresses !== undefined) return { finder: deps.addresses, finish: async () => {} };
  const finder = newFinder(deps, deps);
  return { finder, finish: () => flushFinder(finder, deps) };
}

function newFinder(
  ports: Pick<PassPorts, "claims">,
  settings: Pick<PassSettings, "pool" | "quarantineSeconds" | "now">,
): AddressFinder {
  return new AddressFinder(ports.claims, settings.pool, settings.now, settings.quarantineSeconds);
}

/** Persists a finder's cursor and reports the range's use. */
async function flushFinder(
  finder: AddressFinder,
  deps: Pick<ReconcileDeps, "pool" | "telemetry">,
): Promise<void> {
  const claimCount = await finder.flush();
  if (claimCount !== undefined && deps.pool.size > 0n) {
    const percent = Number((BigInt(claimCount) * 1_000_000n) / deps.pool.size) / 10_000;
    deps.telemetry.metric(METRIC.poolUsedPercent, "Percent", percent);
  }
}
