/**
 * A whole allocator on the in-memory ports: tables, VIP items, claims, a fake clock and a
 * recording telemetry, with `reconcile(mesh)` running the real application step.
 */
import type { MeshOutcome, ReconcileDeps } from "../../functions/allocator/pass/deps.ts";
import { reconcileMesh } from "../../functions/allocator/pass/reconcile-mesh.ts";
import { externalServiceSet } from "../../functions/domain/external-service.ts";
import { VipPool } from "../../functions/domain/pool.ts";
import { compareServices, deriveServiceSet } from "../../functions/domain/service-set.ts";
import type { PassStatePort } from "../../functions/store/ports.ts";
import { dataplane } from "../fixtures/builders.ts";
import {
  InMemoryClaimStore,
  InMemoryMembershipIndex,
  InMemoryMeshSource,
  InMemoryTelemetry,
  InMemoryVipItemStore,
  type Operation,
  type Pause,
  seededRandom,
  sequentialIds,
  yieldOnce,
} from "../fixtures/in-memory-ports.ts";
import { invariantViolations, leakViolations } from "../fixtures/invariants.ts";

export const START_MS = Date.parse("2026-01-01T00:00:00.000Z");

export interface WorldOptions {
  readonly cidr?: string;
  readonly quarantineSeconds?: number;
  readonly maxAttempts?: number;
  readonly pause?: Pause;
  readonly seed?: number;
  /** Where batches get service sets: the membership index, or the tables. @default "tables" */
  readonly mode?: "index" | "tables";
  /** Which successful writes lose their response (the SDK's retry then answers). */
  readonly loseResponse?: (operation: Operation) => boolean;
}

export class World {
  readonly source: InMemoryMeshSource;
  readonly vipItems: InMemoryVipItemStore;
  readonly claims: InMemoryClaimStore;
  /** The waiting list and range records: the claim store's other port (one table). */
  readonly passState: PassStatePort;
  readonly index: InMemoryMembershipIndex;
  readonly mode: "index" | "tables";
  readonly telemetry = new InMemoryTelemetry();
  readonly sleeps: number[] = [];
  /** The outcome of every mesh pass a batch ran, in order (batch-world.ts's `deliver` records them). */
  readonly passes: MeshOutcome[] = [];
  pool: VipPool;
  quarantineSeconds: number;
  nowMs = START_MS;
  private readonly random: () => number;
  private readonly newId = sequentialIds("inc");
  private readonly maxAttempts: number;

  constructor(options: WorldOptions = {}) {
    const pause = options.pause ?? yieldOnce;
    this.source = new InMemoryMeshSource(pause);
    this.vipItems = new InMemoryVipItemStore(pause);
    this.index = new InMemoryMembershipIndex(pause);
    this.mode = options.mode ?? "tables";
    this.claims = new InMemoryClaimStore(sequentialIds("claim"), pause);
    this.passState = this.claims;
    if (options.loseResponse !== undefined) {
      this.claims.loseResponse = options.loseResponse;
      this.vipItems.loseResponse = options.loseResponse;
      this.index.loseResponse = options.loseResponse;
    }
    this.pool = VipPool.parse(options.cidr ?? "240.0.0.0/27");
    this.quarantineSeconds = options.quarantineSeconds ?? 3600;
    this.maxAttempts = options.maxAttempts ?? 8;
    this.random = seededRandom(options.seed ?? 1);
  }

  deps(overrides: Partial<ReconcileDeps> = {}): ReconcileDeps {
    return {
      source: this.source,
      vipItems: this.vipItems,
      claims: this.claims,
      passState: this.passState,
      pool: this.pool,
      quarantineSeconds: this.quarantineSeconds,
      maxAttempts: this.maxAttempts,
      telemetry: this.telemetry,
      now: () => this.nowMs,
      newId: this.newId,
      sleep: async (ms) => {
        this.sleeps.push(ms);
        await Promise.resolve();
      },
      random: this.random,
      ...overrides,
    };
  }

  /** The batch step's settings for this world (tables and concurrency are the caller's). */
  batchSettings() {
    const deps = this.deps();
    return {
      pool: deps.pool,
      quarantineSeconds: deps.quarantineSeconds,
      maxAttempts: deps.maxAttempts,
      now: deps.now,
      newId: deps.newId,
      sleep: deps.sleep,
      random: deps.random,
    };
  }

  reconcile(mesh: string, overrides: Partial<ReconcileDeps> = {}) {
    return reconcileMesh(mesh, this.deps(overrides));
  }

  async reconcileAll(meshes: readonly string[]) {
    const outcomes = [];
    for (const mesh of meshes) outcomes.push(await this.reconcile(mesh));
    return outcomes;
  }

  advance(seconds: number): void {
    this.nowMs += seconds * 1000;
  }

  /** The service set of `mesh` per the tables as they are now (the contract's definition). */
  serviceSet(mesh: string): string[] {
    if (!this.source.hasMesh(mesh)) return [];
    const records = this.source.records();
    const own = records.filter((record) => record.mesh === mesh);
    const ingresses = records.filter((record) => {
      const networking = (record.item as { networking?: unknown }).networking;
      return (
        typeof networking === "object" &&
        networking !== null &&
        (networking as { ingress?: unknown }).ingress !== undefined
      );
    });
    const services = deriveServiceSet(mesh, own, ingresses).services;
    // The external services of the mesh, when the world has any (their services and hosts).
    const externals = externalServiceSet(mesh, this.source.externalRecords()).names;
    if (externals.size === 0) return services;
    return [...new Set([...services, ...externals])].sort(compareServices);
  }

  /** The ports of one batch: with the index when the world runs incrementally. */
  batchPorts() {
    return {
      source: this.source,
      vipItems: this.vipItems,
      claims: this.claims,
      passState: this.passState,
      telemetry: this.telemetry,
      ...(this.mode === "index" ? { index: this.index } : {}),
    };
  }

  /** Invariants 1-6 and 11 (no leaks) against the tables as they are now (empty: they hold). */
  violations(): string[] {
    const meshes = new Set(this.source.meshNames());
    const expected = new Map([...meshes].map((mesh) => [mesh, this.serviceSet(mesh)]));
    const items = this.vipItems.all();
    return [
      ...invariantViolations({ items, meshes, pool: this.pool, expected }),
      ...leakViolations(items, this.claims.serviceClaims()),
    ];
  }

  vips(mesh: string): Readonly<Record<string, string>> | undefined {
    return this.vipItems.peek(mesh)?.vips;
  }
}

/** A mesh and one dataplane (`name`) with an inbound per service. */
export function meshWith(world: World, mesh: string, services: string[], name = "dp-1"): void {
  world.source.putMesh(mesh);
  world.source.putDataplane(dataplane(mesh, name, services));
}
