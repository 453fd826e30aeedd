import type { MeshSource, SourceRead } from "../../store/ports.ts";

/**
 * The ingresses as one batch sees them: read once (the adapter scans the whole dataplanes
 * table for them) and shared by every mesh the batch reconciles; a later change to an ingress
 * brings its own stream record. The items that could not be decoded are handed out once, so
 * they are reported once per batch.
 */
export class BatchIngresses {
  private read: Promise<SourceRead> | undefined;
  private issuesHandedOut = false;
  /** How many times the tables were read. */
  reads = 0;

  /** `consistent`: false for the repair sweep's detection reads. */
  constructor(
    private readonly source: MeshSource,
    private readonly consistent = true,
  ) {}

  async get(): Promise<SourceRead> {
    if (this.read === undefined) {
      this.reads++;
      this.read = this.source.ingresses(this.consistent);
    }
    const { records, issues } = await this.read;
    if (this.issuesHandedOut) return { records, issues: [] };
    this.issuesHandedOut = true;
    return { records, issues };
  }
}
