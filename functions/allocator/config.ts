import { InvalidConfigError } from "../domain/errors.ts";
import { VipPool } from "../domain/pool.ts";
import { resolveTableNames, type TableNames } from "../store/table-definitions.ts";
import { inFlightGraceSeconds } from "./event-source-settings.ts";

/** Names and defaults of every setting; CDK sets the function's environment from these. */
export const SETTINGS = {
  cidr: { envVar: "VIP_CIDR", default: "240.0.0.0/4" },
  quarantineSeconds: { envVar: "VIP_QUARANTINE_SECONDS", default: "3600" },
  endpoint: { envVar: "DYNAMODB_ENDPOINT" },
  maxWriteAttempts: { envVar: "VIP_MAX_WRITE_ATTEMPTS", default: "6" },
  /** The repair sweep's second look at drift (decision 071); the construct derives it. */
  sweepGraceSeconds: { envVar: "SWEEP_GRACE_SECONDS", default: String(inFlightGraceSeconds()) },
} as const;

export interface AllocatorConfig {
  readonly pool: VipPool;
  readonly quarantineSeconds: number;
  readonly tables: TableNames;
  /** Set only for local emulators; unset means real AWS. */
  readonly endpoint: string | undefined;
  /** Read -> compute -> conditional write attempts per mesh before giving up. */
  readonly maxWriteAttempts: number;
  /**
   * The scheduled sweep looks again, after this long, at drift it found before it corrects and
   * counts it: drift the event path corrects meanwhile was in flight, not a fault. 0: at once.
   */
  readonly sweepGraceSeconds: number;
}

type Env = Readonly<Record<string, string | undefined>>;

function readInteger(env: Env, envVar: string, fallback: string, min: number, max: number): number {
  const raw = env[envVar];
  const text = raw === undefined || raw.trim() === "" ? fallback : raw.trim();
  if (!/^\d+$/.test(text)) {
    throw new InvalidConfigError(envVar, raw, `expected a whole number from ${min} to ${max}`);
  }
  const value = Number(text);
  if (!Number.isSafeInteger(value) || value < min || value > max) {
    throw new InvalidConfigError(envVar, raw, `expected a whole number from ${min} to ${max}`);
  }
  return value;
}

/**
 * The only reader of the allocator's own settings in `process.env` (Powertools reads its own
 * variables, docs/contract.md#configuration). Throws {@link InvalidConfigError} (or
 * `InvalidCidrError`) naming the bad value, so a misconfigured function fails at cold start
 * instead of writing wrong VIPs.
 */
export function loadConfig(env: Env = process.env): AllocatorConfig {
  const cidrText = env[SETTINGS.cidr.envVar]?.trim() || SETTINGS.cidr.default;
  const pool = VipPool.parse(cidrText);
  const quarantineSeconds = readInteger(
    env,
    SETTINGS.quarantineSeconds.envVar,
    SETTINGS.quarantineSeconds.default,
    0,
    366 * 24 * 3600,
  );
  const maxWriteAttempts = readInteger(
    env,
    SETTINGS.maxWriteAttempts.envVar,
    SETTINGS.maxWriteAttempts.default,
    1,
    50,
  );
  const endpoint = env[SETTINGS.endpoint.envVar]?.trim() || undefined;
  if (endpoint !== undefined && !/^https?:\/\/[^\s]+$/.test(endpoint)) {
    throw new InvalidConfigError(SETTINGS.endpoint.envVar, endpoint, "expected an http(s) URL");
  }
  const sweepGraceSeconds = readInteger(
    env,
    SETTINGS.sweepGraceSeconds.envVar,
    SETTINGS.sweepGraceSeconds.default,
    0,
    600,
  );
  return {
    pool,
    quarantineSeconds,
    tables: resolveTableNames(env),
    endpoint,
    maxWriteAttempts,
    sweepGraceSeconds,
  };
}
