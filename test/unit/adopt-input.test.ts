import { readFileSync } from "node:fs";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { AdoptInputError } from "../../functions/domain/adopt-entries.ts";
import { parseAdoptFile } from "../../tools/cli/adopt-input.ts";

const FIXTURES = join(import.meta.dirname, "..", "fixtures", "adopt");
const fixture = (name: string) => readFileSync(join(FIXTURES, name), "utf8");
/** mesh/kind/name=vip, for short expectations. */
const brief = (text: string, source = "f", mesh?: string) =>
  parseAdoptFile(text, source, mesh).entries.map((e) => `${e.mesh}/${e.kind}/${e.name}=${e.vip}`);

function errorOf(run: () => unknown): AdoptInputError {
  try {
    run();
  } catch (error) {
    if (error instanceof AdoptInputError) return error;
    throw error;
  }
  throw new Error("no error");
}

describe("vips adopt's input: Kuma's four shapes (Kuma's own test data)", () => {
  it("origin: a flat map in a Universal Config, mesh from kuma-<mesh>-dns-vips", () => {
    expect(brief(fixture("origin.yaml"))).toEqual([
      "mesh-1/service/backend=240.0.0.1",
      "mesh-1/service/frontend=240.0.0.3",
      "mesh-1/service/postgres=240.0.0.0",
      "mesh-1/service/redis=240.0.0.2",
    ]);
  });

  it("typed keys in a ConfigMap (JSON): 0 service, 1 host", () => {
    const parsed = parseAdoptFile(fixture("typed-keys.json"), "typed-keys.json");
    expect(parsed.entries.map((e) => `${e.mesh}/${e.kind}/${e.name}=${e.vip}`)).toEqual([
      "mesh-2/service/backend_2=240.0.1.1",
      "mesh-2/service/frontend_2=240.0.1.3",
      "mesh-2/host/host.com=240.0.1.4",
    ]);
    expect(parsed.entries[2]).toMatchObject({ source: "typed-keys.json", key: "1:host.com" });
  });

  it("the default shape ({address, outbounds}) in a ConfigMap (YAML)", () => {
    expect(brief(fixture("default.yaml"))).toEqual([
      "mesh-3/service/backend=240.0.0.1",
      "mesh-3/service/frontend=240.0.0.3",
      "mesh-3/host/kuma.io=240.0.1.4",
    ]);
  });

  it("tag-first, bare, with --mesh: svc entries are services, k8s and external-service hosts, virtual-outbound FQDNs", () => {
    const parsed = parseAdoptFile(fixture("tag-first.json"), "tf.json", "default");
    expect(parsed.entries.map((e) => `${e.kind}/${e.name}=${e.vip} ${e.origin ?? ""}`)).toEqual([
      "host/10.43.96.209=10.43.96.209 k8s",
      "service/demo-app_kuma-demo_svc_5000=240.0.0.4 svc",
      "service/httpbin=240.0.0.2 svc",
      "host/httpbin.org=240.0.0.3 external-service:httpbin",
      "fqdn/httpbin.mesh=240.0.0.5 virtual-outbound:default",
      "host/10.43.224.70=10.43.224.70 k8s",
      "service/redis_kuma-demo_svc_6379=240.0.0.1 svc",
      "fqdn/redis_kuma-demo_svc_6379.mesh=240.0.0.6 virtual-outbound:default",
    ]);
    expect(parsed.entries[1]?.key).toBe("v.demo-app_kuma-demo_svc_5000.oe[0].ap[1]");
  });

  it("the bare config string of each shape, with --mesh", () => {
    expect(brief('{"backend":"240.0.0.1"}', "f", "m")).toEqual(["m/service/backend=240.0.0.1"]);
    expect(brief('{"0:backend":"240.0.0.1","2:x.mesh":"240.0.0.9"}', "f", "m")).toEqual([
      "m/service/backend=240.0.0.1",
      "m/fqdn/x.mesh=240.0.0.9",
    ]);
    expect(
      brief('{"0:backend":{"address":"240.0.0.1","outbounds":[{"TagSet":{}}]}}', "f", "m"),
    ).toEqual(["m/service/backend=240.0.0.1"]);
  });

  it("a kubectl list: VIP ConfigMaps read, other ConfigMaps noted and left out", () => {
    const list = {
      apiVersion: "v1",
      kind: "List",
      items: [
        { kind: "ConfigMap", metadata: { name: "kube-root-ca.crt" }, data: { "ca.crt": "x" } },
        {
          kind: "ConfigMap",
          metadata: { name: "kuma-a-dns-vips" },
          data: { config: '{"web":"240.0.0.1"}' },
        },
        {
          kind: "ConfigMap",
          metadata: { name: "kuma-b-dns-vips" },
          data: { config: '{"0:web":{"address":"240.0.0.1","outbounds":[{}]}}' },
        },
      ],
    };
    const parsed = parseAdoptFile(JSON.stringify(list), "list.json");
    expect(parsed.entries.map((e) => `${e.mesh}/${e.name}=${e.vip}`)).toEqual([
      "a/web=240.0.0.1",
      "b/web=240.0.0.1",
    ]);
    expect(parsed.notes).toEqual([
      {
        source: "list.json (items[0])",
        note: "ConfigMap kube-root-ca.crt is not a kuma-<mesh>-dns-vips: left out",
      },
    ]);
  });

  it("the plain { mesh: { service: vip } } map, several YAML documents, IPv6 made canonical", () => {
    expect(brief('{"a":{"web":"240.0.0.7"},"b":{"api":"fd00:0::12"}}')).toEqual([
      "a/service/web=240.0.0.7",
      "b/service/api=fd00::12",
    ]);
    const yaml = `type: Config\nname: kuma-x-dns-vips\nconfig: '{"a":"240.0.0.1"}'\n---\ntype: Config\nname: kuma-y-dns-vips\nconfig: '{"b":"240.0.0.2"}'\n`;
    expect(brief(yaml)).toEqual(["x/service/a=240.0.0.1", "y/service/b=240.0.0.2"]);
  });

  it("names are data: __proto__ and constructor are services, in every shape", () => {
    expect(brief('{"__proto__":"240.0.0.1","constructor":"240.0.0.2"}', "f", "m")).toEqual([
      "m/service/__proto__=240.0.0.1",
      "m/service/constructor=240.0.0.2",
    ]);
    expect(brief('{"__proto__":{"constructor":"240.0.0.3"}}')).toEqual([
      "__proto__/service/constructor=240.0.0.3",
    ]);
    expect(
      brief('{"v":{"__proto__":{"oe":[{"ap":[{"a":"240.0.0.4","o":"svc"}]}]}}}', "f", "m"),
    ).toEqual(["m/service/__proto__=240.0.0.4"]);
    expect(({} as Record<string, unknown>).constructor).toBe(Object);
  });

  it("an entry Kuma could not allocate (no address) is noted, not adopted", () => {
    const parsed = parseAdoptFile('{"0:web":{"outbounds":[{}]}}', "f", "m");
    expect(parsed.entries).toEqual([]);
    expect(parsed.notes).toEqual([
      { source: "f", key: "0:web", note: "no address (Kuma could not allocate one)" },
    ]);
  });
});

describe("vips adopt's input: malformed files name the file and the key", () => {
  it.each([
    ['{"web":"not-an-ip"}', "web", '"not-an-ip" is not an IP address'],
    ['{"web":"240.0.0.01"}', "web", "is not an IP address"],
    ['{"bad name":"240.0.0.1"}', "bad name", "is not 1 to 253 characters"],
    ['{"3:web":"240.0.0.1"}', "3:web", "unknown entry type 3"],
    ['{"web":7}', "web", "the value must be an address"],
    ['{"v":{"web":{"oe":[{"ap":[{"p":80}]}]}}}', "v.web.oe[0].ap[0]", "needs a"],
  ])("%s", (text, key, reason) => {
    const error = errorOf(() => parseAdoptFile(text, "vips.json", "m"));
    expect(error.source).toBe("vips.json");
    expect(error.key).toBe(key);
    expect(error.message).toContain(reason);
    expect(error.message).toContain(`vips.json: key ${JSON.stringify(key)}`);
  });

  it("a bare config without --mesh, a name that disagrees with --mesh, bad JSON in config", () => {
    expect(errorOf(() => parseAdoptFile('{"web":"240.0.0.1"}', "f")).message).toContain(
      "pass --mesh MESH",
    );
    expect(errorOf(() => parseAdoptFile(fixture("origin.yaml"), "o.yaml", "other")).message).toBe(
      "o.yaml: the config kuma-mesh-1-dns-vips is for mesh mesh-1, not --mesh other",
    );
    const broken = errorOf(() =>
      parseAdoptFile(
        '{"kind":"ConfigMap","metadata":{"name":"kuma-m-dns-vips"},"data":{"config":"{"}}',
        "c.json",
      ),
    );
    expect(broken.key).toBe("data.config");
    expect(broken.message).toContain("not valid JSON");
    expect(errorOf(() => parseAdoptFile("a: [", "y.yaml")).message).toContain(
      "y.yaml: not valid YAML or JSON",
    );
    expect(errorOf(() => parseAdoptFile("   ", "e")).message).toBe("e: the file is empty");
  });
});
