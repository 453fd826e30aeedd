/**
 * One error family for the allocator's domain and stores. Every error has a literal `code` so
 * callers (the batch step, the CLI) decide without string matching, says whether a retry can
 * help (`retryable`), keeps what caused it (`cause`), and carries the data for a useful log line.
 */
export type AllocatorErrorCode =
  | "INVALID_CIDR"
  | "INVALID_CONFIG"
  | "VERSION_CONFLICT"
  | "RETRIES_EXHAUSTED"
  | "ITEM_TOO_LARGE";

export abstract class AllocatorError extends Error {
  abstract readonly code: AllocatorErrorCode;
  /** Whether delivering the same records again can succeed. */
  abstract readonly retryable: boolean;
}

export class InvalidCidrError extends AllocatorError {
  readonly code = "INVALID_CIDR";
  readonly retryable = false;
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
  readonly retryable = false;
  constructor(
    readonly setting: string,
    readonly value: string | undefined,
    readonly reason: string,
  ) {
    super(`invalid ${setting}=${JSON.stringify(value)}: ${reason}`);
    this.name = "InvalidConfigError";
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

/** An optimistic-lock or claim condition failed: someone else wrote first. Retryable. */
export class VersionConflictError extends AllocatorError {
  readonly code = "VERSION_CONFLICT";
  readonly retryable = true;
  constructor(
    readonly what: string,
    readonly expected?: number,
  ) {
    super(`conditional write lost a race on ${what}`);
    this.name = "VersionConflictError";
  }
}

/** Every attempt lost a race; a later delivery, when the contention is over, succeeds. */
export class RetriesExhaustedError extends AllocatorError {
  readonly code = "RETRIES_EXHAUSTED";
  readonly retryable = true;
  constructor(
    readonly mesh: string,
    readonly attempts: number,
    readonly lastError: unknown,
  ) {
    super(
      `mesh ${mesh}: gave up after ${attempts} attempts: ${lastError instanceof Error ? lastError.message : String(lastError)}`,
      { cause: lastError },
    );
    this.name = "RetriesExhaustedError";
  }
}

/**
 * A mesh's VIP item cannot be encoded within DynamoDB's item limit, even compressed. Retrying
 * cannot help: the mesh keeps its last good item and the services that did not fit are
 * reported.
 */
export class VipItemTooLargeError extends AllocatorError {
  readonly code = "ITEM_TOO_LARGE";
  readonly retryable = false;
  constructor(
    readonly mesh: string,
    readonly bytes: number,
    readonly limit: number,
  ) {
    super(`VIP item of mesh ${mesh} needs ${bytes} bytes even compressed; the limit is ${limit}`);
    this.name = "VipItemTooLargeError";
  }
}

export function isAllocatorError(error: unknown): error is AllocatorError {
  return error instanceof AllocatorError;
}
