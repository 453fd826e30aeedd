import { describe, expect, it } from "vitest";
import { recordOf } from "../../functions/domain/records.ts";
import type { VipItem } from "../../functions/domain/types.ts";
import { diffVipItems, formatChange } from "../../tools/cli/vip-diff.ts";

const item = (
  version: number,
  vips: Array<[string, string]>,
  unallocated: Array<[string, string]> = [],
): VipItem => ({
  mesh: "default",
  version,
  vips: recordOf(vips),
  cidr: "240.0.0.0/4",
  updatedAt: "2026-01-01T00:00:00.000Z",
  unallocated: recordOf(unallocated),
  incarnation: "i1",
});

describe("diffVipItems (the CLI's watch, on the reader's MeshDiff)", () => {
  it("reports a new version even when no VIP moved, with the services newly without one", () => {
    const change = diffVipItems(
      "default",
      item(1, [["web", "240.0.0.1"]]),
      item(2, [["web", "240.0.0.1"]], [["db", "range exhausted"]]),
    );

    expect(change).toMatchObject({ change: "changed", version: 2, previousVersion: 1 });
    expect(change?.added).toEqual([]);
    expect(formatChange(change as NonNullable<typeof change>, () => [], 3600)).toEqual([
      "mesh default: version 2 (was 1)",
      "  ! db has no VIP: range exhausted",
    ]);
  });

  it("formats creation, renumbering and deletion as before", () => {
    const created = diffVipItems(
      "default",
      undefined,
      item(1, [
        ["b", "240.0.0.2"],
        ["a", "240.0.0.1"],
      ]),
    );
    const moved = diffVipItems(
      "default",
      item(1, [["a", "240.0.0.1"]]),
      item(2, [["a", "240.0.0.9"]]),
    );
    const deleted = diffVipItems("default", item(2, [["a", "240.0.0.9"]]), undefined);
    const lines = (change: ReturnType<typeof diffVipItems>) =>
      formatChange(change as NonNullable<typeof change>, () => [], 3600);

    expect(diffVipItems("default", item(1, []), item(1, []))).toBeUndefined();
    expect(lines(created)).toEqual([
      "mesh default: version 1 (new)",
      "  + a 240.0.0.1",
      "  + b 240.0.0.2",
    ]);
    expect(lines(moved)).toEqual([
      "mesh default: version 2 (was 1)",
      "  ~ a 240.0.0.1 -> 240.0.0.9",
    ]);
    expect(lines(deleted)).toEqual([
      "mesh default: deleted (VIP item removed at version 2)",
      "  - a 240.0.0.9 (quarantined)",
    ]);
  });
});
