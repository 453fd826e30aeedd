import { describe, expect, it } from "vitest";
import {
  belowFloor,
  type ChaosResult,
  failed,
  PRE_SWEEP_FLOOR,
  runChaos,
  uncheckedWithoutCause,
} from "./chaos.ts";
import { expectClean } from "./expect-clean.ts";

/** Seeds of the default suite; `npm run chaos -- --runs N --seed S` runs more. */
const SEEDS = Array.from({ length: 60 }, (_, i) => 1000 + i);

/** The default suite's runs, by seed (each seed's test fills it; the floor test reads it). */
const RUNS = new Map<number, ChaosResult>();

async function defaultRun(seed: number): Promise<ChaosResult> {
  const known = RUNS.get(seed);
  if (known !== undefined) return known;
  const result = await runChaos(seed, 80);
  RUNS.set(seed, result);
  return result;
}

describe("chaos: concurrent faulty invocations, then one sweep (in-memory ports)", () => {
  it.each(SEEDS)(
    "seed %i (external services and their hosts in the mix): every invariant holds before the sweep (the event path) and after it",
    async (seed) => {
      expectClean(await defaultRun(seed));
    },
  );

  it("checks the event path alone in enough of the default runs, external services among them", async () => {
    const results = [];
    for (const seed of SEEDS) results.push(await defaultRun(seed));
    const checked = results.filter((result) => result.preSweepViolations !== undefined);
    const withExternal = results.filter((result) =>
      result.operations.some((op) => op.startsWith("external-service put")),
    );

    expect(belowFloor(results)).toEqual([]);
    expect(checked.length).toBeGreaterThanOrEqual(PRE_SWEEP_FLOOR.checked * SEEDS.length);
    expect(withExternal.length).toBeGreaterThanOrEqual(SEEDS.length / 2);
  });

  it("says a share of runs below the floor is below it", () => {
    const run = (checked: boolean, leaks: boolean) =>
      ({
        preSweepViolations: checked ? [] : undefined,
        preSweepLeaks: leaks ? [] : undefined,
      }) as unknown as ChaosResult;
    const enough = [run(true, true), run(true, false), run(false, false)];
    const few = [run(true, false), run(false, false), run(false, false), run(false, false)];

    expect(belowFloor(enough)).toEqual([]);
    expect(belowFloor(few)).toEqual([
      "invariants 1-10 checked in 1 of 4 runs",
      "leaks checked in 0 of 4 runs",
    ]);
  });

  it("says a run left unchecked before the sweep without a lost record or a kill is unexcused", () => {
    const run = (checked: boolean, leaks: boolean, faults: [string, number][]) =>
      ({
        preSweepViolations: checked ? [] : undefined,
        preSweepLeaks: leaks ? [] : undefined,
        faults: new Map(faults),
      }) as unknown as ChaosResult;

    expect(uncheckedWithoutCause(run(true, true, []))).toEqual([]);
    expect(uncheckedWithoutCause(run(false, false, [["dropped", 1]]))).toEqual([]);
    expect(uncheckedWithoutCause(run(true, false, [["crash", 2]]))).toEqual([]);
    expect(uncheckedWithoutCause(run(false, false, [["throttle", 3]]))).toEqual([
      "invariants 1-10 unchecked before the sweep, yet no record was lost",
      "leaks unchecked before the sweep, yet no record was lost and nothing killed",
    ]);
    expect(uncheckedWithoutCause(run(true, false, []))).toEqual([
      "leaks unchecked before the sweep, yet no record was lost and nothing killed",
    ]);
  });

  it.each(SEEDS.slice(0, 30))(
    "seed %i without external services: every invariant holds before and after the sweep",
    async (seed) => {
      const result = await runChaos(seed, 80, { externalServices: false });

      expect(result.operations.some((op) => op.startsWith("external-service"))).toBe(false);
      expectClean(result);
    },
  );

  it("injects every kind of fault over the default seeds", async () => {
    const kinds = new Set<string>();
    for (const seed of SEEDS.slice(0, 20)) {
      for (const kind of (await defaultRun(seed)).faults.keys()) kinds.add(kind);
    }
    expect([...kinds].sort()).toEqual([
      "cidr-change",
      "clock",
      "crash",
      "dropped",
      "lost-response",
      "out-of-order",
      "redelivery",
      "throttle",
    ]);
  });

  it("finds what the event path alone leaves wrong when the sweep is left out", async () => {
    // Seeds 13, 15 and 29 lose records or kill invocations, and leave violations or leaks
    // without the sweep (npm run chaos -- --no-sweep). (Seed 2 did too until the skipped
    // passes of decision 073 changed which requests its faults hit, and seed 21 until the
    // fixes of issue 27.)
    const without = await Promise.all(
      [13, 15, 29].map((seed) => runChaos(seed, 80, { sweep: false, externalServices: false })),
    );
    const withSweep = await Promise.all(
      [13, 15, 29].map((seed) => runChaos(seed, 80, { externalServices: false })),
    );

    expect(without.every(failed)).toBe(true);
    expect(withSweep.some(failed)).toBe(false);
    expect(withSweep.every((result) => result.repairs.size > 0)).toBe(true);
  });

  it.each([89, 282])(
    "seed %i: a sweep's pass that frees addresses wakes the meshes waiting for one (regression)",
    async (seed) => {
      // Found by npm run chaos: with no quarantine, a mesh swept before another mesh's pass freed
      // an address kept its service unallocated until the next cycle (a second sweep corrected it).
      const result = await runChaos(seed, 80, { externalServices: false });

      expect(result.secondRepairDetails).toEqual([]);
      expect(result.violations).toEqual([]);
    },
  );

  it("seed 387: an address whose owner's service claim is gone is dropped and given out in the same sweep (regression)", async () => {
    // First found by npm run chaos -- --runs 1000 --seed 301 (then seeds 428 and 109, before
    // the generator learned lost responses and out-of-order deliveries, and before the skipped
    // passes of decision 073 changed which requests the faults hit): the sweep dropped such an
    // address but handed it out only a cycle later.
    const result = await runChaos(387, 80, { externalServices: false });

    expect(result.repairs.get("address-orphaned")).toBe(1);
    expect(result.violations).toEqual([]);
    expect(result.secondRepairDetails).toEqual([]);
  });

  it("seed 236: an address a renumbering kept for its service is held, not free (regression)", async () => {
    // Found by the first 300-run: flip-flopping VIP_CIDR on a /29 leaves every address kept by
    // renumbered services (decision 012); the exhaustion check once counted one as free.
    const result = await runChaos(236, 80, { externalServices: false });

    expect(result.violations).toEqual([]);
  });
});
