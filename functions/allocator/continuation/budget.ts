/**
 * The time an invocation gives its passes (decision 160). Lambda stops an invocation at its
 * timeout; a pass that is still claiming then would be killed mid-way, count as an error and
 * lean on retries. So a pass claims new addresses only while the budget lasts, then writes what
 * it has (the services it could not reach wait in the item, `pending`) and hands the rest to a
 * continuation: the meshes it defers are collected here for the invocation to continue.
 *
 * The budget ends `reserve` before the invocation's end, for what follows the claims: the item
 * write and the leaves, the other passes' commits, the batch's bookkeeping and the continuation
 * request itself.
 */

/** Share of the invocation's time kept back from the claims. */
const RESERVE_SHARE = 0.25;
/** Bounds of that reserve, in milliseconds. */
const MIN_RESERVE_MS = 1_000;
const MAX_RESERVE_MS = 15_000;

export class PassBudget {
  /** Meshes a pass of this invocation left to a continuation, in the order deferred. */
  readonly deferred = new Set<string>();

  private constructor(
    /** Epoch ms after which no pass starts a new claim beyond its minimum. */
    readonly stopAt: number,
    private readonly now: () => number,
  ) {}

  /** The budget of an invocation that may still run `remainingMs` (Lambda's remaining time). */
  static of(remainingMs: number, now: () => number): PassBudget {
    const reserve = Math.min(MAX_RESERVE_MS, Math.max(MIN_RESERVE_MS, remainingMs * RESERVE_SHARE));
    return new PassBudget(now() + remainingMs - reserve, now);
  }

  /** No time left for new claims (each pass still makes its minimum, so it always progresses). */
  expired(): boolean {
    return this.now() >= this.stopAt;
  }

  /** `mesh` has work left that a continuation must finish. */
  defer(mesh: string): void {
    this.deferred.add(mesh);
  }
}
