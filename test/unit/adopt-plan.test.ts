import { describe, expect, it } from "vitest";
import type { AdoptEntry } from "../../functions/domain/adopt-entries.ts";
import { alreadyAdopted, planAdoption } from "../../functions/domain/adopt-plan.ts";
import { VipPool } from "../../functions/domain/pool.ts";
import { parseAdoptFile } from "../../tools/cli/adopt-input.ts";

const pool = VipPool.parse("240.0.0.0/4");
const empty = { services: new Map<string, string>(), addresses: new Map<string, string>() };
const entries = (map: Record<string, Record<string, string>>): AdoptEntry[] =>
  parseAdoptFile(JSON.stringify(map), "vips.json").entries as AdoptEntry[];
const summary = (plan: ReturnType<typeof planAdoption>) =>
  plan.decisions.map(
    (d) =>
      `${d.entry.mesh}/${d.entry.name} ${d.outcome}${d.conflict ? ` ${d.conflict}` : ""} ${d.vip ?? "-"}`,
  );

describe("planAdoption: each conflict decided and reported per entry", () => {
  it("adopts a clean file: every entry adopt, one claim per service", () => {
    const plan = planAdoption(
      entries({ a: { web: "240.0.0.1", api: "240.0.0.2" }, b: { web: "240.0.0.1" } }),
      empty,
      { pool, renumberOutside: false },
    );
    expect(summary(plan)).toEqual([
      "a/web adopt 240.0.0.1",
      "a/api adopt 240.0.0.2",
      "b/web adopt 240.0.0.1",
    ]);
    expect([...plan.claims]).toEqual([
      ["api", "240.0.0.2"],
      ["web", "240.0.0.1"],
    ]);
    expect(plan.meshes).toEqual(["a", "b"]);
    expect(alreadyAdopted(plan)).toBe(false);
  });

  it("same service, different VIPs: the VIP in the most meshes wins, then the lowest; the others renumber, saying why", () => {
    const plan = planAdoption(
      entries({
        a: { web: "240.0.0.9" },
        b: { web: "240.0.0.9" },
        c: { web: "240.0.0.1", db: "240.0.0.5" },
        d: { db: "240.0.0.4" },
      }),
      empty,
      { pool, renumberOutside: false },
    );
    expect(summary(plan)).toEqual([
      "a/web adopt 240.0.0.9",
      "b/web adopt 240.0.0.9",
      "c/web renumber different-vips 240.0.0.9",
      "c/db renumber different-vips 240.0.0.4",
      "d/db adopt 240.0.0.4",
    ]);
    expect(plan.decisions[2]?.reason).toBe(
      "mesh c renumbers web from 240.0.0.1 to 240.0.0.9: the VIP of web in more meshes (2 to 1)",
    );
    expect(plan.decisions[3]?.reason).toContain("the lowest of its VIPs in as many meshes");
  });

  it("one VIP for two services: the one with it in more meshes keeps it, the other gets a fresh VIP", () => {
    // Kuma's own tag-first golden file gives demo-app and httpbin the same 240.0.0.2.
    const text =
      '{"v":{"demo-app_kuma-demo_svc_5000":{"oe":[{"ap":[{"a":"240.0.0.2","o":"svc"}]}]},"httpbin":{"oe":[{"ap":[{"a":"240.0.0.2","p":443,"o":"svc"}]}]}}}';
    const plan = planAdoption(parseAdoptFile(text, "tf.json", "default").entries, empty, {
      pool,
      renumberOutside: false,
    });
    expect(summary(plan)).toEqual([
      "default/demo-app_kuma-demo_svc_5000 adopt 240.0.0.2",
      "default/httpbin renumber shared-vip -",
    ]);
    expect(plan.decisions[1]?.reason).toBe(
      "mesh default renumbers httpbin from 240.0.0.2 to a fresh VIP from the range: 240.0.0.2 is also demo-app_kuma-demo_svc_5000's and demo-app_kuma-demo_svc_5000 has it in as many meshes and sorts first",
    );
  });

  it("a VIP outside VIP_CIDR refuses the adoption, unless --renumber-outside", () => {
    const file = entries({ a: { web: "10.0.0.1", api: "240.0.0.2" } });
    const refused = planAdoption(file, empty, { pool, renumberOutside: false });
    expect(refused.refused).toBe(true);
    expect(summary(refused)[0]).toBe("a/web refuse outside-range -");
    expect(refused.decisions[0]?.reason).toContain(
      "10.0.0.1 is outside VIP_CIDR 240.0.0.0/4: refused",
    );
    const renumbered = planAdoption(file, empty, { pool, renumberOutside: true });
    expect(renumbered.refused).toBe(false);
    expect(summary(renumbered)).toEqual([
      "a/web renumber outside-range -",
      "a/api adopt 240.0.0.2",
    ]);
  });

  it("the allocator's claims win: an address another service holds, a service already at another VIP", () => {
    const state = {
      services: new Map([
        ["api", "240.0.0.7"],
        ["other", "240.0.0.1"],
      ]),
      addresses: new Map([
        ["240.0.0.7", "api"],
        ["240.0.0.1", "other"],
      ]),
    };
    const plan = planAdoption(entries({ a: { web: "240.0.0.1", api: "240.0.0.2" } }), state, {
      pool,
      renumberOutside: false,
    });
    expect(summary(plan)).toEqual([
      "a/web renumber address-claimed -",
      "a/api renumber service-claimed 240.0.0.7",
    ]);
    expect(plan.decisions[0]?.with).toBe("other");
    expect(plan.claims.size).toBe(0);
    expect(alreadyAdopted(plan)).toBe(false);
  });

  it("hosts are adopted as the allocator keeps them (host/<host>); FQDNs and Kubernetes hosts are reported, never adopted; a second run is in place", () => {
    const file = parseAdoptFile(
      '{"0:web":"240.0.0.1","1:Host.com.":"240.0.1.4","2:web.mesh":"240.0.0.5","1:10.96.0.1":{"address":"10.96.0.1","outbounds":[{"Port":80,"TagSet":{"kuma.io/service":"web"},"Origin":"kubernetes"}]}}',
      "f",
      "m",
    ).entries;
    const first = planAdoption(file, empty, { pool, renumberOutside: false });
    expect(summary(first)).toEqual([
      "m/web adopt 240.0.0.1",
      "m/Host.com. adopt 240.0.1.4",
      "m/web.mesh skip -",
      "m/10.96.0.1 skip -",
    ]);
    expect([...first.claims]).toEqual([
      ["host/host.com", "240.0.1.4"],
      ["web", "240.0.0.1"],
    ]);
    expect(first.decisions[3]?.reason).toBe(
      "host entry not adopted: a Kubernetes Service or pod address (not a VIP of the range)",
    );
    const second = planAdoption(
      file,
      {
        services: new Map([
          ["web", "240.0.0.1"],
          ["host/host.com", "240.0.1.4"],
        ]),
        addresses: new Map([
          ["240.0.0.1", "web"],
          ["240.0.1.4", "host/host.com"],
        ]),
      },
      { pool, renumberOutside: false },
    );
    expect(summary(second).slice(0, 2)).toEqual([
      "m/web in-place 240.0.0.1",
      "m/Host.com. in-place 240.0.1.4",
    ]);
    expect(alreadyAdopted(second)).toBe(true);
  });

  it("names a host in its reasons as host <name>", () => {
    const file = parseAdoptFile('{"1:api.example.com":"240.0.1.4"}', "f", "m").entries;
    const state = {
      services: new Map([["host/api.example.com", "240.0.0.9"]]),
      addresses: new Map(),
    };
    const plan = planAdoption(file, state, { pool, renumberOutside: false });
    expect(plan.decisions[0]?.reason).toBe(
      "mesh m renumbers host api.example.com from 240.0.1.4 to 240.0.0.9: the allocator already gives it 240.0.0.9",
    );
  });
});
