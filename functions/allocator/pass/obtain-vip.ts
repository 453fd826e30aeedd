import { VersionConflictError } from "../../domain/errors.ts";
import { inPool } from "../../domain/records.ts";
import type { Membership } from "../../domain/types.ts";
import type { ServiceClaim } from "../../store/ports.ts";
import { METRIC } from "../telemetry-names.ts";
import type { AddressFinder } from "./address-finder.ts";
import type { ReconcileDeps } from "./deps.ts";
import { type Asserted, joinMesh } from "./memberships.ts";

export interface ObtainContext {
  readonly mesh: string;
  readonly deps: ReconcileDeps;
  readonly finder: AddressFinder;
  readonly membership: Membership;
  readonly nowMs: number;
  readonly cutoffMs: number;
  readonly prefetched: ReadonlyMap<string, ServiceClaim>;
}

/** Attempts at claiming one service before the whole mesh pass counts as a lost race. */
const CLAIM_ATTEMPTS = 8;

/**
 * The VIP `service` holds globally, joining its claim (same VIP in every mesh), or a new
 * address claimed for it. Undefined when the range is exhausted.
 */
export async function obtainVip(service: string, ctx: ObtainContext): Promise<string | undefined> {
  return await ctx.finder.oneClaimAtATime(service, (waited) => claimOnce(service, ctx, waited));
}

async function claimOnce(
  service: string,
  ctx: ObtainContext,
  waited: boolean,
): Promise<string | undefined> {
  const { deps, finder, mesh, membership } = ctx;
  let claim = ctx.prefetched.get(service);
  let checkedWhenNone = false;
  for (let attempt = 0; attempt < CLAIM_ATTEMPTS; attempt++) {
    // After another pass's claim of this service, or a lost attempt: its claim as it is now.
    if (attempt > 0 || waited) claim = (await deps.claims.getServices([service])).get(service);
    if (claim !== undefined) {
      const vip = deps.pool.canonical(claim.vip);
      if (vip !== undefined) {
        const joined = await joinMesh(deps.claims, {
          service,
          vip: claim.vip,
          mesh,
          membership,
          resume: claim.releasedAt !== undefined,
        });
        if (joined) return vip;
        continue;
      }
    }
    const candidate = await finder.next();
    if (candidate === undefined) {
      // Honest exhaustion: a concurrent pass may have claimed this very service meanwhile; a
      // service that holds a claim is never unallocated. Read it once more.
      if (checkedWhenNone) return undefined;
      checkedWhenNone = true;
      continue;
    }
    let settled = false;
    try {
      if (candidate.reclaimFrom?.owner === service && candidate.reclaimFrom.former !== true) {
        // Our own released address, seen by the finder after our claim read: re-read the
        // claim (it will be joined) instead of reclaiming from ourselves. (Our own *former*
        // address is taken back like any other: a move.)
        finder.discard(candidate);
        settled = true;
        continue;
      }
      const result = await deps.claims.claimAddress({
        service,
        candidate,
        mesh,
        membership,
        nowMs: ctx.nowMs,
        // The finder judged a reclaim by the clock when it read (at or after this pass began).
        reclaimCutoffMs: Math.max(ctx.cutoffMs, candidate.reclaimCutoffMs ?? ctx.cutoffMs),
        ...(claim !== undefined ? { moveFrom: claim.vip } : {}),
      });
      if (result === "ok") {
        finder.taken(candidate);
        settled = true;
        if (candidate.reclaimFrom !== undefined) {
          deps.telemetry.metric(METRIC.reclaims, "Count", 1);
          deps.telemetry.info("address reclaimed after quarantine", {
            vip: candidate.vip,
            from: candidate.reclaimFrom.owner,
            to: service,
          });
        }
        return candidate.vip;
      }
      // Lost the address to another invocation, or the service claim changed under us (the
      // address is still free: it goes back for the next service).
      if (result === "address-taken") finder.conflicted(candidate);
      else finder.returned(candidate);
      settled = true;
      deps.telemetry.metric(METRIC.conflicts, "Count", 1);
    } finally {
      if (!settled) finder.returned(candidate);
    }
  }
  throw new VersionConflictError(`claim of service ${service}`);
}

/**
 * Claims a pass makes at once (decision 160). Each is one or two conditional requests on the
 * claims table; sixteen keep a pass of thousands of new services within the function's time on
 * DynamoDB without crowding the SDK's sockets (50 by default), also with four meshes at once.
 */
export const CLAIM_CONCURRENCY = 16;

export interface ClaimRound {
  /** Service -> the VIP it holds now, or undefined when the range is exhausted. */
  readonly obtained: ReadonlyMap<string, string | undefined>;
  /** Services not tried because the invocation's budget ran out (a continuation's work). */
  readonly untried: readonly string[];
}

/**
 * Obtains a VIP for each of `needed` (in their order, {@link CLAIM_CONCURRENCY} at once, sharing
 * the pass's address finder: candidates are handed out in the order asked, so one writer on a
 * fresh range still allocates in sorted order without holes). Once the budget has run out, no
 * further claim starts beyond the first round, so every pass makes progress; the claims under
 * way finish. A failing claim stops the others from starting and is thrown once they are done;
 * each membership is in `asserted` as soon as it is joined, so a failed pass settles them all.
 */
export async function claimServices(
  needed: readonly string[],
  ctx: ObtainContext,
  asserted: Asserted,
): Promise<ClaimRound> {
  const obtained = new Map<string, string | undefined>();
  const budget = ctx.deps.budget;
  const started = await inPool(
    needed,
    CLAIM_CONCURRENCY,
    async (service) => {
      const vip = await obtainVip(service, ctx);
      if (vip !== undefined) asserted.set(service, ctx.membership);
      obtained.set(service, vip);
    },
    (count) => budget !== undefined && count >= CLAIM_CONCURRENCY && budget.expired(),
  );
  return { obtained, untried: needed.slice(started) };
}
