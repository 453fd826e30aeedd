import { freedAtOnce, reclaimCutoffMs, type VipPool } from "../../domain/pool.ts";
import type { AddressCandidate, ClaimsPort, PoolPort } from "../../store/ports.ts";

/**
 * Addresses probed per read (one BatchGetItem of address claims; DynamoDB bills every key,
 * found or not): the first read of an invocation probes as many as its passes said they need
 * (at least {@link FIRST_WINDOW}); every further read doubles, up to {@link MAX_WINDOW}. From
 * the next-fit cursor of a fresh or well-packed range the first keys are free, so a new
 * service costs a few read units, not fifty.
 */
const FIRST_WINDOW = 2;
const MAX_WINDOW = 50;

/**
 * Finds free addresses next-fit from the range's persisted cursor, reading address claims a
 * window at a time (never the whole claim set). After reaching the end of the range it wraps to
 * the start, so addresses freed since (quarantine over) are found.
 *
 * Exhaustion is honest: `next()` says "none" only when a whole cycle of the range has been
 * read, no candidate is left, and no candidate handed to a concurrent pass is still in flight
 * (one that pass does not use comes back with {@link returned}). Callers settle every
 * candidate they get: {@link taken}, {@link returned} or {@link conflicted}.
 */
export class AddressFinder {
  private order: Promise<Generator<bigint>> | undefined;
  private buffer: AddressCandidate[] = [];
  private refilling: Promise<void> | undefined;
  private cycleRead = false;
  private outstanding = 0;
  private waiters: Array<() => void> = [];
  private freedSinceCycle = false;
  private lastTaken: bigint | undefined;
  private newlyClaimed = 0;
  private window = FIRST_WINDOW;
  private reads = 0;

  /**
   * One finder may serve several meshes reconciled at once in an invocation (they then never
   * race each other for an address).
   */
  constructor(
    private readonly claims: ClaimsPort & PoolPort,
    private readonly pool: VipPool,
    /** The clock a quarantine is judged by, when the claims are read (decision 115). */
    private readonly now: () => number,
    private readonly quarantineSeconds: number,
  ) {}

  /** A pass will ask for `count` new addresses: the first read probes that many. */
  expect(count: number): void {
    if (this.reads === 0) this.window = Math.min(MAX_WINDOW, Math.max(this.window, count));
  }

  /** Claims of a service under way in this invocation (its meshes' passes share the finder). */
  private readonly claiming = new Map<string, Promise<unknown>>();

  /**
   * Runs `claim` for `service` once any claim of the same service this invocation has under
   * way is done (`waited`: there was one, so the service's claim must be read again). Two
   * meshes of one invocation then never claim one new service with two candidates, which left
   * the loser's candidate a hole when no later service needed it.
   */
  async oneClaimAtATime<T>(service: string, claim: (waited: boolean) => Promise<T>): Promise<T> {
    const before = this.claiming.get(service);
    const run = (async () => {
      if (before !== undefined) await before.catch(() => undefined);
      return await claim(before !== undefined);
    })();
    this.claiming.set(service, run);
    try {
      return await run;
    } finally {
      if (this.claiming.get(service) === run) this.claiming.delete(service);
    }
  }

  /** The next candidate, or undefined when the range has no free address. */
  async next(): Promise<AddressCandidate | undefined> {
    for (;;) {
      const candidate = this.buffer.shift();
      if (candidate !== undefined) {
        this.outstanding++;
        return candidate;
      }
      if (!this.cycleRead) {
        this.refilling ??= this.refill().finally(() => {
          this.refilling = undefined;
        });
        await this.refilling;
        continue;
      }
      if (this.outstanding > 0) {
        await new Promise<void>((resolve) => this.waiters.push(resolve));
        continue;
      }
      if (this.freedSinceCycle) {
        // Addresses were released during this invocation (no quarantine): read the range again.
        this.freedSinceCycle = false;
        this.cycleRead = false;
        this.order = undefined;
        continue;
      }
      return undefined;
    }
  }

  /** Reads the next window of address claims into the buffer. */
  private async refill(): Promise<void> {
    this.order ??= this.claims
      .readCursor(this.pool.cidr)
      .then((cursor) => this.pool.probeOrder(cursor));
    const order = await this.order;
    const offsets: bigint[] = [];
    const window = this.window;
    this.reads++;
    this.window = Math.min(MAX_WINDOW, window * 2);
    for (let i = 0; i < window; i++) {
      const step = order.next();
      if (step.done) break;
      offsets.push(step.value);
    }
    if (offsets.length < window) this.cycleRead = true;
    if (offsets.length === 0) return;
    const vips = offsets.map((offset) => this.pool.addressAt(offset));
    const existing = await this.claims.getAddresses(vips);
    // Judged by the clock after the read: an address released earlier in this invocation (no
    // quarantine) is free now, whenever the invocation started.
    const cutoffMs = reclaimCutoffMs(this.now(), this.quarantineSeconds);
    offsets.forEach((offset, index) => {
      const vip = vips[index] as string;
      const claim = existing.get(vip);
      if (claim === undefined) {
        this.buffer.push({ vip, offset });
      } else if (claim.releasedAt !== undefined && claim.releasedAt <= cutoffMs) {
        this.buffer.push({ vip, offset, reclaimFrom: claim, reclaimCutoffMs: cutoffMs });
      }
    });
  }

  /** `candidate` was claimed: the cursor moves past it. */
  taken(candidate: AddressCandidate): void {
    if (this.lastTaken === undefined || candidate.offset > this.lastTaken) {
      this.lastTaken = candidate.offset;
    }
    if (candidate.reclaimFrom === undefined) this.newlyClaimed++;
    this.settle();
  }

  /**
   * `candidate` was not used (the service turned out to hold a claim, or the pass gave up): it
   * goes back to the front, so a fresh state allocates without holes.
   */
  returned(candidate: AddressCandidate): void {
    this.buffer.unshift(candidate);
    this.settle();
  }

  /**
   * Another invocation took `candidate` first: it is dropped and the search goes on with the
   * next lowest candidate, so racing invocations share the addresses in order and leave no
   * holes (the loser's claim write is retried with the next address).
   */
  conflicted(_candidate: AddressCandidate): void {
    this.settle();
  }

  /** `candidate` is of no use to anyone (e.g. the service's own released address). */
  discard(_candidate: AddressCandidate): void {
    this.settle();
  }

  /**
   * Whether the range has a free address now: reads the range again (with no quarantine; the
   * candidate found goes back for the next caller).
   */
  async anyFree(): Promise<boolean> {
    if (freedAtOnce(this.quarantineSeconds)) this.freedSinceCycle = true;
    const candidate = await this.next();
    if (candidate === undefined) return false;
    this.returned(candidate);
    return true;
  }

  /** A service was released during this invocation: with no quarantine its address is free. */
  freed(): void {
    if (freedAtOnce(this.quarantineSeconds)) this.freedSinceCycle = true;
  }

  private settle(): void {
    this.outstanding = Math.max(0, this.outstanding - 1);
    const waiters = this.waiters;
    this.waiters = [];
    for (const wake of waiters) wake();
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
