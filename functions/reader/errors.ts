/**
 * How the reader fails. Every DynamoDB error of a refresh surfaces as one {@link VipReaderError}
 * whose `code` says what happened and `retryable` whether trying again later can help; the
 * SDK's error is its `cause`. A refresh that fails leaves the snapshot as it was.
 */
export type VipReaderErrorCode =
  /** The vips table does not exist (wrong name, wrong region or account). */
  | "TABLE_NOT_FOUND"
  /** The caller may not read the table (IAM: grant with `allocator.grantReadVips`; docs/readers.md). */
  | "ACCESS_DENIED"
  /** DynamoDB throttled the reads; the SDK's own retries ran out. */
  | "THROTTLED"
  /** Any other DynamoDB or network failure. */
  | "DYNAMODB_ERROR"
  /** A stream image or item that is not a VIP item (only thrown by the pure decoders). */
  | "MALFORMED_ITEM"
  /** `watch`'s onChange callback threw (reported to onError; watching goes on). */
  | "LISTENER_ERROR"
  /** The reader's options contradict each other or name a bad value (thrown by the constructor). */
  | "INVALID_OPTIONS";

const RETRYABLE: ReadonlySet<VipReaderErrorCode> = new Set(["THROTTLED", "DYNAMODB_ERROR"]);

export class VipReaderError extends Error {
  readonly retryable: boolean;

  constructor(
    readonly code: VipReaderErrorCode,
    message: string,
    options: { cause?: unknown } = {},
  ) {
    super(message, options);
    this.name = "VipReaderError";
    this.retryable = RETRYABLE.has(code);
  }
}

const THROTTLING = new Set([
  "ProvisionedThroughputExceededException",
  "ThrottlingException",
  "RequestLimitExceeded",
  "LimitExceededException",
]);

/** Maps an SDK error of a read on `table` to a {@link VipReaderError}. */
export function readerErrorOf(error: unknown, table: string, operation: string): VipReaderError {
  if (error instanceof VipReaderError) return error;
  const name = error instanceof Error ? error.name : "Error";
  const detail = error instanceof Error ? error.message : String(error);
  const code: VipReaderErrorCode =
    name === "ResourceNotFoundException"
      ? "TABLE_NOT_FOUND"
      : name === "AccessDeniedException" || name === "UnrecognizedClientException"
        ? "ACCESS_DENIED"
        : THROTTLING.has(name)
          ? "THROTTLED"
          : "DYNAMODB_ERROR";
  return new VipReaderError(code, `${operation} on table ${table}: ${name}: ${detail}`, {
    cause: error,
  });
}
