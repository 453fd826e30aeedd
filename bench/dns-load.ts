/**
 * UDP load on a DNS responder (bench/reader.ts, part 2): the given names queried one per
 * worker at a time, `concurrency` workers; queries per second and latency percentiles.
 */
import { createSocket } from "node:dgram";
import dnsPacket from "dns-packet";

export interface LoadResult {
  readonly concurrency: number;
  readonly queries: number;
  readonly answered: number;
  readonly nxdomain: number;
  readonly lost: number;
  readonly qps: number;
  readonly p50Ms: number;
  readonly p99Ms: number;
  readonly maxMs: number;
}

export async function load(
  port: number,
  concurrency: number,
  names: readonly string[],
): Promise<LoadResult> {
  const socket = createSocket("udp4");
  await new Promise<void>((resolve) => socket.bind(0, "127.0.0.1", resolve));
  const latencies: number[] = [];
  let nxdomain = 0;
  let lost = 0;
  const pending = new Map<number, { sent: number; done: () => void }>();
  socket.on("message", (message: Buffer) => {
    const id = message.readUInt16BE(0);
    const entry = pending.get(id);
    if (entry === undefined) return;
    pending.delete(id);
    latencies.push(performance.now() - entry.sent);
    if ((message.readUInt16BE(2) & 0xf) === 3) nxdomain++;
    entry.done();
  });
  let cursor = 0;
  const started = performance.now();
  const worker = async (): Promise<void> => {
    while (cursor < names.length) {
      const index = cursor++;
      const id = index % 65536;
      const packet = dnsPacket.encode({
        type: "query",
        id,
        flags: dnsPacket.RECURSION_DESIRED,
        questions: [{ type: "A", name: names[index] as string, class: "IN" }],
      });
      await new Promise<void>((resolve) => {
        const timer = setTimeout(() => {
          pending.delete(id);
          lost++;
          resolve();
        }, 2000);
        pending.set(id, {
          sent: performance.now(),
          done: () => {
            clearTimeout(timer);
            resolve();
          },
        });
        socket.send(packet, port, "127.0.0.1");
      });
    }
  };
  await Promise.all(Array.from({ length: concurrency }, worker));
  const seconds = (performance.now() - started) / 1000;
  socket.close();
  latencies.sort((a, b) => a - b);
  const at = (q: number) =>
    latencies[Math.min(latencies.length - 1, Math.floor(q * latencies.length))] ?? 0;
  return {
    concurrency,
    queries: names.length,
    answered: latencies.length,
    nxdomain,
    lost,
    qps: Math.round(latencies.length / seconds),
    p50Ms: Number(at(0.5).toFixed(3)),
    p99Ms: Number(at(0.99).toFixed(3)),
    maxMs: Number((latencies.at(-1) ?? 0).toFixed(3)),
  };
}
