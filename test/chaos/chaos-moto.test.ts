import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { type MotoServer, startMoto } from "../../functions/local/moto.ts";
import { runChaos } from "./chaos.ts";
import { motoBackend } from "./moto-backend.ts";

let moto: MotoServer;

beforeAll(async () => {
  moto = await startMoto();
});

afterAll(async () => {
  await moto?.stop();
});

describe("chaos on moto_server: the DynamoDB adapters through an SDK client with injected faults", {
  timeout: 120_000,
}, () => {
  it.each([1, 2, 3])(
    "seed %i: every invariant holds before the sweep (the event path) and after it",
    async (seed) => {
      const result = await runChaos(seed, 30, { backend: motoBackend(moto) });

      expect(result.preSweepViolations ?? []).toEqual([]);
      expect(result.preSweepLeaks ?? []).toEqual([]);
      expect(result.redeliveryChanges).toEqual([]);
      expect(result.violations).toEqual([]);
      expect(result.leaks).toEqual([]);
      expect(result.secondRepairDetails).toEqual([]);
      expect(result.invocations).toBeGreaterThan(0);
    },
  );
});
