/**
 * What the allocator holds besides the VIP items, read from its private tables (docs/contract.md,
 * "Private state"): `inspect mesh NAME` (a mesh's item with its services, hosts, unallocated
 * names and why, leaving services, whether it waits for an address, the range of its last
 * completed pass) and `get quarantine` (each held address, its former owner, when it frees).
 */
import { quarantineOver } from "../../../functions/domain/pool.ts";
import {
  addressKey,
  decodeAddress,
  decodeService,
  WAITING_KEY,
} from "../../../functions/store/claim-items.ts";
import { DynamoMeshSource } from "../../../functions/store/dynamo-mesh-source.ts";
import type { AddressClaim, ServiceClaim } from "../../../functions/store/ports.ts";
import {
  decodeMeshRange,
  meshRangeKey,
  waitingMeshes,
} from "../../../functions/store/state-items.ts";
import type { CliContext } from "../context.ts";
import { CommandFailedError, type ExitCode } from "../errors.ts";
import { formatDocument, formatTable, listOf, printResources } from "../output.ts";
import { vipRows } from "./resources.ts";
import { readVipItem, scanTable } from "./vips.ts";

/** `inspect mesh NAME`; exit 1 when neither the mesh nor a VIP item of it exists. */
export async function inspectMesh(ctx: CliContext, mesh: string): Promise<ExitCode> {
  const claims = ctx.tables.claims;
  const source = new DynamoMeshSource(ctx.ddb, ctx.tables);
  const [exists, item, range, waiting, dataplanes, externals] = await Promise.all([
    ctx.onTable(ctx.tables.meshes, () => source.meshExists(mesh)),
    readVipItem(ctx, mesh),
    ctx.onTable(claims, () =>
      ctx.doc.get({ TableName: claims, Key: { pk: meshRangeKey(mesh) }, ConsistentRead: true }),
    ),
    ctx.onTable(claims, () =>
      ctx.doc.get({ TableName: claims, Key: { pk: WAITING_KEY }, ConsistentRead: true }),
    ),
    ctx.onTable(ctx.tables.dataplanes, () => source.dataplanesOf(mesh)),
    ctx.onTable(ctx.tables.externalServices, () => source.externalServicesOf(mesh)),
  ]);
  if (!exists && item === undefined) {
    throw new CommandFailedError(
      `there is no Mesh ${JSON.stringify(mesh)} in table ${ctx.tables.meshes} and no VIP item of it in table ${ctx.tables.vips}`,
    );
  }
  const report = {
    mesh,
    exists,
    dataplanes: dataplanes.records.length,
    externalServices: externals.records.length,
    item:
      item === undefined
        ? null
        : {
            version: item.version,
            incarnation: item.incarnation,
            updatedAt: item.updatedAt,
            cidr: item.cidr,
            renumberings: item.renumberings ?? 0,
          },
    lastPassedUnder: decodeMeshRange(range)?.range.cidr ?? null,
    waitingForAddress: waitingMeshes(waiting).includes(mesh),
    services: item?.vips ?? {},
    hosts: item?.hosts ?? {},
    unallocated: item?.unallocated ?? {},
    unallocatedHosts: item?.unallocatedHosts ?? {},
    leaving: [...(item?.leaving ?? [])].sort(),
  };
  if (ctx.output !== "table") {
    ctx.out.line(formatDocument(report, ctx.output));
    return 0;
  }
  const yes = (value: boolean) => (value ? "yes" : "no");
  ctx.out.line(`Mesh ${mesh}`);
  ctx.out.line(
    `  in table ${ctx.tables.meshes}: ${yes(exists)}${exists ? "" : " (its item goes at the allocator's next pass)"}`,
  );
  ctx.out.line(`  dataplanes: ${report.dataplanes}, external services: ${report.externalServices}`);
  ctx.out.line(
    item === undefined
      ? "  VIP item: none yet"
      : `  VIP item: version ${item.version}, incarnation ${item.incarnation}, updated ${item.updatedAt}, range ${item.cidr}`,
  );
  ctx.out.line(
    `  range of its last stream-batch pass: ${report.lastPassedUnder ?? "(none recorded: no stream record has passed it)"}`,
  );
  ctx.out.line(`  waiting for an address: ${yes(report.waitingForAddress)}`);
  ctx.out.line(
    `  leaving: ${report.leaving.length === 0 ? "none" : `${report.leaving.join(", ")} (any later pass retracts their membership)`}`,
  );
  if (item !== undefined) for (const line of formatTable(vipRows(item))) ctx.out.line(line);
  return 0;
}

/** One held address of the claims table that no item may list. */
export interface HeldAddress {
  readonly vip: string;
  /** The service that had it. */
  readonly formerOwner: string;
  /** `released`: its owner left every mesh; `former`: its owner moved to another VIP. */
  readonly state: "released" | "former";
  /** Epoch ms of the release (undefined: not released yet). */
  readonly releasedAt: string | null;
  /** When another service may take it (undefined: once its owner is released). */
  readonly frees: string | null;
  readonly free: boolean;
}

/** The held addresses among the claims, sorted by when they free. */
export function heldAddresses(
  services: ReadonlyMap<string, ServiceClaim>,
  addresses: readonly AddressClaim[],
  quarantineSeconds: number,
  nowMs: number,
): HeldAddress[] {
  const held: HeldAddress[] = [];
  for (const address of addresses) {
    const owner = services.get(address.owner);
    const current = owner !== undefined && owner.vip === address.vip;
    const released = owner === undefined || owner.releasedAt !== undefined;
    if (current && !released) continue; // an address in use
    const releasedAt = address.releasedAt ?? owner?.releasedAt;
    const iso = (ms: number | undefined) => (ms === undefined ? null : new Date(ms).toISOString());
    held.push({
      vip: address.vip,
      formerOwner: address.owner,
      state: released ? "released" : "former",
      releasedAt: iso(releasedAt),
      frees: iso(releasedAt === undefined ? undefined : releasedAt + quarantineSeconds * 1000),
      free: releasedAt !== undefined && quarantineOver(releasedAt, nowMs, quarantineSeconds),
    });
  }
  // The soonest first; addresses that free only with their owner's release last.
  const order = (a: string, b: string) => (a < b ? -1 : a > b ? 1 : 0);
  return held.sort((a, b) => order(a.frees ?? "~", b.frees ?? "~") || order(a.vip, b.vip));
}

/** `get quarantine`: every address held for a service that left (or moved), and when it frees. */
export async function getQuarantine(ctx: CliContext, quarantineSeconds: number): Promise<ExitCode> {
  const items = await scanTable(ctx, ctx.tables.claims);
  const services = new Map<string, ServiceClaim>();
  const addresses: AddressClaim[] = [];
  for (const item of items) {
    const pk = String(item.pk);
    if (pk.startsWith("svc#")) services.set(String(item.service), decodeService(item));
    else if (pk === addressKey(String(item.vip))) addresses.push(decodeAddress(item));
  }
  const held = heldAddresses(services, addresses, quarantineSeconds, Date.now());
  printResources(
    ctx,
    { quarantineSeconds, ...listOf(held) },
    () => [
      ["ADDRESS", "FORMER OWNER", "STATE", "RELEASED", "FREES"],
      ...held.map((address) => [
        address.vip,
        address.formerOwner,
        address.state,
        address.releasedAt ?? "",
        address.frees === null
          ? "when its owner is released"
          : `${address.frees}${address.free ? " (free now)" : ""}`,
      ]),
    ],
    `no quarantined addresses in table ${ctx.tables.claims}`,
  );
  if (ctx.output === "table" && held.length > 0) {
    ctx.out.note(
      `quarantine: ${quarantineSeconds} s (VIP_QUARANTINE_SECONDS of this shell; the function's own setting decides)`,
    );
  }
  return 0;
}
