import { readdirSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { describe, expect, it } from "vitest";

const root = join(import.meta.dirname, "..", "..");

function importsOf(dir: string): Array<{ file: string; specifier: string }> {
  const found: Array<{ file: string; specifier: string }> = [];
  for (const name of readdirSync(join(root, dir))) {
    if (!name.endsWith(".ts")) continue;
    const text = readFileSync(join(root, dir, name), "utf8");
    for (const match of text.matchAll(/(?:import|export)[^'"]*?from\s+["']([^"']+)["']/g)) {
      found.push({ file: `${dir}/${name}`, specifier: match[1] as string });
    }
  }
  return found;
}

describe("architecture", () => {
  it("keeps the domain free of the AWS SDK, Lambda types and Node I/O", () => {
    const imports = importsOf("functions/domain");

    const forbidden = imports.filter(
      ({ specifier }) =>
        specifier.startsWith("@aws-sdk/") ||
        specifier.startsWith("@aws-lambda-powertools/") ||
        specifier === "aws-lambda" ||
        specifier.startsWith("node:") ||
        ["fs", "net", "http", "https", "child_process", "path", "os"].includes(specifier) ||
        specifier.includes("/store/") ||
        specifier.includes("/allocator/"),
    );

    expect(imports.length).toBeGreaterThan(0);
    expect(forbidden).toEqual([]);
  });

  it("keeps the store adapters free of Lambda handler code", () => {
    const imports = importsOf("functions/store");

    const forbidden = imports.filter(
      ({ specifier }) =>
        specifier.includes("/allocator/") || specifier.startsWith("@aws-lambda-powertools/"),
    );

    expect(forbidden).toEqual([]);
  });
});
