import { expect } from "vitest";
import { type ChaosResult, uncheckedWithoutCause } from "./chaos.ts";

/** Every check of a chaos run holds: before the sweep (the event path alone) and after it. */
export function expectClean(result: ChaosResult): void {
  // Unchecked before the sweep only when a record was lost (or, for leaks, an invocation
  // killed): never silently.
  expect(uncheckedWithoutCause(result)).toEqual([]);
  expect(result.preSweepViolations ?? []).toEqual([]);
  expect(result.preSweepLeaks ?? []).toEqual([]);
  expect(result.redeliveryChanges).toEqual([]);
  expect(result.violations).toEqual([]);
  expect(result.leaks).toEqual([]);
  expect(result.secondRepairDetails).toEqual([]);
  expect(result.invocations).toBeGreaterThan(0);
}
