import { quarantineOver } from "../domain/plan.ts";
import type { VipPool } from "../domain/pool.ts";
import type { AddressCandidate, ClaimStore } from "../store/ports.ts";

/** Addresses probed per read: one BatchGetItem of address claims. */
const WINDOW = 50;

/**
 * Finds free addresses next-fit from the range's persisted cursor, reading address claims a
 * window at a time (never the whole claim set). After reaching the end of the range it wraps to
 * the start, so addresses freed since (quarantine over) are found; after one full cycle with
 * nothing free the range is exhausted.
 */
export class AddressFinder {
  private order: Promise<Generator<bigint>> | undefined;
  private buffer: AddressCandidate[] = [];
  private lastTaken: bigint | undefined;
  private exhausted = false;
  private newlyClaimed = 0;

  /**
   * One finder may serve several meshes reconciled at once in an invocation (they then never
   * race each other for an address); `random` spreads the retries of racing invocations.
   */
  constructor(
    private readonly claims: ClaimStore,
    private readonly pool: VipPool,
    private readonly nowMs: number,
    private readonly quarantineSeconds: number,
    private readonly random: () => number = Math.random,
  ) {}

  /** The next candidate, or undefined when the range has no free address. */
  async next(): Promise<AddressCandidate | undefined> {
    this.order ??= this.claims
      .readCursor(this.pool.cidr)
      .then((cursor) => this.pool.probeOrder(cursor));
    const order = await this.order;
    while (this.buffer.length === 0) {
      if (this.exhausted) return undefined;
      const offsets: bigint[] = [];
      for (let i = 0; i < WINDOW; i++) {
        const step = order.next();
        if (step.done) {
          this.exhausted = true;
          break;
        }
        offsets.push(step.value);
      }
      if (offsets.length === 0) return undefined;
      const vips = offsets.map((offset) => this.pool.addressAt(offset));
      const existing = await this.claims.getAddresses(vips);
      offsets.forEach((offset, index) => {
        const vip = vips[index] as string;
        const claim = existing.get(vip);
        if (claim === undefined) {
          this.buffer.push({ vip, offset });
        } else if (
          claim.releasedAt !== undefined &&
          quarantineOver(claim.releasedAt, this.nowMs, this.quarantineSeconds)
        ) {
          this.buffer.push({ vip, offset, reclaimFrom: claim });
        }
      });
    }
    return this.buffer.shift();
  }

  /**
   * Another invocation took a candidate first: it is probably working through the same
   * addresses, so continue from a random place in the buffer (nothing is dropped: the
   * skipped candidates move to the end).
   */
  conflicted(): void {
    if (this.buffer.length < 2) return;
    const k = Math.floor(this.random() * this.buffer.length);
    this.buffer = [...this.buffer.slice(k), ...this.buffer.slice(0, k)];
  }

  /** Records that `candidate` was claimed, so the cursor moves past it. */
  taken(candidate: AddressCandidate): void {
    if (this.lastTaken === undefined || candidate.offset > this.lastTaken) {
      this.lastTaken = candidate.offset;
    }
    if (candidate.reclaimFrom === undefined) this.newlyClaimed++;
  }

  /** Persists the cursor past the last address taken; returns the range's claim count. */
  async flush(): Promise<number | undefined> {
    if (this.lastTaken === undefined) return undefined;
    // With a shared finder, candidates are taken out of order: continue after the highest
    // offset handed out (the cursor is only where the next probe starts).
    const next = (this.lastTaken + 1n) % this.pool.size;
    const claimed = await this.claims.advanceCursor(this.pool.cidr, next, this.newlyClaimed);
    this.lastTaken = undefined;
    this.newlyClaimed = 0;
    return claimed;
  }
}
