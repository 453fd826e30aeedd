import type { DynamoDBBatchResponse, DynamoDBStreamEvent } from "aws-lambda";

/** What Lambda (or the local poller) calls with a batch of stream records from either table. */
export type StreamHandler = (event: DynamoDBStreamEvent) => Promise<DynamoDBBatchResponse>;
