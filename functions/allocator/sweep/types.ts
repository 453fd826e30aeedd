import type { VipPool } from "../../domain/pool.ts";
import type {
  ClaimsPort,
  MembershipIndex,
  MeshSource,
  PassStatePort,
  PoolPort,
  SweepPositionPort,
  VipItemStore,
} from "../../store/ports.ts";
import type { PassBudget } from "../pass/deps.ts";
import type { Telemetry } from "../telemetry.ts";

/** What the sweep corrects, one kind per way the event path can have missed something. */
export type RepairKind =
  /** A dataplane's index entries or record disagreed with the dataplanes table. */
  | "index-drift"
  /** An existing mesh had no VIP item. */
  | "item-missing"
  /** The item lacked a service the mesh has. */
  | "item-services-added"
  /** The item listed a service the mesh no longer has. */
  | "item-services-removed"
  /** The item listed a VIP outside VIP_CIDR. */
  | "item-renumbered"
  /** A VIP item of a mesh that no longer exists. */
  | "item-of-deleted-mesh"
  /** A listed service's claim did not record the mesh's membership. */
  | "membership-missing"
  /** A claim recorded a membership that no live item asserts. */
  | "membership-leak"
  /** A claim that no mesh uses was not released (its quarantine never started). */
  | "claim-unreleased"
  /** An address claim whose owner has no service claim (no reclaim could ever free it). */
  | "address-orphaned"
  /** The range's claim counter disagreed with the address claims. */
  | "pool-counter";

export interface Repair {
  readonly kind: RepairKind;
  readonly mesh?: string;
  readonly service?: string;
  readonly detail?: Record<string, unknown>;
  /**
   * Made by the pass of a mesh whose first look was clean: what it changed appeared after that
   * look, so the event path had it in flight (counted as `SweepInFlight`, not for the alarm).
   */
  readonly inFlight?: boolean;
}

export interface SweepPorts {
  readonly source: MeshSource;
  readonly vipItems: VipItemStore;
  /** The claims, the range's pool and the sweep's position (one table; see `passState`). */
  readonly claims: ClaimsPort & PoolPort & SweepPositionPort;
  /** The waiting list (the claims audit wakes its meshes). */
  readonly passState: PassStatePort;
  readonly index: MembershipIndex;
  readonly telemetry: Telemetry;
}

export interface SweepSettings {
  readonly pool: VipPool;
  readonly quarantineSeconds: number;
  readonly maxAttempts: number;
  /**
   * How the reads that look for something to correct are made: `eventual` (half the price of a
   * strongly consistent read; what they find is read again, strongly, before it is corrected)
   * or `strong`. @default "eventual"
   */
  readonly detection?: "eventual" | "strong";
  readonly now: () => number;
  readonly newId: () => string;
  readonly sleep: (ms: number) => Promise<void>;
  readonly random: () => number;
}

export interface SweepOptions {
  /** Epoch ms by which the sweep stops and saves its position; absent: run to the cycle's end. */
  readonly deadline?: number;
  /** Report what would be corrected and change nothing (the position is not stored either). */
  readonly dryRun?: boolean;
  /** Only these meshes (their items, index and memberships); the position is not stored. */
  readonly meshes?: readonly string[];
  /** Keep the position in the claims table, to continue in the next invocation (Lambda). */
  readonly stored?: boolean;
  /** Only go on with a stored cycle under way (a continuation); none: do nothing. */
  readonly resumeOnly?: boolean;
  /** The invocation's time for its passes' claims; what they defer is collected in it. */
  readonly budget?: PassBudget;
  /** Start a new cycle even if the stored one is unfinished. */
  readonly restart?: boolean;
  /** A new cycle after a deployment onto existing tables: its corrections are expected. */
  readonly backfill?: boolean;
  /**
   * The event path's normal latency (decision 071). A mesh where a first, read-only look finds
   * drift (index, item, or an item of a deleted mesh) is looked at again once this long has
   * passed, and only what is still wrong then is corrected and counted as a repair; drift gone
   * by then was in flight (`SweepInFlight`). 0 or absent: corrected at once (the CLI, tests).
   * Not used by a backfill or a dry run.
   */
  readonly graceMs?: number;
  /** Items per page of each table. */
  readonly pageSize?: number;
  /** Each correction (made, or with `dryRun` found), as it happens. */
  readonly onRepair?: (repair: Repair) => void;
  /** After each mesh of the meshes phase, with its corrections. */
  readonly onMesh?: (mesh: string, repairs: readonly Repair[]) => void;
}

export interface SweepResult {
  readonly cycle: string;
  /** The whole cycle is done (every phase reached its end). */
  readonly finished: boolean;
  /** Why it stopped early: out of time, or another sweep holds the stored position. */
  readonly stopped?: "deadline" | "superseded";
  /** Meshes examined by this call. */
  readonly meshes: number;
  /** Corrections made (or, with `dryRun`, found) by this call. */
  readonly repairs: readonly Repair[];
  /** A backfill's index phase: dataplane records this call wrote. */
  readonly indexRecordsWritten?: number;
  /** The cycle is a backfill's (its continuation does not wait for the schedule). */
  readonly backfill?: true;
}
