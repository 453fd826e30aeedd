import type { SelfInvoker } from "./handover.ts";

/** The part of Lambda's context the allocator uses. */
export interface InvocationContext {
  /** How long the invocation may still run (Lambda's timeout, counted down). */
  getRemainingTimeInMillis(): number;
  /** The function's ARN as invoked: a continuation invokes the same (decision 160). */
  readonly invokedFunctionArn?: string;
}

/** How an invocation with this context starts a continuation (undefined: it cannot). */
export type InvokerFor = (context: InvocationContext) => SelfInvoker | undefined;
