import { exhaustedReason } from "../../domain/plan.ts";
import type { VipPool } from "../../domain/pool.ts";
import type { ClaimStore } from "../../store/ports.ts";

/** What a dry run predicts for a service that needs a VIP in a mesh. */
export type Prediction =
  /** The VIP its claim already holds (the same in every mesh). */
  | { readonly vip: string }
  /** A fresh address of the range. */
  | { readonly fresh: true }
  /** None: the range has no address left (the item's `unallocated` reason). */
  | { readonly unallocated: string };

/**
 * A dry run's view of the range: which services needing a VIP would get one, so that
 * `reconcile --dry-run` predicts what the pass would give, and what it could not (decision
 * 145). A service with an in-range claim keeps its VIP; the others take fresh addresses while
 * the range has unclaimed ones (its size minus its claim counter, read once; quarantined
 * addresses count as claimed, as the finder sees them until their quarantine is over), in
 * sorted order as a pass takes them, across the meshes of the run.
 */
export class DryAllocation {
  private free: bigint | undefined;

  constructor(
    private readonly claims: ClaimStore,
    private readonly pool: VipPool,
  ) {}

  async predict(services: readonly string[]): Promise<Map<string, Prediction>> {
    const predictions = new Map<string, Prediction>();
    if (services.length === 0) return predictions;
    const sorted = [...services].sort((a, b) => (a < b ? -1 : a > b ? 1 : 0));
    const claims = await this.claims.getServices(sorted, false);
    this.free ??= this.pool.size - BigInt(await this.claims.readCounter(this.pool.cidr));
    for (const service of sorted) {
      const vip = claims.get(service)?.vip;
      const inRange = vip === undefined ? undefined : this.pool.canonical(vip);
      if (inRange !== undefined) predictions.set(service, { vip: inRange });
      else if (this.free > 0n) {
        this.free--;
        predictions.set(service, { fresh: true });
      } else predictions.set(service, { unallocated: exhaustedReason(this.pool) });
    }
    return predictions;
  }
}

/** A prediction as a repair's detail: `{ vip }`, nothing (a fresh VIP), or `{ unallocated }`. */
export function predictionDetail(prediction: Prediction | undefined): Record<string, unknown> {
  if (prediction === undefined || "fresh" in prediction) return {};
  return "vip" in prediction ? { vip: prediction.vip } : { unallocated: prediction.unallocated };
}
