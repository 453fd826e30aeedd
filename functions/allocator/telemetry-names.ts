/**
 * Names of the function's own CloudWatch metrics (EMF via Powertools Metrics), shared by the
 * function and the CDK alarms/dashboard so they cannot drift apart. Every metric carries the
 * default dimension `service` = {@link SERVICE_NAME}.
 */
export const METRICS_NAMESPACE = "VipAllocator";
export const SERVICE_NAME = "vip-allocator";

export const METRIC = {
  /** VIPs newly claimed for a service (Count). */
  allocations: "VipAllocations",
  /** Services that left their last mesh and went into quarantine (Count). */
  releases: "VipReleases",
  /** Quarantined addresses handed to a different service after the quarantine (Count). */
  reclaims: "VipReclaims",
  /** VIPs replaced because they fell outside VIP_CIDR (Count). */
  renumbered: "VipRenumbered",
  /** Services that could not get a VIP because the range is full (Count). */
  exhausted: "PoolExhausted",
  /** Share of the range held by claims, quarantined ones included (Percent). */
  poolUsedPercent: "PoolUsedPercent",
  /** Size of a written VIP item (Bytes). */
  itemBytes: "VipItemBytes",
  /** Per-mesh VIP item writes (Count). */
  meshWrites: "MeshWrites",
  /** Lost optimistic-lock or claim races, each followed by a retry (Count). */
  conflicts: "VersionConflicts",
  /** Skipped pieces of bad input (Count). */
  badInput: "BadInput",
  /** Meshes that failed after all retries and were reported back to the event source (Count). */
  meshFailures: "MeshFailures",
  /** Meshes whose VIP item could not be encoded within DynamoDB's item limit (Count). */
  itemTooLarge: "VipItemTooLarge",
  /** Dataplane records of the membership index written (Count). */
  indexWrites: "IndexWrites",
  /**
   * Meshes a batch touched whose pass it skipped: no service's presence changed in them and
   * none was pending (decision 073) (Count).
   */
  passesSkipped: "PassesSkipped",
  /**
   * Meshes whose pass ran out of the invocation's time and went on in a continuation (Count,
   * decision 160): not an error; a steady rate means the function's timeout is short for them.
   */
  passesContinued: "PassesContinued",
  /** Age of the oldest record of a batch when its processing started (Milliseconds). */
  streamLagMs: "StreamLag",
  /**
   * Corrections made by the repair sweep (Count): emitted once per correction without the
   * `kind` dimension (the alarm's metric) and once with {@link SWEEP_REPAIR_DIMENSION}.
   */
  sweepRepairs: "SweepRepairs",
  /** Meshes the repair sweep examined (Count). */
  sweepMeshes: "SweepMeshes",
  /** Sweep cycles that reached the end of every mesh (Count). */
  sweepCycles: "SweepCycles",
  /**
   * What the sweep found that the event path had in flight (Count, not in the alarm's
   * metric): drift gone by the sweep's second look, and corrections of a mesh whose first look
   * was clean (decision 071).
   */
  sweepInFlight: "SweepInFlight",
} as const;

/** The dimension of {@link METRIC.sweepRepairs} naming what was corrected. */
export const SWEEP_REPAIR_DIMENSION = "kind";

export type MetricName = (typeof METRIC)[keyof typeof METRIC];
