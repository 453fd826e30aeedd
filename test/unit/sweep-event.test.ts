import { describe, expect, it } from "vitest";
import { BACKFILL, isAllocatorCommand, SCHEDULED_SWEEP } from "../../functions/allocator/config.ts";
import { meshRecord, streamEvent } from "../fixtures/builders.ts";

describe("telling the allocator's own invocations from stream batches", () => {
  it("recognizes the schedule's and the trigger's payloads", () => {
    expect(isAllocatorCommand(SCHEDULED_SWEEP)).toBe(true);
    expect(isAllocatorCommand(BACKFILL)).toBe(true);
    expect(isAllocatorCommand({ vipAllocator: "sweep", restart: true })).toBe(true);
  });

  it("treats anything else as a stream batch (whose own checks report bad input)", () => {
    expect(isAllocatorCommand(streamEvent([meshRecord("meshes", "m")]))).toBe(false);
    expect(isAllocatorCommand({ vipAllocator: "drop-tables" })).toBe(false);
    expect(isAllocatorCommand({ Records: [], vipAllocator: undefined })).toBe(false);
    expect(isAllocatorCommand(null)).toBe(false);
    expect(isAllocatorCommand("sweep")).toBe(false);
  });
});
