/**
 * The one parser of DynamoDB stream ARNs
 * (`arn:PARTITION:dynamodb:REGION:ACCOUNT:table/NAME/stream/LABEL`), used by the allocator,
 * the local poller and the CDK construct.
 */
export interface StreamArn {
  /** NAME: the first `:table/NAME/stream/` in the text. */
  readonly tableName: string;
  /** What follows `/stream/`. */
  readonly label: string;
  /** What precedes `:table/` (`arn:PARTITION:dynamodb:REGION:ACCOUNT` in a real ARN). */
  readonly prefix: string;
  /**
   * The whole text is a stream ARN as AWS writes them: an `aws*` partition, a region, a
   * 12-digit account, a valid table name (3 to 255 of a-z A-Z 0-9 _ . -) and a label without
   * `/` or whitespace.
   */
  readonly wellFormed: boolean;
}

const PARTS = /^(.*?):table\/([^/]+)\/stream\/(.*)$/s;
const PREFIX = /^arn:aws[a-z-]*:dynamodb:[a-z0-9-]+:\d{12}$/;
const TABLE_NAME = /^[a-zA-Z0-9_.-]{3,255}$/;
const LABEL = /^[^/\s]+$/;

/** The parts of a stream ARN, or undefined when the text has no `:table/NAME/stream/`. */
export function parseStreamArn(arn: string | undefined): StreamArn | undefined {
  const match = arn === undefined ? null : PARTS.exec(arn);
  if (match === null) return undefined;
  const [, prefix = "", tableName = "", label = ""] = match;
  return {
    tableName,
    label,
    prefix,
    wellFormed: PREFIX.test(prefix) && TABLE_NAME.test(tableName) && LABEL.test(label),
  };
}
