import { DynamoDBStreamsClient } from "@aws-sdk/client-dynamodb-streams";
import type { AllocatorConfig } from "../../../functions/allocator/config.ts";
import { own } from "../../../functions/domain/records.ts";
import type { VipItem } from "../../../functions/domain/types.ts";
import { clientConfig } from "../../local/aws-clients.ts";
import type { BatchInfo } from "../../local/poller.ts";
import { allocatorPoller, type CliContext } from "../context.ts";
import { diffVipItems, formatChange, type MeshChange } from "../vip-diff.ts";
import { VipsFeed } from "../vips-feed.ts";
import { readVipItem, scanVipItems } from "./vips.ts";

/**
 * Reports each mesh's VIP changes: from the vips table's change feed when it has one (each
 * write against what the item held before it, whoever wrote it; decision 146), else by reading
 * the touched meshes' items after each batch (against the last read of each).
 */
export class VipWatcher {
  private items = new Map<string, VipItem>();
  private queue: Promise<unknown> = Promise.resolve();
  private feed: VipsFeed | undefined;
  private streams: DynamoDBStreamsClient | undefined;

  constructor(
    private readonly ctx: CliContext,
    private readonly quarantineSeconds: number,
  ) {}

  /**
   * Starts from the items as they are now (so the first diff is against reality), and opens the
   * change feed when the vips table has one; says on stderr when it has none.
   */
  async prime(items?: Map<string, VipItem>): Promise<void> {
    this.streams ??= new DynamoDBStreamsClient(clientConfig({ endpoint: this.ctx.endpoint }));
    this.feed = await this.ctx.onTable(this.ctx.tables.vips, () =>
      VipsFeed.open(this.ctx.ddb, this.streams as DynamoDBStreamsClient, this.ctx.tables.vips),
    );
    if (this.feed === undefined) {
      this.ctx.out.note(
        `note: table ${this.ctx.tables.vips} has no change feed (a NEW_AND_OLD_IMAGES stream): changes are shown against the last read of each item`,
      );
    }
    this.items = items ?? (await scanVipItems(this.ctx));
  }

  /** The change feed's new writes (or, without one, the touched meshes' items), printed. */
  refresh(meshes: readonly string[]): Promise<MeshChange[]> {
    const run = this.queue.then(async () => {
      const changes: MeshChange[] = [];
      const show = (mesh: string, before: VipItem | undefined, after: VipItem | undefined) => {
        const change = diffVipItems(mesh, before, after);
        if (after === undefined) this.items.delete(mesh);
        else this.items.set(mesh, after);
        if (change !== undefined) {
          changes.push(change);
          this.print(change);
        }
      };
      if (this.feed !== undefined) {
        for (const write of await this.feed.poll()) show(write.mesh, write.before, write.after);
        return changes;
      }
      for (const mesh of meshes) {
        show(mesh, this.items.get(mesh), await readVipItem(this.ctx, mesh));
      }
      return changes;
    });
    this.queue = run.catch(() => undefined);
    return run;
  }

  /** Reads the change feed every `ms` (writes of other writers show without a batch here). */
  follow(ms = 500): () => void {
    if (this.feed === undefined) return () => {};
    const timer = setInterval(() => {
      this.refresh([]).catch((error: unknown) =>
        this.ctx.out.note(`warning: vips change feed: ${(error as Error).message}`),
      );
    }, ms);
    return () => clearInterval(timer);
  }

  close(): void {
    this.streams?.destroy();
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
    const holders = (name: string, host = false): string[] =>
      [...this.items.entries()]
        .filter(
          ([mesh, item]) =>
            mesh !== change.mesh && own(host ? item.hosts : item.vips, name) !== undefined,
        )
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

/**
 * `watch`: polls the input streams continuously through the handler and prints each mesh's VIP
 * changes, services and hosts (from the vips change feed when the table has one).
 */
export async function watchCommand(ctx: CliContext, config: AllocatorConfig): Promise<0> {
  const watcher = new VipWatcher(ctx, config.quarantineSeconds);
  let stopFollowing = () => {};
  try {
    await watcher.prime();
    const poller = allocatorPoller(ctx, config, { onBatch: (info) => watcher.onBatch(info) });
    poller.start();
    stopFollowing = watcher.follow();
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
  } finally {
    stopFollowing();
    watcher.close();
  }
  return 0;
}
