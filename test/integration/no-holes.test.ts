/**
 * A fresh state allocates without holes: the demo's meshes and dataplanes, drained through
 * the real poller and handler on the local engine, take the lowest addresses with none passed
 * over.
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { demoData } from "../../tools/cli/demo-data.ts";
import type { LocalEmulator } from "../../tools/local/emulator.ts";
import { createWorld, expectInvariants, startEmulator, type World } from "./harness.ts";

let emulator: LocalEmulator;
let w: World | undefined;

beforeAll(async () => {
  emulator = await startEmulator();
});

afterAll(async () => {
  w?.close();
  await emulator?.stop();
});

describe("a fresh state", () => {
  it("gives the demo's services the lowest addresses, none skipped", async () => {
    // Arrange
    w = await createWorld(emulator);
    const demo = demoData();
    for (const mesh of demo.meshes) await w.putMesh(mesh);
    for (const { type: _type, ...item } of demo.dataplanes) {
      await w.putDataplane(item as Record<string, unknown>);
    }

    // Act
    await w.drain();

    // Assert
    const items = await expectInvariants(w);
    const vips = new Set(items.flatMap((item) => Object.values(item.vips)));
    const expected = Array.from({ length: vips.size }, (_, i) => `240.0.0.${i}`);
    expect(vips.size).toBeGreaterThan(5);
    expect([...vips].sort((a, b) => Number(a.split(".")[3]) - Number(b.split(".")[3]))).toEqual(
      expected,
    );
  });
});
