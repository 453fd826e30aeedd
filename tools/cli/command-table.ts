/**
 * The CLI's commands: the words that name each, its arguments, its options and what it runs.
 * `main.ts` parses a command line against this list and prints it as `--help`; the command
 * table of `docs/contract.md` is checked against it (test/unit/docs-tables.test.ts).
 */
import type { AllocatorConfig } from "../../functions/allocator/config.ts";
import { adoptCommand } from "./commands/adopt.ts";
import { type DnsFlags, dnsCommand, resolveCommand } from "./commands/dns.ts";
import { drainCommand } from "./commands/drain.ts";
import { exportCommand } from "./commands/export.ts";
import { failuresCommand } from "./commands/failures.ts";
import { indexCheckCommand, indexRebuildCommand } from "./commands/index.ts";
import {
  dataplaneDeleteCommand,
  dataplanePutCommand,
  externalServiceDeleteCommand,
  externalServicePutCommand,
  meshDeleteCommand,
  meshPutCommand,
} from "./commands/items.ts";
import { reconcileCommand } from "./commands/reconcile.ts";
import { tablesCreateCommand } from "./commands/tables.ts";
import { getCommand, listCommand } from "./commands/vips.ts";
import { watchCommand } from "./commands/watch.ts";
import type { CliContext } from "./context.ts";
import { type ExitCode, UsageError } from "./errors.ts";

export interface CommandSpec {
  /** The words that name the command, e.g. ["mesh", "put"]. */
  readonly words: readonly string[];
  /** Names of its positional arguments, for the usage line. */
  readonly args: readonly string[];
  readonly summary: string;
  readonly once?: boolean;
  /** Takes `--mesh M`. */
  readonly mesh?: boolean;
  /** Takes any number of positional arguments (named by `args`, e.g. ["[MESH ...|--all]"]). */
  readonly variadic?: boolean;
  /** The other options it takes (e.g. "all", "dry-run", the DNS options). */
  readonly flags?: readonly (keyof Flags)[];
  readonly run: (
    ctx: CliContext,
    args: readonly string[],
    config: () => AllocatorConfig,
    mesh: string | undefined,
    flags: Flags,
  ) => Promise<ExitCode>;
}

/** Options that only some commands take. */
export interface Flags extends DnsFlags {
  readonly all?: boolean;
  readonly "dry-run"?: boolean;
  readonly "queue-url"?: string;
  readonly redrive?: boolean;
  readonly "renumber-outside"?: boolean;
  readonly format?: string;
  readonly "function-timeout"?: string;
}

/** How each option shows in a command's usage line ("" = named by the arguments already). */
export const FLAG_USAGE: Record<keyof Flags, string> = {
  all: "",
  "dry-run": "[--dry-run]",
  "queue-url": "[--queue-url URL]",
  redrive: "[--redrive]",
  "renumber-outside": "[--renumber-outside]",
  format: "[--format kuma|json]",
  port: "[--port 5353]",
  host: "[--host 127.0.0.1]",
  domain: "[--domain mesh]",
  ttl: "[--ttl 30]",
  interval: "[--interval 5]",
  force: "[--force]",
  "function-timeout": "[--function-timeout SECONDS]",
};

export const COMMANDS: readonly CommandSpec[] = [
  {
    words: ["tables", "create"],
    args: [],
    summary: "create every table (with streams) as the CDK stack defines them; idempotent",
    run: (ctx) => tablesCreateCommand(ctx),
  },
  {
    words: ["drain"],
    args: [],
    summary: "process every stream record written so far through the handler, then exit",
    flags: ["function-timeout"],
    run: (ctx, _args, config, _mesh, flags) =>
      drainCommand(ctx, config(), flags["function-timeout"]),
  },
  {
    words: ["get"],
    args: ["MESH"],
    summary: "print a mesh's VIP item as JSON",
    run: (ctx, [mesh]) => getCommand(ctx, mesh as string),
  },
  {
    words: ["list"],
    args: [],
    summary: "meshes with service count, version, unallocated count and pool use",
    run: (ctx, _args, config) => listCommand(ctx, config().pool),
  },
  {
    words: ["mesh", "put"],
    args: ["NAME"],
    summary: "create (or rewrite) a mesh",
    run: (ctx, [name]) => meshPutCommand(ctx, name as string),
  },
  {
    words: ["mesh", "delete"],
    args: ["NAME"],
    summary: "delete a mesh (its VIP item goes at the next drain)",
    run: (ctx, [name]) => meshDeleteCommand(ctx, name as string),
  },
  {
    words: ["dataplane", "put"],
    args: ["FILE"],
    summary: "store the Kuma Dataplane(s) of a YAML or JSON file (- = stdin)",
    // npm runs scripts from the project root; INIT_CWD is where the user typed the command.
    run: (ctx, [file]) =>
      dataplanePutCommand(ctx, file as string, ctx.env.INIT_CWD ?? process.cwd()),
  },
  {
    words: ["dataplane", "delete"],
    args: ["MESH", "NAME"],
    summary: "delete a dataplane",
    run: (ctx, [mesh, name]) => dataplaneDeleteCommand(ctx, mesh as string, name as string),
  },
  {
    words: ["external-service", "put"],
    args: ["FILE"],
    summary: "store the Kuma ExternalService(s) of a YAML or JSON file (- = stdin)",
    run: (ctx, [file]) =>
      externalServicePutCommand(ctx, file as string, ctx.env.INIT_CWD ?? process.cwd()),
  },
  {
    words: ["external-service", "delete"],
    args: ["MESH", "NAME"],
    summary: "delete an external service",
    run: (ctx, [mesh, name]) => externalServiceDeleteCommand(ctx, mesh as string, name as string),
  },
  {
    words: ["watch"],
    args: [],
    summary: "poll the streams continuously and print each mesh's VIP changes (Ctrl-C stops)",
    run: (ctx, _args, config) => watchCommand(ctx, config()),
  },
  {
    words: ["index", "rebuild"],
    args: [],
    mesh: true,
    summary: "derive the membership index from the dataplanes table (paged, idempotent)",
    run: (ctx, _args, _config, mesh) => indexRebuildCommand(ctx, mesh),
  },
  {
    words: ["index", "check"],
    args: [],
    mesh: true,
    summary: "compare each mesh's index and VIP item with a full recompute; exit 1 if any differ",
    run: (ctx, _args, _config, mesh) => indexCheckCommand(ctx, mesh),
  },
  {
    words: ["reconcile"],
    args: ["[MESH ...|--all]"],
    variadic: true,
    flags: ["all", "dry-run"],
    summary:
      "repair sweep now: index, items and claims of the meshes (--dry-run: only report; exit 1 if any)",
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
    summary:
      "make another allocator's VIPs (Kuma's kuma-<mesh>-dns-vips, or a { mesh: { service: vip } } map) this allocator's state, then pass those meshes (--dry-run: only the plan; exit 1 unless already adopted)",
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
        cwd: ctx.env.INIT_CWD ?? process.cwd(),
      });
    },
  },
  {
    words: ["export"],
    args: [],
    flags: ["format"],
    summary:
      "print every mesh's VIPs: Kuma ConfigMaps in the origin shape (--format kuma) or a { mesh: { service: vip } } map (json, the default)",
    run: (ctx, _args, _config, _mesh, flags) => exportCommand(ctx, flags.format),
  },
  {
    words: ["failures"],
    args: [],
    flags: ["queue-url", "redrive"],
    summary:
      "list the failure destination's entries and the meshes they affect (--redrive: reconcile them, then remove them)",
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
    summary: "serve A/AAAA/PTR for the VIPs over UDP and TCP from a snapshot (Ctrl-C stops)",
    run: (ctx, _args, config, _mesh, flags) => dnsCommand(ctx, config(), flags),
  },
  {
    words: ["resolve"],
    args: ["NAME"],
    flags: ["domain", "ttl"],
    summary: "what the DNS responder would answer for NAME (a name or a VIP); exit 1 if none",
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
    run: () => Promise.reject(new Error("demo runs before a context exists")),
  },
];

export const usageOf = (spec: CommandSpec): string =>
  [
    "vips",
    ...spec.words,
    ...spec.args,
    ...(spec.once ? ["[--once]"] : []),
    ...(spec.mesh ? ["[--mesh M]"] : []),
    ...(spec.flags ?? []).map((flag) => FLAG_USAGE[flag]),
  ]
    .filter((word) => word !== "")
    .join(" ");
