import { freedAtOnce, reclaimCutoffMs } from "../../domain/pool.ts";
import { own } from "../../domain/records.ts";
import type { VipItem } from "../../domain/types.ts";
import type { AddressClaim, ServiceClaim } from "../../store/ports.ts";
import { passWokenMeshes } from "./mesh-phase.ts";
import type { SweepRun } from "./run.ts";

/**
 * Phase 3, the claims table: every mesh whose item lists a service must hold the item's
 * membership of its claim; memberships that no live item asserts are removed (with the
 * conditions of a leave, and one newer than its item only after the item has been fenced past
 * it), claims no mesh uses are released, orphaned addresses dropped, and the range's claim
 * counter checked against the addresses. It never takes a VIP from a live service.
 */
export class ClaimsAudit {
  /** Items read in the claims phase (decisions on a stale one are still safe: all conditional). */
  private readonly items = new Map<string, VipItem | undefined>();
  /** Service -> the meshes whose item lists it (read once per invocation). */
  private listedBy: Map<string, string[]> | undefined;
  /** The claim counter's difference that the previous cycle found (see checkCounter). */
  previousDelta: number | undefined;

  constructor(private readonly run: SweepRun) {}

  private async itemOf(mesh: string): Promise<VipItem | undefined> {
    if (!this.items.has(mesh)) this.items.set(mesh, await this.run.ports.vipItems.get(mesh));
    return this.items.get(mesh);
  }

  /**
   * Reads every item once (a Scan billed by size; with `meshes`, those items), so each claim
   * can be checked against the meshes that list its service without a read per service.
   */
  async loadItems(): Promise<void> {
    if (this.listedBy !== undefined) return;
    const { ports } = this.run;
    const listedBy = new Map<string, string[]>();
    const add = (item: VipItem) => {
      this.items.set(item.mesh, item);
      for (const service of Object.keys(item.vips)) {
        const meshes = listedBy.get(service) ?? [];
        meshes.push(item.mesh);
        listedBy.set(service, meshes);
      }
    };
    if (this.run.only !== undefined) {
      for (const mesh of this.run.only) {
        const item = await ports.vipItems.get(mesh);
        if (item !== undefined) add(item);
        else this.items.set(mesh, undefined);
      }
    } else {
      let after: string | undefined;
      do {
        const page = await ports.vipItems.itemPage(after, this.run.pageSize, this.run.strong);
        for (const item of page.items) add(item);
        for (const mesh of page.malformed) {
          ports.telemetry.error("VIP item could not be decoded; its claims are not checked", {
            mesh,
          });
        }
        after = page.next;
      } while (after !== undefined);
    }
    this.listedBy = listedBy;
  }

  /** Whether a claim, as a detection read saw it, may need a correction. */
  private async suspicious(claim: ServiceClaim): Promise<boolean> {
    for (const mesh of this.listedBy?.get(claim.service) ?? []) {
      if (claim.meshes.get(mesh)?.incarnation !== this.items.get(mesh)?.incarnation) return true;
    }
    if (claim.meshes.size === 0) return claim.releasedAt === undefined;
    for (const [mesh, membership] of claim.meshes) {
      if (!this.run.covers(mesh)) continue;
      const item = await this.itemOf(mesh);
      const listed = own(item?.vips, claim.service) !== undefined;
      if (!listed || item?.incarnation !== membership.incarnation) return true;
    }
    return false;
  }

  async sweepClaim(seen: ServiceClaim): Promise<void> {
    if (!(await this.suspicious(seen))) return;
    if (this.run.deferring()) {
      // A pass may be between its claim write and its item write (or its leave): look again.
      const at = this.run.settings.now();
      this.run.pending.push({ phase: "claims", name: seen.service, at, found: "claim" });
      return;
    }
    await this.correctClaim(seen);
  }

  /**
   * The second look at a claim: the items of the meshes involved are read again (the phase's
   * copies may predate the passes that were in flight), then the claim is corrected as usual.
   */
  async secondLookClaim(service: string): Promise<void> {
    const { ports } = this.run;
    const claim = (await ports.claims.getServices([service])).get(service);
    if (claim === undefined) return;
    const meshes = new Set([...(this.listedBy?.get(service) ?? []), ...claim.meshes.keys()]);
    const listedIn: string[] = [];
    for (const mesh of meshes) {
      const item = await ports.vipItems.get(mesh);
      this.items.set(mesh, item);
      if (own(item?.vips, service) !== undefined) listedIn.push(mesh);
    }
    this.listedBy?.set(service, listedIn);
    if (await this.suspicious(claim)) await this.correctClaim(claim);
  }

  private async correctClaim(seen: ServiceClaim): Promise<void> {
    const { ports, corrector, settings } = this.run;
    // Found on a detection read: read it again, strongly, before correcting anything.
    const claim = this.run.strong
      ? seen
      : (await ports.claims.getServices([seen.service])).get(seen.service);
    if (claim === undefined) return;
    const { service } = claim;
    // Every mesh whose item lists the service must hold the item's membership (else a leave
    // elsewhere could release a listed VIP).
    const listedIn = this.listedBy?.get(service) ?? [];
    for (const mesh of listedIn) {
      const item = this.items.get(mesh);
      const vip = own(item?.vips, service);
      if (item === undefined || vip === undefined) continue;
      if (claim.meshes.get(mesh)?.incarnation !== item.incarnation) {
        await this.checkListed(mesh, item, service, vip, claim);
      }
    }
    if (
      claim.meshes.size === 0 &&
      claim.releasedAt === undefined &&
      listedIn.length === 0 &&
      this.run.only === undefined
    ) {
      const released = await corrector.release({
        service,
        vip: claim.vip,
        nowMs: settings.now(),
        ...(claim.former !== undefined ? { former: claim.former } : {}),
      });
      if (released) {
        this.run.record({ kind: "claim-unreleased", service, detail: { vip: claim.vip } });
      }
      return;
    }
    for (const [mesh, membership] of claim.meshes) {
      if (!this.run.covers(mesh)) continue;
      const item = await this.itemOf(mesh);
      const listed = own(item?.vips, service);
      if (item !== undefined && listed !== undefined) continue;
      if (item === undefined) {
        // A mesh with no item: its pass (phase 1, or its next event) creates one first.
        if (await ports.source.meshExists(mesh)) continue;
        await this.leave(claim, mesh, membership.incarnation, Number.MAX_SAFE_INTEGER, "no item");
        continue;
      }
      if (membership.incarnation !== item.incarnation) {
        // Of an incarnation that lost its create or was deleted: no one can commit it any more.
        await this.leave(claim, mesh, membership.incarnation, Number.MAX_SAFE_INTEGER, "dead");
        continue;
      }
      if (membership.version <= item.version) {
        await this.leave(claim, mesh, item.incarnation, item.version, "not listed");
        continue;
      }
      // Asserted for a version the item never reached: a pass died before its write, or is
      // writing now. Moving the item past that version first makes the leave safe: a pass
      // still in flight loses its write, re-reads, and asserts again what it lists.
      const fenced = await corrector.fence(item, membership.version, this.items);
      if (fenced !== undefined) {
        await this.leave(claim, mesh, fenced.incarnation, fenced.version, "never written");
      }
    }
  }

  /** A listed service's claim lacks the mesh's membership: it is recorded again. */
  private async checkListed(
    mesh: string,
    item: VipItem,
    service: string,
    vip: string,
    claim: ServiceClaim | undefined,
  ): Promise<void> {
    const held = claim?.meshes.get(mesh);
    if (held !== undefined && held.incarnation === item.incarnation) return;
    if (claim === undefined || claim.vip !== vip) {
      // Never seen in tests; reported, left to a pass (a sweep must not move a listed VIP).
      this.run.ports.telemetry.error("a listed VIP is not backed by its service's claim", {
        mesh,
        kumaService: service,
        vip,
        claimVip: claim?.vip,
      });
      return;
    }
    const joined = await this.run.corrector.join({
      service,
      vip,
      mesh,
      membership: { incarnation: item.incarnation, version: item.version },
      resume: claim.releasedAt !== undefined,
    });
    if (joined) {
      this.run.record({
        kind: "membership-missing",
        mesh,
        service,
        detail: { vip, found: held?.incarnation ?? null },
      });
    }
  }

  private async leave(
    claim: ServiceClaim,
    mesh: string,
    incarnation: string,
    upToVersion: number,
    why: string,
  ): Promise<void> {
    const outcome = await this.run.corrector.leave({
      service: claim.service,
      mesh,
      incarnation,
      upToVersion,
      nowMs: this.run.settings.now(),
    });
    if (outcome === "kept") return;
    this.run.record({
      kind: "membership-leak",
      mesh,
      service: claim.service,
      detail: { vip: claim.vip, why },
    });
  }

  /**
   * An address whose owner has no service claim at all is held for nobody: with no release
   * hint, the finder never offers it (a renumbered service's former address whose release
   * never hinted it); with one, a reclaim takes it. Either way it is dropped once no quarantine
   * can be running on it (a hint within the quarantine is left alone). Only such suspects are
   * checked (a former address, or one released long ago): the owner of a live address holds
   * it, and reading every owner would double the phase's reads. False when it was dropped.
   */
  async sweepAddress(address: AddressClaim): Promise<boolean> {
    const { ports, settings, strong } = this.run;
    const cutoff = reclaimCutoffMs(settings.now(), settings.quarantineSeconds);
    if (address.releasedAt !== undefined && address.releasedAt > cutoff) return true;
    if (address.releasedAt === undefined && address.former !== true) return true;
    const seen = await ports.claims.getServices([address.owner], strong);
    if (seen.has(address.owner)) return true;
    if (!strong && (await ports.claims.getServices([address.owner])).has(address.owner)) {
      return true;
    }
    if (!(await this.run.corrector.dropOrphanAddress(address))) return true;
    this.run.record({
      kind: "address-orphaned",
      service: address.owner,
      detail: { vip: address.vip },
    });
    return false;
  }

  /** Compares the range's claim counter with the addresses the phase counted. */
  async checkCounter(): Promise<void> {
    const { run } = this;
    const cidr = run.settings.pool.cidr;
    const expected = run.state.counterAtStart;
    const counted = run.state.addressesInRange;
    const now = await run.ports.claims.readCounter(cidr);
    // Claimed during the scan: the count may be off by those; the next cycle looks again.
    if (expected === undefined || now !== expected || now === counted) return;
    // A batch that claimed an address before the scan may add it to the counter only after
    // (its count is written at its end): a stored sweep corrects a difference only when the
    // previous cycle found the same one.
    const delta = counted - now;
    const confirmed = !run.stored || this.previousDelta === delta;
    run.advance({ counterDelta: delta });
    if (!confirmed) return;
    if (await run.corrector.setCounter(cidr, expected, counted)) {
      run.record({ kind: "pool-counter", detail: { cidr, from: now, to: counted } });
    }
  }

  /**
   * Addresses this invocation's claims phase released go into quarantine; with none, they are
   * free at once, and the meshes whose items list unallocated services get them now (as the
   * event path wakes them), not a cycle later.
   */
  async wakeWaiting(): Promise<void> {
    const { run } = this;
    const { corrector } = run;
    const free =
      corrector.dropped > 0 || (corrector.freed > 0 && freedAtOnce(run.settings.quarantineSeconds));
    if (!free) return;
    await corrector.withOwnFinder(async (finder) => {
      for (const mesh of await run.ports.passState.getWaiting()) run.woken.add(mesh);
      await passWokenMeshes(run, finder);
    });
  }
}
