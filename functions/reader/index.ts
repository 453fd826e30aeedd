/**
 * The reader package for downstream services (`serverless-vip-allocator/reader`): the
 * {@link VipReader} snapshot, the pure diff functions (also for `vips` stream records), the
 * DNS name table and responder, and `serveDns` (a responder fed by a reader, with the TTL rule).
 * See docs/readers.md.
 */
export {
  diffMesh,
  diffSnapshots,
  diffStreamRecord,
  isEmptyDiff,
  type MeshDiff,
  type SnapshotDiff,
  summarizeDiff,
  type VipChange,
  type VipEntry,
  type VipStreamRecord,
} from "./diff.ts";
export {
  addressOfReverseName,
  type DnsAnswer,
  type DnsStatus,
  dnsName,
  kumaVariant,
  type NameCollision,
  NameTable,
  type NameTableOptions,
  normalizeDomain,
  type Resolution,
  reverseName,
} from "./dns-names.ts";
export {
  type AnswerOptions,
  answerQuery,
  DnsResponder,
  type DnsResponderOptions,
} from "./dns-responder.ts";
export { VipReaderError, type VipReaderErrorCode } from "./errors.ts";
export {
  checkDnsTtl,
  type DnsServer,
  DnsTtlError,
  type ServeDnsOptions,
  serveDns,
} from "./serve-dns.ts";
export {
  canonicalVip,
  type HostLookup,
  type MalformedItem,
  type MeshView,
  meshViewOf,
  type ReverseLookup,
  type ServiceLookup,
  VipSnapshot,
} from "./snapshot.ts";
export {
  type ProbeFallback,
  type RefreshStats,
  VipReader,
  type VipReaderOptions,
  type WatchHandle,
  type WatchOptions,
} from "./vip-reader.ts";
