import * as viaPackage from "serverless-vip-allocator/reader";
import { describe, expect, it } from "vitest";
import * as direct from "../../functions/reader/index.ts";

describe("the reader package entry point", () => {
  it("is importable by package name (package.json exports ./reader) as a downstream service would", () => {
    expect(viaPackage.VipReader).toBe(direct.VipReader);
    expect(Object.keys(viaPackage).sort()).toEqual(
      [
        "DnsResponder",
        "DnsTtlError",
        "NameTable",
        "VipReader",
        "VipReaderError",
        "VipSnapshot",
        "addressOfReverseName",
        "answerQuery",
        "canonicalVip",
        "checkDnsTtl",
        "diffMesh",
        "diffSnapshots",
        "diffStreamRecord",
        "dnsName",
        "isEmptyDiff",
        "kumaVariant",
        "meshViewOf",
        "normalizeDomain",
        "reverseName",
        "serveDns",
        "summarizeDiff",
      ].sort(),
    );
  });
});
