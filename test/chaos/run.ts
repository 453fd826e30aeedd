/**
 * `npm run chaos -- --runs N --seed S [--steps K] [--no-sweep] [--no-external-services] [--emulator | --moto]`: N chaos
 * runs from seed S on the in-memory ports, external services and their hosts in the mix (with
 * --emulator, on the local engine VIPS_EMULATOR names through the SDK client, without them;
 * --moto is --emulator on moto_server); prints one summary and, for each failing seed, its
 * operations and what failed. Exit 1 on a failure, or when fewer runs than the floor were
 * checked before the sweep (PRE_SWEEP_FLOOR in chaos.ts).
 */
import { parseArgs } from "node:util";
import { ENGINE_NAMES, startEmulator } from "../../tools/local/emulator.ts";
import { belowFloor, type ChaosResult, failed, runChaos, summarize } from "./chaos.ts";
import { motoBackend } from "./moto-backend.ts";

const { values } = parseArgs({
  options: {
    runs: { type: "string", default: "100" },
    seed: { type: "string", default: "1" },
    steps: { type: "string", default: "40" },
    "no-sweep": { type: "boolean", default: false },
    /** Leave external services and their hosts out of the mix (in the in-memory backend's). */
    "no-external-services": { type: "boolean", default: false },
    emulator: { type: "boolean", default: false },
    moto: { type: "boolean", default: false },
  },
});
const runs = Number(values.runs);
const first = Number(values.seed);
const steps = Number(values.steps);
if (!Number.isInteger(runs) || runs < 1 || !Number.isInteger(first) || !Number.isInteger(steps)) {
  process.stderr.write(
    "usage: npm run chaos -- [--runs N] [--seed S] [--steps K] [--no-sweep] [--no-external-services] [--emulator | --moto]\n",
  );
  process.exit(2);
}
// With --emulator: the DynamoDB adapters on a local engine started here, faults injected by an
// SDK middleware (slower: about 2 s a run of 60 steps on moto_server).
const emulator =
  values.emulator === true || values.moto === true
    ? await startEmulator(values.moto === true ? { engine: "moto" } : {})
    : undefined;
if (emulator !== undefined) process.stdout.write(`on ${ENGINE_NAMES[emulator.engine]}\n`);
const backend = emulator === undefined ? undefined : motoBackend(emulator);
const results: ChaosResult[] = [];
const start = performance.now();
for (let seed = first; seed < first + runs; seed++) {
  const result = await runChaos(seed, steps, {
    sweep: values["no-sweep"] !== true,
    ...(values["no-external-services"] === true ? { externalServices: false } : {}),
    ...(backend !== undefined ? { backend } : {}),
  });
  results.push(result);
  if (failed(result)) {
    process.stdout.write(
      [
        `seed ${seed} FAILED:`,
        ...(result.preSweepViolations ?? []).map((v) => `  before the sweep: violation ${v}`),
        ...(result.preSweepLeaks ?? []).map((v) => `  before the sweep: leak ${v}`),
        ...result.redeliveryChanges.map((v) => `  full redelivery: ${v}`),
        ...result.violations.map((v) => `  violation ${v}`),
        ...result.leaks.map((v) => `  leak ${v}`),
        ...result.secondRepairDetails.map((r) => `  a second sweep corrected ${r}`),
        "  operations:",
        ...result.operations.map((op) => `    ${op}`),
        "",
      ].join("\n"),
    );
  }
}
process.stdout.write(`${summarize(results)}\n`);
process.stdout.write(
  `seeds ${first}..${first + runs - 1}, ${steps} steps each, ${((performance.now() - start) / 1000).toFixed(1)} s\n`,
);
await emulator?.stop();
// The checks before the sweep cannot be vacuous: too few runs checked fails the run too (the
// summary's last line says so).
process.exit(results.some(failed) || belowFloor(results).length > 0 ? 1 : 0);
