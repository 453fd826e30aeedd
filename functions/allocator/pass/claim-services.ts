import { inPool } from "../../domain/in-pool.ts";
import type { Asserted } from "./memberships.ts";
import { type ObtainContext, obtainVip } from "./obtain-vip.ts";

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
