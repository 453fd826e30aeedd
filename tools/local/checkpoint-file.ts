import { randomUUID } from "node:crypto";
import { mkdirSync, readFileSync, renameSync, writeFileSync } from "node:fs";
import { dirname } from "node:path";
import { tableNameFromArn } from "../../functions/store/stream-records.ts";

/** streamArn -> shardId -> last processed sequence number. */
export type CheckpointMap = Record<string, Record<string, string>>;

/**
 * Where each shard was read up to: in memory and, with a file, on disk (`{streamArn: {shardId:
 * sequenceNumber}}`), so checkpoints survive the process.
 */
export class Checkpoints {
  private checkpoints: CheckpointMap | undefined;

  constructor(
    private readonly file: string | undefined,
    /** A checkpoint file that exists but cannot be read (it is then ignored). */
    private readonly onUnreadable: (error: Error) => void,
    /** Table name -> its current stream ARN (undefined while unknown). */
    private readonly liveStreams: () => ReadonlyMap<string, string | undefined>,
  ) {}

  /** The checkpoint file's content; {} when it is missing or unreadable. */
  private readFile(): CheckpointMap {
    if (this.file === undefined) return {};
    try {
      const parsed: unknown = JSON.parse(readFileSync(this.file, "utf8"));
      if (parsed !== null && typeof parsed === "object" && !Array.isArray(parsed)) {
        return parsed as CheckpointMap;
      }
    } catch (error) {
      if ((error as NodeJS.ErrnoException).code === "ENOENT") return {};
    }
    this.onUnreadable(new Error(`ignoring unreadable checkpoint file ${this.file}`));
    return {};
  }

  private load(): CheckpointMap {
    this.checkpoints ??= this.readFile();
    return this.checkpoints;
  }

  get(streamArn: string, shardId: string): string | undefined {
    return this.load()[streamArn]?.[shardId];
  }

  /**
   * Records progress in memory and, with a checkpoint file, on disk. Other processes may share
   * the file (a `watch` and a `drain` on one endpoint), so each write re-reads it, keeps their
   * entries, takes the higher sequence number where both read the same shard, and replaces the
   * file atomically (rename). Only two writes landing within the same instant can still lose
   * one; the cost of that is reprocessing, which the allocator tolerates.
   */
  set(streamArn: string, shardId: string, sequenceNumber: string): void {
    const checkpoints = this.load();
    checkpoints[streamArn] = {
      ...checkpoints[streamArn],
      [shardId]: sequenceNumber,
    };
    if (this.file === undefined) return;
    const merged = this.readFile();
    for (const [arn, shards] of Object.entries(checkpoints)) {
      const target = { ...merged[arn] };
      for (const [id, ours] of Object.entries(shards)) {
        const theirs = target[id];
        target[id] =
          theirs !== undefined && /^\d+$/.test(theirs) && BigInt(theirs) > BigInt(ours)
            ? theirs
            : ours;
      }
      merged[arn] = target;
    }
    // Forget older streams of our tables (a recreated table has a new stream).
    const current = this.liveStreams();
    for (const arn of Object.keys(merged)) {
      const tableName = tableNameFromArn(arn);
      const live = tableName !== undefined ? current.get(tableName) : undefined;
      if (live !== undefined && live !== arn) {
        delete merged[arn];
        delete checkpoints[arn];
      }
    }
    mkdirSync(dirname(this.file), { recursive: true });
    const temporary = `${this.file}.${process.pid}.${randomUUID()}.tmp`;
    writeFileSync(temporary, `${JSON.stringify(merged, null, 2)}\n`);
    renameSync(temporary, this.file);
  }
}
