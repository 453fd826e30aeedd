import { describe, expect, it } from "vitest";
import { LAG_NOTE_EVERY_MS, lagNoter } from "../../functions/allocator/batch/process-batch.ts";
import { InMemoryClaimStore, InMemoryTelemetry } from "../fixtures/in-memory-ports.ts";

const GRACE_MS = 7_000;

function noterAt(clock: { now: number }) {
  const claims = new InMemoryClaimStore();
  const note = lagNoter(claims, GRACE_MS, () => clock.now, new InMemoryTelemetry());
  return { claims, note };
}

describe("the stream's lag note (decisions 132, 134)", () => {
  it("writes nothing while batches stay within the grace", async () => {
    // Arrange
    const clock = { now: 1_000_000 };
    const { claims, note } = noterAt(clock);

    // Act
    for (const lagMs of [0, 1_500, GRACE_MS]) {
      await note(lagMs);
      clock.now += 1_000;
    }

    // Assert
    expect(await claims.streamLag()).toBeUndefined();
  });

  it("notes a lag past the grace, refreshes it at most every 10 s, then notes the catch-up once", async () => {
    // Arrange
    const clock = { now: 1_000_000 };
    const { claims, note } = noterAt(clock);

    // Act / Assert: a lag past the grace is noted at once.
    await note(30_000);
    expect(await claims.streamLag()).toEqual({ at: 1_000_000, lagMs: 30_000 });
    // Within 10 s the note is not written again; after, it is.
    clock.now += LAG_NOTE_EVERY_MS - 1;
    await note(40_000);
    expect(await claims.streamLag()).toEqual({ at: 1_000_000, lagMs: 30_000 });
    clock.now += 1;
    await note(40_000);
    expect(await claims.streamLag()).toEqual({ at: 1_010_000, lagMs: 40_000 });
    // The first batch within the grace notes the catch-up, even within 10 s of the last note.
    clock.now += 2_000;
    await note(800);
    expect(await claims.streamLag()).toEqual({ at: 1_012_000, lagMs: 800 });
    // Ordinary traffic after it writes nothing more.
    clock.now += 20_000;
    await note(500);
    expect(await claims.streamLag()).toEqual({ at: 1_012_000, lagMs: 800 });
  });
});
