import { readFileSync } from "node:fs";
import { describe, expect, it } from "vitest";

const readme = readFileSync(new URL("../../README.md", import.meta.url), "utf8");

describe("README.md", () => {
  it("stays at most 250 lines (details belong in docs/)", () => {
    expect(readme.split("\n").length).toBeLessThanOrEqual(250);
  });

  it("shows both ways to deploy in its quick start: this repository's app and your own", () => {
    const quickStart = readme.slice(
      readme.indexOf("## Quick start"),
      readme.indexOf("\n## ", readme.indexOf("## Quick start") + 1),
    );
    expect(quickStart).toContain("npx cdk deploy VipAllocator");
    expect(quickStart).toContain('import { VipAllocator } from "serverless-vip-allocator/cdk"');
  });
});
