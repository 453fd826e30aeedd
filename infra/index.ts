/**
 * The construct library (`serverless-vip-allocator/cdk`): the {@link VipAllocator} construct,
 * its props, and the stack this repository deploys. Compiled into the package by
 * `npm run build`; the function code it deploys is prebuilt (dist/lambda/), so a consumer's
 * synth needs neither esbuild nor Docker (decision 082). docs/deploy.md.
 */
export {
  type ExistingInputTable,
  READER_INDEX_ACTIONS,
  READER_TABLE_ACTIONS,
  VIP_ALLOCATOR_DEFAULTS,
  VipAllocator,
  type VipAllocatorAlarms,
  VipAllocatorPropError,
  type VipAllocatorProps,
  type VipAllocatorTableNames,
  type VipsGrantOptions,
} from "./vip-allocator.ts";
export {
  CONTEXT_KEYS,
  VipAllocatorStack,
  type VipAllocatorStackProps,
  vipAllocatorPropsFromContext,
} from "./vip-allocator-stack.ts";
