import { afterAll, beforeAll, describe, it } from "vitest";
import type { LocalEmulator } from "../../tools/local/emulator.ts";
import { startTestEngine } from "../fixtures/engine.ts";
import { runChaos } from "./chaos.ts";
import { expectClean } from "./expect-clean.ts";
import { motoBackend } from "./moto-backend.ts";

let emulator: LocalEmulator;

beforeAll(async () => {
  emulator = await startTestEngine();
});

afterAll(async () => {
  await emulator?.stop();
});

describe("chaos on the local engine: the DynamoDB adapters through an SDK client with injected faults", {
  timeout: 120_000,
}, () => {
  it.each([1, 2, 3])(
    "seed %i: every invariant holds before the sweep (the event path) and after it",
    async (seed) => {
      const result = await runChaos(seed, 30, { backend: motoBackend(emulator) });

      expectClean(result);
    },
  );
});
