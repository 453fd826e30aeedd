/**
 * The chaos run: a seeded, randomized history of the input tables, delivered to the real batch
 * step (processBatch) by two to four concurrent invocations with injected faults (a crash after
 * a random number of requests, throttling), redeliveries, dropped batches, `VIP_CIDR` changes
 * and a fake clock over short quarantines; then the repair sweep, then every invariant and
 * "no leaked membership". One engine for the default suite (test/chaos/chaos.test.ts,
 * chaos-moto.test.ts) and `npm run chaos` (test/chaos/run.ts), over a backend: the in-memory
 * ports, whose `Pause` hook stands for every DynamoDB request, or moto_server through the SDK
 * client with a fault-injecting middleware (moto-backend.ts).
 */
import { AsyncLocalStorage } from "node:async_hooks";
import type { DynamoDBRecord } from "aws-lambda";
import { type BatchSettings, processBatch } from "../../functions/allocator/batch/process-batch.ts";
import { sweep } from "../../functions/allocator/sweep/sweep.ts";
import type { SweepPorts } from "../../functions/allocator/sweep/types.ts";
import { VipPool } from "../../functions/domain/pool.ts";
import type { VipItem } from "../../functions/domain/types.ts";
import type { AddressClaim, ServiceClaim } from "../../functions/store/ports.ts";
import { compareSequenceNumbers } from "../../functions/store/stream-records.ts";
import { resolveTableNames } from "../../functions/store/table-definitions.ts";
import {
  type DataplaneItem,
  dataplane,
  dataplaneRecord,
  type ExternalServiceItem,
  externalService,
  externalServiceRecord,
  ingress,
  meshRecord,
} from "../fixtures/builders.ts";
import { type Operation, seededRandom } from "../fixtures/in-memory-ports.ts";
import {
  type InvariantInput,
  invariantViolations,
  leakViolations,
  ReuseHistory,
  versionChanges,
} from "../fixtures/invariants.ts";
import { World } from "../unit/reconcile-world.ts";

// With the optional external-services table: only runs with `externalServices` write to it.
const TABLES = resolveTableNames({ EXTERNAL_SERVICES_TABLE: "external-services" });
/** External services' hosts: names (one spelled like a service) and an IP (no host entry). */
const HOSTS = ["api.example.com", "db.example.com", "web", "192.0.2.1"];
const CIDRS = ["240.0.0.0/27", "240.0.0.0/26", "240.0.0.16/28", "240.0.0.0/29"];
/** Service and mesh names, property names of Object.prototype among them: names are data. */
const SERVICES = [
  "web",
  "api",
  "db",
  "cache",
  "auth",
  "search",
  "constructor",
  "__proto__",
  "toString",
  "a_b",
];
const MESHES = ["default", "payments", "edge", "hasOwnProperty"];

/**
 * The least share of runs whose event path alone is checked (before any sweep): invariants 1-10
 * in runs that lost no record, and "no leaked membership" in runs that also killed no
 * invocation. Below it, the checks before the sweep say too little (a generator change that
 * drops records in nearly every run would make them vacuous), and the suite fails.
 */
export const PRE_SWEEP_FLOOR = { checked: 0.4, leaksChecked: 0.1 } as const;

export type FaultKind =
  | "crash"
  | "throttle"
  | "lost-response"
  | "redelivery"
  | "out-of-order"
  | "dropped"
  | "cidr-change"
  | "clock";

export interface ChaosResult {
  readonly seed: number;
  readonly operations: readonly string[];
  readonly faults: ReadonlyMap<FaultKind, number>;
  readonly invocations: number;
  readonly violations: readonly string[];
  readonly leaks: readonly string[];
  /**
   * Invariants 1-10 after the fault-free final drain, before any sweep; undefined when the run
   * lost records (the sweep's job).
   */
  readonly preSweepViolations: readonly string[] | undefined;
  /** Invariant 11 before any sweep; undefined when records were lost or an invocation killed. */
  readonly preSweepLeaks: readonly string[] | undefined;
  /** Items whose version a full redelivery of every record changed (must be none). */
  readonly redeliveryChanges: readonly string[];
  /** Corrections the final sweep made, by kind. */
  readonly repairs: ReadonlyMap<string, number>;
  /** Corrections a second sweep made (must be none). */
  readonly secondRepairs: number;
  /** What they were, for the report. */
  readonly secondRepairDetails: readonly string[];
}

class Throttled extends Error {
  constructor(operation: string) {
    super(`injected throttling on ${operation}`);
    this.name = "ProvisionedThroughputExceededException";
  }
}

class Killed extends Error {
  constructor(operation: string) {
    super(`injected crash before ${operation}`);
    this.name = "InjectedCrash";
  }
}

/** The fault plan of one invocation, found through the async context of its requests. */
export interface Plan {
  requests: number;
  crashAfter: number | undefined;
  throttle: number;
  /** Chance that a write's response is lost (the SDK then sends it again). */
  lose?: number;
}

/** What the state looks like after a run, for the checks. */
export interface ChaosState {
  readonly items: readonly VipItem[];
  readonly services: readonly ServiceClaim[];
  readonly addresses: readonly AddressClaim[];
}

/**
 * Where a run happens: the in-memory ports (the default suite's seeds, `npm run chaos`) or
 * DynamoDB (moto_server) through the SDK client. `request(plan, operation)` is called before
 * every request an invocation makes (it throws to inject a fault); `faults` runs an invocation
 * under its plan.
 */
export interface ChaosBackend {
  readonly quarantineSeconds: number;
  pool: VipPool;
  readonly nowMs: number;
  advance(seconds: number): void;
  putMesh(name: string): Promise<void>;
  deleteMesh(name: string): Promise<void>;
  putDataplane(item: DataplaneItem): Promise<void>;
  deleteDataplane(mesh: string, name: string): Promise<void>;
  /** The external-services table (backends that have one). */
  putExternalService?(item: ExternalServiceItem): Promise<void>;
  deleteExternalService?(mesh: string, name: string): Promise<void>;
  meshNames(): Promise<string[]>;
  /** The service set of a mesh as the contract derives it from the tables now. */
  serviceSet(mesh: string): Promise<string[]>;
  ports(): SweepPorts;
  settings(): Omit<BatchSettings, "tables" | "concurrency">;
  state(): Promise<ChaosState>;
}

/** Makes the faults of the current invocation's plan happen at its requests. */
export class FaultInjector {
  readonly context = new AsyncLocalStorage<Plan>();
  healed = false;
  lostResponses = 0;

  constructor(private readonly random: () => number) {}

  /** Call before every request; throws the injected fault, if any. */
  check(operation: string): void {
    const plan = this.context.getStore();
    if (plan === undefined || this.healed) return;
    plan.requests++;
    if (plan.crashAfter !== undefined && plan.requests > plan.crashAfter) {
      throw new Killed(operation);
    }
    if (plan.throttle > 0 && this.random() < plan.throttle) throw new Throttled(operation);
  }

  /** Call after a write landed: whether its response is lost. */
  loses(_operation: string): boolean {
    const plan = this.context.getStore();
    if (plan === undefined || this.healed || (plan.lose ?? 0) === 0) return false;
    const lost = this.random() < (plan.lose ?? 0);
    if (lost) this.lostResponses++;
    return lost;
  }
}

/** The in-memory backend: the World of the unit tests, its Pause hook injecting the faults. */
export function inMemoryBackend(
  seed: number,
  faults: FaultInjector,
  options: { cidr: string; quarantineSeconds: number },
): ChaosBackend {
  const world = new World({
    mode: "index",
    cidr: options.cidr,
    quarantineSeconds: options.quarantineSeconds,
    seed,
    pause: async (operation: Operation) => {
      await new Promise<void>((resolve) => setImmediate(resolve));
      faults.check(operation);
    },
    loseResponse: (operation) => faults.loses(operation),
  });
  return {
    quarantineSeconds: world.quarantineSeconds,
    get pool() {
      return world.pool;
    },
    set pool(pool: VipPool) {
      world.pool = pool;
    },
    get nowMs() {
      return world.nowMs;
    },
    advance: (seconds) => world.advance(seconds),
    putMesh: async (name) => world.source.putMesh(name),
    deleteMesh: async (name) => world.source.deleteMesh(name),
    putDataplane: async (item) => world.source.putDataplane(item),
    deleteDataplane: async (mesh, name) => world.source.deleteDataplane(mesh, name),
    putExternalService: async (item) => world.source.putExternalService(item),
    deleteExternalService: async (mesh, name) => world.source.deleteExternalService(mesh, name),
    meshNames: async () => world.source.meshNames(),
    serviceSet: async (mesh) => world.serviceSet(mesh),
    ports: () => ({
      source: world.source,
      vipItems: world.vipItems,
      claims: world.claims,
      passState: world.passState,
      index: world.index,
      telemetry: world.telemetry,
    }),
    settings: () => world.batchSettings(),
    state: async () => ({
      items: world.vipItems.all(),
      services: world.claims.serviceClaims(),
      addresses: world.claims.addressClaims(),
    }),
  };
}

/** One run of the given seed. `steps`: operations on the tables and deliveries. */
export async function runChaos(
  seed: number,
  steps = 40,
  options: {
    readonly sweep?: boolean;
    /**
     * External services (services and hosts) in the mix; needs a backend that has them.
     * @default true when the backend has the external-services table (the in-memory one)
     */
    readonly externalServices?: boolean;
    /** The backend; default: the in-memory ports. */
    readonly backend?: (
      faults: FaultInjector,
      setup: { cidr: string; quarantineSeconds: number },
    ) => Promise<ChaosBackend>;
  } = {},
): Promise<ChaosResult> {
  const random = seededRandom(seed);
  const pick = <T>(list: readonly T[]): T => list[Math.floor(random() * list.length)] as T;
  const chance = (p: number) => random() < p;
  const operations: string[] = [];
  const faults = new Map<FaultKind, number>();
  const fault = (kind: FaultKind) => faults.set(kind, (faults.get(kind) ?? 0) + 1);
  const injector = new FaultInjector(seededRandom(seed + 1));
  const setup = { cidr: pick(CIDRS), quarantineSeconds: pick([0, 5, 30, 60]) };
  // Some runs kill no invocation and lose no record, so that invariant 11 (no leaks) is checked
  // on the event path alone too (decision 045: after a kill, it needs the sweep).
  const kills = chance(0.6);
  const drops = chance(0.6);
  const world: ChaosBackend =
    options.backend === undefined
      ? inMemoryBackend(seed, injector, setup)
      : await options.backend(injector, setup);

  // The streams: records not yet delivered, in order.
  const pending: {
    meshes: DynamoDBRecord[];
    dataplanes: DynamoDBRecord[];
    external: DynamoDBRecord[];
  } = { meshes: [], dataplanes: [], external: [] };
  // External services and their hosts are in the mix whenever the backend has their table.
  const withExternal = options.externalServices ?? world.putExternalService !== undefined;
  const storedExternal = new Map<string, ExternalServiceItem>();
  const delivered: DynamoDBRecord[][] = [];
  const stored = new Map<string, DataplaneItem>();
  const history = new ReuseHistory(world.quarantineSeconds * 1000);
  const renumbered = () => (faults.get("cidr-change") ?? 0) > 0;
  const violations: string[] = [];
  let invocations = 0;

  const putDataplane = async (item: DataplaneItem) => {
    const id = JSON.stringify([item.mesh, item.name]);
    const old = stored.get(id);
    stored.set(id, item);
    await world.putDataplane(item);
    pending.dataplanes.push(
      dataplaneRecord(TABLES.dataplanes, { ...(old ? { oldImage: old } : {}), newImage: item }),
    );
  };
  const deleteDataplane = async (mesh: string, name: string) => {
    const id = JSON.stringify([mesh, name]);
    const old = stored.get(id);
    if (old === undefined) return;
    stored.delete(id);
    await world.deleteDataplane(mesh, name);
    pending.dataplanes.push(dataplaneRecord(TABLES.dataplanes, { oldImage: old }));
  };

  const putExternal = async (item: ExternalServiceItem) => {
    const id = JSON.stringify([item.mesh, item.name]);
    const old = storedExternal.get(id);
    storedExternal.set(id, item);
    await world.putExternalService?.(item);
    pending.external.push(
      externalServiceRecord(TABLES.externalServices as string, {
        ...(old ? { oldImage: old } : {}),
        newImage: item,
      }),
    );
  };
  const deleteExternal = async (mesh: string, name: string) => {
    const id = JSON.stringify([mesh, name]);
    const old = storedExternal.get(id);
    if (old === undefined) return;
    storedExternal.delete(id);
    await world.deleteExternalService?.(mesh, name);
    pending.external.push(
      externalServiceRecord(TABLES.externalServices as string, { oldImage: old }),
    );
  };
  /** An external service put, deleted or moved to another mesh. */
  const externalStep = async (mesh: string) => {
    const name = `es-${Math.floor(random() * 4)}`;
    const roll = random();
    if (roll < 0.55) {
      const service = pick(SERVICES);
      const host = pick(HOSTS);
      const optOut = chance(0.2);
      await putExternal(
        externalService(mesh, name, service, `${host}:${pick([80, 443])}`, {
          disableHostDNSEntry: optOut,
        }),
      );
      operations.push(
        `external-service put ${mesh}/${name} ${service} ${host}${optOut ? " (no host entry)" : ""}`,
      );
    } else if (roll < 0.85) {
      await deleteExternal(mesh, name);
      operations.push(`external-service delete ${mesh}/${name}`);
    } else {
      const to = pick(MESHES);
      const old = storedExternal.get(JSON.stringify([mesh, name]));
      if (old !== undefined && to !== mesh) {
        await deleteExternal(mesh, name);
        await putExternal({ ...old, mesh: to });
        operations.push(`external-service move ${mesh}/${name} -> ${to}`);
      }
    }
  };

  /** One invocation of the batch step with its own fault plan. */
  const invoke = async (records: DynamoDBRecord[], plan: Plan) => {
    invocations++;
    try {
      const result = await injector.context.run(plan, () =>
        processBatch({ Records: records }, world.ports(), {
          ...world.settings(),
          tables: TABLES,
          concurrency: 4,
        }),
      );
      const failed = result.batchItemFailures[0]?.itemIdentifier;
      if (failed === undefined) return { ok: true as const };
      // Lambda checkpoints every record before the failed one in the shard's order and retries
      // the rest: by sequence number, not by position (a batch put back after a retry may hold
      // its records out of order, and a position would lose the later ones before it).
      const retry = records.filter(
        (record) => compareSequenceNumbers(record.dynamodb?.SequenceNumber ?? "0", failed) >= 0,
      );
      return { ok: false as const, retry };
    } catch {
      return { ok: false as const, retry: records };
    }
  };

  /** Two to four invocations at once, each on the next records of one stream. */
  const deliverRound = async () => {
    const count = 2 + Math.floor(random() * 3);
    const work: Array<Promise<void>> = [];
    for (let i = 0; i < count; i++) {
      let stream = chance(0.7) ? pending.dataplanes : pending.meshes;
      if (withExternal && pending.external.length > 0 && chance(0.35)) stream = pending.external;
      if (stream.length === 0) continue;
      const batch = stream.splice(0, 1 + Math.floor(random() * 6));
      const plan: Plan = { requests: 0, crashAfter: undefined, throttle: 0 };
      if (kills && chance(0.2)) {
        plan.crashAfter = Math.floor(random() * 30);
        fault("crash");
      } else if (chance(0.15)) {
        plan.throttle = 0.05;
        fault("throttle");
      } else if (chance(0.2)) {
        plan.lose = 0.15;
      }
      work.push(
        invoke(batch, plan).then((outcome) => {
          delivered.push(batch);
          if (outcome.ok) return;
          if (drops && chance(0.25)) {
            fault("dropped");
            operations.push(`dropped ${outcome.retry.length} records`);
            return;
          }
          // Retried from the failed record: put back at the head of its stream.
          stream.unshift(...outcome.retry);
        }),
      );
    }
    await Promise.all(work);
    violations.push(...history.observe((await world.state()).items, world.nowMs, renumbered()));
  };

  for (let step = 0; step < steps; step++) {
    const roll = random();
    const mesh = pick(MESHES);
    if (roll < 0.1) {
      await world.putMesh(mesh);
      pending.meshes.push(meshRecord(TABLES.meshes, mesh));
      operations.push(`mesh put ${mesh}`);
    } else if (roll < 0.14) {
      await world.deleteMesh(mesh);
      pending.meshes.push(meshRecord(TABLES.meshes, mesh, { oldImage: { name: mesh } }));
      operations.push(`mesh delete ${mesh}`);
    } else if (roll < 0.4) {
      const name = `dp-${Math.floor(random() * 6)}`;
      const services = [pick(SERVICES), ...(chance(0.3) ? [pick(SERVICES)] : [])];
      await putDataplane(dataplane(mesh, name, services));
      operations.push(`dataplane put ${mesh}/${name} ${services.join(",")}`);
    } else if (roll < 0.5) {
      const name = `dp-${Math.floor(random() * 6)}`;
      await deleteDataplane(mesh, name);
      operations.push(`dataplane delete ${mesh}/${name}`);
    } else if (roll < 0.55) {
      const name = `dp-${Math.floor(random() * 6)}`;
      const to = pick(MESHES);
      const old = stored.get(JSON.stringify([mesh, name]));
      if (old !== undefined && to !== mesh) {
        await deleteDataplane(mesh, name);
        await putDataplane({ ...old, mesh: to });
        operations.push(`dataplane move ${mesh}/${name} -> ${to}`);
      }
    } else if (roll < 0.6) {
      const advertised = { mesh: pick(MESHES), service: pick(SERVICES) };
      await putDataplane(ingress(mesh, "ingress", [advertised]));
      operations.push(`ingress ${mesh} advertises ${advertised.service} for ${advertised.mesh}`);
    } else if (roll < 0.63) {
      const cidr = pick(CIDRS);
      world.pool = VipPool.parse(cidr);
      fault("cidr-change");
      operations.push(`VIP_CIDR ${cidr}`);
    } else if (roll < 0.68) {
      const seconds = pick([1, 10, 40, 90]);
      world.advance(seconds);
      fault("clock");
      operations.push(`clock +${seconds}s`);
    } else if (roll < 0.72 && delivered.length > 0) {
      const again = pick(delivered);
      fault("redelivery");
      operations.push(`redeliver ${again.length} records`);
      await invoke(again, { requests: 0, crashAfter: undefined, throttle: 0 });
    } else if (roll < 0.75 && delivered.length > 0) {
      // An older batch delivered again while newer records of the same stream are processed:
      // two invocations on one dataplane, out of order.
      const again = pick(delivered);
      fault("out-of-order");
      operations.push(`redeliver ${again.length} records beside a delivery`);
      await Promise.all([
        invoke(again, { requests: 0, crashAfter: undefined, throttle: 0 }),
        deliverRound(),
      ]);
    } else if (withExternal && chance(0.35)) {
      await externalStep(mesh);
    } else {
      await deliverRound();
      operations.push("deliver");
    }
  }

  // The end: faults stop; what is still pending is delivered or lost; then one sweep.
  injector.healed = true;
  if (!drops || chance(0.5)) {
    for (const stream of [pending.dataplanes, pending.external, pending.meshes]) {
      while (stream.length > 0)
        await invoke(stream.splice(0, 10), { requests: 0, crashAfter: undefined, throttle: 0 });
    }
    operations.push("drain the rest");
  } else {
    const lost = pending.dataplanes.length + pending.external.length + pending.meshes.length;
    if (lost > 0) fault("dropped");
    operations.push(`lose the ${lost} pending records`);
  }
  if (injector.lostResponses > 0) faults.set("lost-response", injector.lostResponses);
  // A VIP_CIDR change reaches a mesh with its next record (the contract): after a change, every
  // mesh gets one record (a mesh put that changes nothing), delivered fault-free, so that the
  // checks below see every mesh under the last range.
  if ((faults.get("cidr-change") ?? 0) > 0) {
    const touch = (await world.meshNames()).map((mesh) =>
      meshRecord(TABLES.meshes, mesh, { oldImage: { name: mesh }, newImage: { name: mesh } }),
    );
    if (touch.length > 0) {
      await invoke(touch, { requests: 0, crashAfter: undefined, throttle: 0 });
      delivered.push(touch);
      operations.push(`touch every mesh under ${world.pool.cidr}`);
    }
  }

  const checkInvariants = async (): Promise<{ violations: string[]; leaks: string[] }> => {
    const state = await world.state();
    const meshes = new Set(await world.meshNames());
    const expected = new Map<string, string[]>();
    for (const name of meshes) expected.set(name, await world.serviceSet(name));
    return {
      violations: invariantViolations(oracleInput(world, state, meshes, expected)),
      leaks: leakViolations(state.items, state.services),
    };
  };
  /** Every record delivered so far, again, in order, fault-free: no item's version may move. */
  const redeliverAll = async (when: string): Promise<string[]> => {
    const before = (await world.state()).items;
    for (const batch of [...delivered]) {
      await invoke(batch, { requests: 0, crashAfter: undefined, throttle: 0 });
    }
    return versionChanges(before, (await world.state()).items, when);
  };
  // The event path alone, once the streams are drained: invariants 1-10 (and 11 when no
  // invocation was killed, decision 045), and a full redelivery changes nothing. Only when no
  // record was lost: a lost record is the sweep's (and the failure destination's) job.
  const lostRecords = (faults.get("dropped") ?? 0) > 0;
  let preSweepViolations: string[] | undefined;
  let preSweepLeaks: string[] | undefined;
  const redeliveryChanges: string[] = [];
  if (!lostRecords) {
    const before = await checkInvariants();
    preSweepViolations = before.violations;
    if ((faults.get("crash") ?? 0) === 0) preSweepLeaks = before.leaks;
    if (process.env.CHAOS_DEBUG && before.leaks.length > 0) {
      const st = await world.state();
      console.log(
        JSON.stringify(st.items.map((i) => [i.mesh, i.version, i.incarnation, i.vips, i.leaving])),
      );
      console.log(
        JSON.stringify(st.services.map((c) => [c.service, c.vip, [...c.meshes], c.releasedAt])),
      );
    }
    redeliveryChanges.push(...(await redeliverAll("before the sweep")));
  }

  const settings = { ...world.settings() };
  const ports = world.ports();
  // Without the sweep (`--no-sweep`), the checks show what the event path alone leaves wrong.
  const first = options.sweep === false ? { repairs: [] } : await sweep(ports, settings);
  const repairs = new Map<string, number>();
  for (const repair of first.repairs) repairs.set(repair.kind, (repairs.get(repair.kind) ?? 0) + 1);
  const second = options.sweep === false ? { repairs: [] } : await sweep(ports, settings);
  const state = await world.state();
  const items = state.items;
  violations.push(...history.observe(items, world.nowMs, renumbered()));

  const meshes = new Set(await world.meshNames());
  const expected = new Map<string, string[]>();
  for (const name of meshes) expected.set(name, await world.serviceSet(name));
  violations.push(...invariantViolations(oracleInput(world, state, meshes, expected)));
  if (!lostRecords) redeliveryChanges.push(...(await redeliverAll("after the sweeps")));
  return {
    seed,
    operations,
    faults,
    invocations,
    violations,
    leaks: leakViolations(items, state.services),
    preSweepViolations,
    preSweepLeaks,
    redeliveryChanges,
    repairs,
    secondRepairs: second.repairs.length,
    secondRepairDetails: second.repairs.map((r) => JSON.stringify(r)),
  };
}

/** What the invariant oracle reads (test/fixtures/invariants.ts): the items and the claims. */
function oracleInput(
  world: ChaosBackend,
  state: ChaosState,
  meshes: ReadonlySet<string>,
  expected: ReadonlyMap<string, readonly string[]>,
): InvariantInput {
  return {
    items: state.items,
    meshes,
    pool: world.pool,
    expected,
    claims: { services: state.services, addresses: state.addresses },
    clock: { nowMs: world.nowMs, quarantineSeconds: world.quarantineSeconds },
  };
}

/** A one-line summary of many runs. */
export function summarize(results: readonly ChaosResult[]): string {
  const faults = new Map<string, number>();
  const repairs = new Map<string, number>();
  let operations = 0;
  let invocations = 0;
  for (const result of results) {
    operations += result.operations.length;
    invocations += result.invocations;
    for (const [kind, n] of result.faults) faults.set(kind, (faults.get(kind) ?? 0) + n);
    for (const [kind, n] of result.repairs) repairs.set(kind, (repairs.get(kind) ?? 0) + n);
  }
  const list = (map: Map<string, number>) =>
    [...map]
      .sort(([a], [b]) => (a < b ? -1 : 1))
      .map(([k, n]) => `${k} ${n}`)
      .join(", ") || "none";
  const failing = results.filter(failed);
  const checked = results.filter((r) => r.preSweepViolations !== undefined);
  const leakChecked = results.filter((r) => r.preSweepLeaks !== undefined);
  const floor = belowFloor(results);
  const count = (list: readonly ChaosResult[], of: (r: ChaosResult) => readonly string[]) =>
    list.reduce((n, r) => n + of(r).length, 0);
  return [
    `chaos: ${results.length} runs, ${operations} operations, ${invocations} invocations`,
    `faults: ${list(faults)}`,
    `final sweeps corrected: ${list(repairs)}`,
    `before the sweep (${checked.length} runs that lost no record): invariant 1-10 violations: ${count(checked, (r) => r.preSweepViolations ?? [])}; leaks (${leakChecked.length} runs with no kill either): ${count(leakChecked, (r) => r.preSweepLeaks ?? [])}; version changes on full redelivery: ${count(results, (r) => r.redeliveryChanges)}`,
    `after the sweeps: invariant violations: ${results.reduce((n, r) => n + r.violations.length, 0)}, leaks: ${results.reduce((n, r) => n + r.leaks.length, 0)}, second sweeps correcting something: ${results.filter((r) => r.secondRepairs > 0).length}`,
    `failing seeds: ${failing.length === 0 ? "none" : failing.map((r) => r.seed).join(", ")}`,
    `runs checked before the sweep: ${checked.length} of ${results.length} (floor ${PRE_SWEEP_FLOOR.checked * 100}%), for leaks ${leakChecked.length} (floor ${PRE_SWEEP_FLOOR.leaksChecked * 100}%)${floor.length > 0 ? `: BELOW THE FLOOR (${floor.join("; ")})` : ""}`,
  ].join("\n");
}

/**
 * What falls short of {@link PRE_SWEEP_FLOOR} in `results` (empty: enough runs were checked
 * before the sweep). A run goes unchecked only when it lost a record (or, for leaks, killed an
 * invocation): {@link uncheckedWithoutCause} says when one did not.
 */
export function belowFloor(results: readonly ChaosResult[]): string[] {
  const runs = results.length;
  const checked = results.filter((r) => r.preSweepViolations !== undefined).length;
  const leaks = results.filter((r) => r.preSweepLeaks !== undefined).length;
  const short: string[] = [];
  if (checked < PRE_SWEEP_FLOOR.checked * runs) {
    short.push(`invariants 1-10 checked in ${checked} of ${runs} runs`);
  }
  if (leaks < PRE_SWEEP_FLOOR.leaksChecked * runs) {
    short.push(`leaks checked in ${leaks} of ${runs} runs`);
  }
  return short;
}

/** Why a run's checks before the sweep did not run when nothing excused it (empty: excused). */
export function uncheckedWithoutCause(result: ChaosResult): string[] {
  const dropped = (result.faults.get("dropped") ?? 0) > 0;
  const killed = (result.faults.get("crash") ?? 0) > 0;
  const out: string[] = [];
  if (result.preSweepViolations === undefined && !dropped) {
    out.push("invariants 1-10 unchecked before the sweep, yet no record was lost");
  }
  if (result.preSweepLeaks === undefined && !dropped && !killed) {
    out.push("leaks unchecked before the sweep, yet no record was lost and nothing killed");
  }
  return out;
}

export function failed(result: ChaosResult): boolean {
  return (
    result.violations.length > 0 ||
    result.leaks.length > 0 ||
    result.secondRepairs > 0 ||
    (result.preSweepViolations?.length ?? 0) > 0 ||
    (result.preSweepLeaks?.length ?? 0) > 0 ||
    result.redeliveryChanges.length > 0
  );
}
