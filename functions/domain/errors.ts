/**
 * One error family for the allocator. Every error has a literal `code` so callers (the
 * handler, the CLI) can decide retry / skip / report without string matching, and carries the
 * data needed to write a useful log line.
 */
export type AllocatorErrorCode =
  | "INVALID_CIDR"
  | "INVALID_CONFIG"
  | "POOL_EXHAUSTED"
  | "INVALID_INPUT"
  | "VERSION_CONFLICT"
  | "RETRIES_EXHAUSTED";

export abstract class AllocatorError extends Error {
  abstract readonly code: AllocatorErrorCode;
}

export class InvalidCidrError extends AllocatorError {
  readonly code = "INVALID_CIDR";
  constructor(
    readonly input: string,
    readonly reason: string,
  ) {
    super(`invalid VIP range ${JSON.stringify(input)}: ${reason}`);
    this.name = "InvalidCidrError";
  }
}

export class InvalidConfigError extends AllocatorError {
  readonly code = "INVALID_CONFIG";
  constructor(
    readonly setting: string,
    readonly value: string | undefined,
    readonly reason: string,
  ) {
    super(`invalid ${setting}=${JSON.stringify(value)}: ${reason}`);
    this.name = "InvalidConfigError";
  }
}

export class PoolExhaustedError extends AllocatorError {
  readonly code = "POOL_EXHAUSTED";
  constructor(
    readonly cidr: string,
    readonly size: bigint,
    readonly service: string,
  ) {
    super(`pool ${cidr} has ${size} addresses and none is free for service ${service}`);
    this.name = "PoolExhaustedError";
  }
}

/** Where a piece of bad input was found: enough to locate it in the table. */
export interface InputLocation {
  readonly table: string;
  readonly key: Readonly<Record<string, unknown>>;
}

/** A skipped piece of bad input; reported, never thrown through the batch. */
export interface InputIssue extends InputLocation {
  readonly field: string;
  readonly reason: string;
}

export class InvalidInputError extends AllocatorError {
  readonly code = "INVALID_INPUT";
  constructor(readonly issue: InputIssue) {
    super(
      `bad item in ${issue.table} ${JSON.stringify(issue.key)}: ${issue.field}: ${issue.reason}`,
    );
    this.name = "InvalidInputError";
  }
}

/** An optimistic-lock or claim condition failed: someone else wrote first. Retryable. */
export class VersionConflictError extends AllocatorError {
  readonly code = "VERSION_CONFLICT";
  constructor(
    readonly what: string,
    readonly expected?: number,
  ) {
    super(`conditional write lost a race on ${what}`);
    this.name = "VersionConflictError";
  }
}

export class RetriesExhaustedError extends AllocatorError {
  readonly code = "RETRIES_EXHAUSTED";
  constructor(
    readonly mesh: string,
    readonly attempts: number,
    readonly lastError: unknown,
  ) {
    super(
      `mesh ${mesh}: gave up after ${attempts} attempts: ${lastError instanceof Error ? lastError.message : String(lastError)}`,
    );
    this.name = "RetriesExhaustedError";
  }
}

export function isAllocatorError(error: unknown): error is AllocatorError {
  return error instanceof AllocatorError;
}
