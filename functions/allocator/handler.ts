import { loadConfig } from "./config.ts";
import { createStreamHandler } from "./stream-handler.ts";

/**
 * Lambda entry for both stream event sources. Configuration is read and validated once, at
 * cold start: a bad VIP_CIDR or VIP_QUARANTINE_SECONDS fails the init with a message naming it.
 */
export const handler = createStreamHandler(loadConfig());
