/**
 * The CLI's commands. `main.ts` parses a command line against this list and prints it as
 * `--help`; the command tables of `docs/local.md` and `docs/contract.md` are checked against it
 * (test/unit/docs-tables.test.ts).
 */

import type { CommandSpec } from "./command-spec.ts";
import { adoptCommand } from "./commands/adopt.ts";
import { applyCommand } from "./commands/apply.ts";
import { dnsCommand, resolveCommand } from "./commands/dns.ts";
import { drainCommand } from "./commands/drain.ts";
import { exportCommand } from "./commands/export.ts";
import { failuresCommand } from "./commands/failures.ts";
import { indexCheckCommand, indexRebuildCommand } from "./commands/index.ts";
import { getQuarantine, inspectMesh } from "./commands/inspect.ts";
import { meshPutCommand } from "./commands/items.ts";
import { reconcileCommand } from "./commands/reconcile.ts";
import { deleteResource, getInputs, getMeshes, getVips } from "./commands/resources.ts";
import { tablesCreateCommand } from "./commands/tables.ts";
import { listCommand } from "./commands/vips.ts";
import { watchCommand } from "./commands/watch.ts";
import { UsageError } from "./errors.ts";

export { type CommandSpec, FLAG_USAGE, type Flags, usageOf } from "./command-spec.ts";

/** Where the user typed the command: npm runs scripts from the project root, INIT_CWD says. */
const userDir = (env: Record<string, string | undefined>): string => env.INIT_CWD ?? process.cwd();

/** kumactl's commands over the input tables and the VIP items. */
const RESOURCE_COMMANDS: readonly CommandSpec[] = [
  {
    words: ["apply"],
    args: [],
    flags: ["file", "dry-run"],
    summary:
      "store the Kuma resources (Mesh, Dataplane, ExternalService) of a YAML or JSON file, each in its table; refuses the whole file if any resource breaks the allocator's rules",
    examples: ["vips apply -f mesh.yaml", "kubectl get dataplanes -A -o yaml | vips apply -f -"],
    run: (ctx, _args, _config, _mesh, flags) => {
      if (flags.file === undefined) throw new UsageError("apply needs -f FILE (or -f - for stdin)");
      return applyCommand(ctx, {
        file: flags.file,
        baseDir: userDir(ctx.env),
        dryRun: flags["dry-run"] === true,
      });
    },
  },
  {
    words: ["get", "meshes"],
    aliases: [["get", "mesh"]],
    args: ["[NAME]"],
    flags: ["output"],
    summary: "the meshes, with what each one's VIP item holds",
    examples: ["vips get meshes", "vips get mesh shop -o yaml"],
    run: (ctx, [name]) => getMeshes(ctx, name),
  },
  {
    words: ["get", "dataplanes"],
    aliases: [["get", "dataplane"]],
    args: ["[NAME]"],
    mesh: true,
    flags: ["output"],
    summary: "the dataplanes, with the services each gives a VIP and what the allocator skips",
    examples: ["vips get dataplanes --mesh shop", "vips get dataplane web-1 --mesh shop -o json"],
    run: (ctx, [name], _config, mesh) => getInputs(ctx, "Dataplane", name, mesh),
  },
  {
    words: ["get", "external-services"],
    aliases: [["get", "external-service"]],
    args: ["[NAME]"],
    mesh: true,
    flags: ["output"],
    summary: "the external services, with the service and host each gives a VIP",
    examples: ["vips get external-services", "vips get external-service httpbin --mesh default"],
    run: (ctx, [name], _config, mesh) => getInputs(ctx, "ExternalService", name, mesh),
  },
  {
    words: ["get", "vips"],
    aliases: [["get", "vip"]],
    args: ["[MESH]"],
    flags: ["output"],
    summary: "the VIP items: every mesh's counts, or one mesh's services and hosts with their VIPs",
    examples: ["vips get vips", "vips get vips shop -o yaml"],
    run: (ctx, [mesh]) => getVips(ctx, mesh),
  },
  {
    words: ["get", "quarantine"],
    args: [],
    flags: ["output"],
    settings: true,
    summary:
      "each address held for a service that left (or moved), its former owner, and when it frees",
    examples: ["vips get quarantine", "vips get quarantine -o json"],
    run: (ctx, _args, config) => getQuarantine(ctx, config().quarantineSeconds),
  },
  {
    words: ["inspect", "mesh"],
    args: ["NAME"],
    flags: ["output"],
    summary:
      "a mesh as the allocator holds it: services and hosts with VIPs, names without one and why, leaving services, waiting, version, incarnation, last range",
    examples: ["vips inspect mesh shop", "vips inspect mesh shop -o yaml"],
    run: (ctx, [name]) => inspectMesh(ctx, name as string),
  },
  {
    words: ["delete", "mesh"],
    args: ["NAME"],
    summary:
      "delete a mesh (its VIP item goes at the allocator's next pass); exit 1 if there is none",
    examples: ["vips delete mesh shop"],
    run: (ctx, [name]) => deleteResource(ctx, "Mesh", name as string, undefined),
  },
  {
    words: ["delete", "dataplane"],
    args: ["NAME"],
    mesh: true,
    summary: "delete a dataplane; exit 1 if there is none",
    examples: ["vips delete dataplane web-1 --mesh shop"],
    run: (ctx, [name], _config, mesh) => deleteResource(ctx, "Dataplane", name as string, mesh),
  },
  {
    words: ["delete", "external-service"],
    args: ["NAME"],
    mesh: true,
    summary: "delete an external service; exit 1 if there is none",
    examples: ["vips delete external-service httpbin --mesh default"],
    run: (ctx, [name], _config, mesh) =>
      deleteResource(ctx, "ExternalService", name as string, mesh),
  },
];

/** The first commands, kept: one resource type each. */
const PUT_COMMANDS: readonly CommandSpec[] = [
  {
    words: ["mesh", "put"],
    args: ["NAME"],
    summary: "create (or rewrite) a mesh",
    examples: ["vips mesh put shop"],
    run: (ctx, [name]) => meshPutCommand(ctx, name as string),
  },
  {
    words: ["mesh", "delete"],
    args: ["NAME"],
    summary: "delete a mesh, as delete mesh does",
    examples: ["vips mesh delete shop"],
    run: (ctx, [name]) => deleteResource(ctx, "Mesh", name as string, undefined),
  },
  {
    words: ["dataplane", "put"],
    args: ["FILE"],
    summary: "store the Kuma Dataplane(s) of a YAML or JSON file (- = stdin), as apply does",
    examples: ["vips dataplane put web.yaml"],
    run: (ctx, [file]) =>
      applyCommand(ctx, {
        file: file as string,
        baseDir: userDir(ctx.env),
        dryRun: false,
        only: "Dataplane",
      }),
  },
  {
    words: ["dataplane", "delete"],
    args: ["MESH", "NAME"],
    summary: "delete a dataplane, as delete dataplane does",
    examples: ["vips dataplane delete shop web-1"],
    run: (ctx, [mesh, name]) => deleteResource(ctx, "Dataplane", name as string, mesh),
  },
  {
    words: ["external-service", "put"],
    args: ["FILE"],
    summary: "store the Kuma ExternalService(s) of a YAML or JSON file (- = stdin), as apply does",
    examples: ["vips external-service put httpbin.yaml"],
    run: (ctx, [file]) =>
      applyCommand(ctx, {
        file: file as string,
        baseDir: userDir(ctx.env),
        dryRun: false,
        only: "ExternalService",
      }),
  },
  {
    words: ["external-service", "delete"],
    args: ["MESH", "NAME"],
    summary: "delete an external service, as delete external-service does",
    examples: ["vips external-service delete default httpbin"],
    run: (ctx, [mesh, name]) => deleteResource(ctx, "ExternalService", name as string, mesh),
  },
];

export const COMMANDS: readonly CommandSpec[] = [
  ...RESOURCE_COMMANDS,
  {
    words: ["tables", "create"],
    args: [],
    summary: "create every table (with streams) as the CDK stack defines them; idempotent",
    examples: ["vips tables create --endpoint http://127.0.0.1:8000"],
    run: (ctx) => tablesCreateCommand(ctx),
  },
  {
    words: ["drain"],
    args: [],
    settings: true,
    flags: ["function-timeout"],
    summary: "process every stream record written so far through the handler, then exit",
    examples: [
      "vips drain --endpoint http://127.0.0.1:8000",
      "vips drain --endpoint http://127.0.0.1:8000 --function-timeout 60",
    ],
    run: (ctx, _args, config, _mesh, flags) =>
      drainCommand(ctx, config(), flags["function-timeout"]),
  },
  {
    words: ["watch"],
    args: [],
    settings: true,
    summary:
      "poll the streams and print each mesh's VIP changes, services and hosts, against the item's previous version (Ctrl-C stops)",
    examples: ["vips watch --endpoint http://127.0.0.1:8000"],
    run: (ctx, _args, config) => watchCommand(ctx, config()),
  },
  {
    words: ["list"],
    args: [],
    summary:
      "meshes with service count, version, unallocated count and use of the range each item records",
    examples: ["vips list", "vips list --json"],
    run: (ctx) => listCommand(ctx),
  },
  ...PUT_COMMANDS,
  {
    words: ["index", "rebuild"],
    args: [],
    mesh: true,
    summary: "derive the membership index from the dataplanes table (paged, idempotent)",
    examples: ["vips index rebuild", "vips index rebuild --mesh shop"],
    run: (ctx, _args, _config, mesh) => indexRebuildCommand(ctx, mesh),
  },
  {
    words: ["index", "check"],
    args: [],
    mesh: true,
    summary: "compare each mesh's index and VIP item with a full recompute; exit 1 if any differ",
    examples: ["vips index check --mesh shop"],
    run: (ctx, _args, _config, mesh) => indexCheckCommand(ctx, mesh),
  },
  {
    words: ["reconcile"],
    args: ["[MESH ...|--all]"],
    variadic: true,
    flags: ["all", "dry-run"],
    settings: true,
    summary:
      "repair sweep now: index, items and claims of the meshes; exit 1 if services are left without a VIP (--dry-run: only report; exit 1 if anything would be corrected)",
    examples: ["vips reconcile shop", "vips reconcile --all --dry-run"],
    run: (ctx, meshes, config, _mesh, flags) => {
      if (flags.all === true && meshes.length > 0) {
        throw new UsageError("reconcile takes MESH names or --all, not both");
      }
      if (flags.all !== true && meshes.length === 0) {
        throw new UsageError(
          "reconcile needs MESH names or --all (usage: vips reconcile [MESH ...|--all] [--dry-run])",
        );
      }
      return reconcileCommand(ctx, config(), {
        meshes: flags.all === true ? undefined : meshes,
        dryRun: flags["dry-run"] === true,
      });
    },
  },
  {
    words: ["adopt"],
    args: ["FILE ..."],
    variadic: true,
    mesh: true,
    flags: ["dry-run", "renumber-outside"],
    settings: true,
    summary:
      "make another allocator's VIPs (Kuma's kuma-<mesh>-dns-vips, or a { mesh: { service: vip } } map), services and hosts, this allocator's state, then pass those meshes (--dry-run: only the plan; exit 1 unless already adopted)",
    examples: [
      "kubectl get configmaps -n kuma-system -o yaml > vips.yaml && vips adopt vips.yaml --dry-run",
    ],
    run: (ctx, files, config, mesh, flags) => {
      if (files.length === 0) {
        throw new UsageError(
          "adopt needs FILE names (usage: vips adopt FILE ... [--mesh M] [--dry-run] [--renumber-outside])",
        );
      }
      return adoptCommand(ctx, config(), {
        files,
        mesh,
        dryRun: flags["dry-run"] === true,
        renumberOutside: flags["renumber-outside"] === true,
        cwd: userDir(ctx.env),
      });
    },
  },
  {
    words: ["export"],
    args: [],
    flags: ["format"],
    summary:
      "print every mesh's VIPs: Kuma ConfigMaps as current Kuma reads them, with hosts (--format kuma), in Kuma's 2020 shape (kuma-origin), or a { mesh: { service: vip } } map (json, the default)",
    examples: ["vips export --format kuma | kubectl apply -f -"],
    run: (ctx, _args, _config, _mesh, flags) => exportCommand(ctx, flags.format),
  },
  {
    words: ["failures"],
    args: [],
    flags: ["queue-url", "redrive"],
    settings: true,
    summary:
      "list the failure destination's entries and the meshes they affect (--redrive: reconcile them, then remove them)",
    examples: [
      "vips failures --queue-url https://sqs.eu-west-1.amazonaws.com/123456789012/vips-failures",
    ],
    run: (ctx, _args, config, _mesh, flags) =>
      failuresCommand(ctx, config(), {
        queueUrl: flags["queue-url"],
        redrive: flags.redrive === true,
      }),
  },
  {
    words: ["dns"],
    args: [],
    flags: ["port", "host", "domain", "ttl", "interval", "force"],
    settings: true,
    summary: "serve A/AAAA/PTR for the VIPs over UDP and TCP from a snapshot (Ctrl-C stops)",
    examples: ["vips dns --port 5353 --domain mesh"],
    run: (ctx, _args, config, _mesh, flags) => dnsCommand(ctx, config(), flags),
  },
  {
    words: ["resolve"],
    args: ["NAME"],
    flags: ["domain", "ttl"],
    settings: true,
    summary: "what the DNS responder would answer for NAME (a name or a VIP); exit 1 if none",
    examples: ["vips resolve checkout.mesh", "vips resolve 240.0.0.1"],
    run: (ctx, [name], config, _mesh, flags) =>
      resolveCommand(ctx, config(), name as string, flags),
  },
  {
    words: ["demo"],
    args: [],
    once: true,
    flags: ["function-timeout"],
    summary:
      "start a local DynamoDB (VIPS_EMULATOR, unless --endpoint), seed a demo, drain it, print a summary, then watch",
    examples: ["vips demo --once"],
    run: () => Promise.reject(new Error("demo runs before a context exists")),
  },
];
