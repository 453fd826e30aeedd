import type { AllocatorConfig } from "../../../functions/allocator/config.ts";
import type { VipItem } from "../../../functions/domain/types.ts";
import type { BatchInfo } from "../../local/poller.ts";
import { allocatorPoller, type CliContext } from "../context.ts";
import { diffVipItems, formatChange, type MeshChange } from "../vip-diff.ts";
import { readVipItem, scanVipItems } from "./vips.ts";

/** Keeps the last VIP item seen per mesh and reports what changed since. */
export class VipWatcher {
  private items = new Map<string, VipItem>();
  private queue: Promise<unknown> = Promise.resolve();

  constructor(
    private readonly ctx: CliContext,
    private readonly quarantineSeconds: number,
  ) {}

  /** Starts from the items as they are now (so the first diff is against reality). */
  async prime(items?: Map<string, VipItem>): Promise<void> {
    this.items = items ?? (await scanVipItems(this.ctx));
  }

  /** Re-reads the touched meshes' items and prints the changes; one refresh at a time. */
  refresh(meshes: readonly string[]): Promise<MeshChange[]> {
    const run = this.queue.then(async () => {
      const changes: MeshChange[] = [];
      for (const mesh of meshes) {
        const after = await readVipItem(this.ctx, mesh);
        const change = diffVipItems(mesh, this.items.get(mesh), after);
        if (after === undefined) this.items.delete(mesh);
        else this.items.set(mesh, after);
        if (change !== undefined) {
          changes.push(change);
          this.print(change);
        }
      }
      return changes;
    });
    this.queue = run.catch(() => undefined);
    return run;
  }

  /** Called by the poller after each invocation. */
  async onBatch(info: BatchInfo): Promise<void> {
    if (info.outcome === "gave-up") {
      this.ctx.out.note(
        `! ${info.records.length} ${info.table} record(s) gave up (${info.condition}); see the failure file`,
      );
    }
    await this.refresh(info.meshes);
  }

  private print(change: MeshChange): void {
    if (this.ctx.json) {
      this.ctx.out.line(JSON.stringify(change));
      return;
    }
    const holders = (service: string): string[] =>
      [...this.items.entries()]
        .filter(([mesh, item]) => mesh !== change.mesh && item.vips[service] !== undefined)
        .map(([mesh]) => mesh)
        .sort();
    for (const line of formatChange(change, holders, this.quarantineSeconds)) {
      this.ctx.out.line(line);
    }
  }
}

/** Resolves on the first SIGINT or SIGTERM (a second one gets Node's default: exit). */
export function untilSignal(): Promise<NodeJS.Signals> {
  return new Promise((resolve) => {
    const on = (signal: NodeJS.Signals): void => {
      process.off("SIGINT", on);
      process.off("SIGTERM", on);
      resolve(signal);
    };
    process.on("SIGINT", on);
    process.on("SIGTERM", on);
  });
}

/** `watch`: polls both streams continuously and prints each mesh's VIP changes. */
export async function watchCommand(ctx: CliContext, config: AllocatorConfig): Promise<0> {
  const watcher = new VipWatcher(ctx, config.quarantineSeconds);
  await watcher.prime();
  const poller = allocatorPoller(ctx, config, { onBatch: (info) => watcher.onBatch(info) });
  poller.start();
  ctx.out.note(
    `watching the ${config.tables.meshes} and ${config.tables.dataplanes} streams at ${ctx.where()} (Ctrl-C to stop)`,
  );
  try {
    await untilSignal();
    ctx.out.note("stopping ...");
    await poller.stop();
  } finally {
    poller.destroy();
  }
  return 0;
}
