import type { AttributeValue as StreamsAttributeValue } from "@aws-sdk/client-dynamodb-streams";
import { describe, expect, it } from "vitest";
import { toLambdaAttributeValue } from "../../tools/local/poller.ts";

describe("toLambdaAttributeValue", () => {
  it("reads a bare string (moto's form of a map entry under the empty key) as a string", () => {
    const problems: string[] = [];
    const value = { M: { "": "x", "kuma.io/service": { S: "web" } } } as never;

    expect(toLambdaAttributeValue(value, problems)).toEqual({
      M: { "": { S: "x" }, "kuma.io/service": { S: "web" } },
    });
    expect(problems).toEqual([]);
  });

  it("turns a value it cannot read into NULL and names it, instead of throwing", () => {
    const problems: string[] = [];
    const value = { M: { tags: { M: { odd: { X: 1 } as unknown as StreamsAttributeValue } } } };

    expect(toLambdaAttributeValue(value, problems)).toEqual({
      M: { tags: { M: { odd: { NULL: true } } } },
    });
    expect(problems).toEqual(['tags.odd: unknown attribute value type ["X"]']);
  });

  it("keeps a key named __proto__ as data", () => {
    const image = JSON.parse('{"M":{"__proto__":{"S":"a"}}}') as StreamsAttributeValue;

    const converted = toLambdaAttributeValue(image) as { M: Record<string, unknown> };

    expect(Object.keys(converted.M)).toEqual(["__proto__"]);
  });
});
