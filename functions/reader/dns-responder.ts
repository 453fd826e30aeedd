/**
 * A small authoritative DNS responder over UDP and TCP, answering from a {@link NameTable}
 * in memory (no request ever waits for DynamoDB). A packet that does not decode gets FORMERR
 * (or is dropped when it has no full header, or is itself a response); nothing a client
 * sends stops the server.
 */
import { createSocket, type RemoteInfo, type Socket } from "node:dgram";
import { createServer, isIPv6, type Server, type Socket as TcpSocket } from "node:net";
import dnsPacket from "dns-packet";
import type { NameTable } from "./dns-names.ts";

const RCODES = { NOERROR: 0, FORMERR: 1, SERVFAIL: 2, NXDOMAIN: 3, NOTIMP: 4, REFUSED: 5 };
const QR = 0x8000;
const AA = 0x0400;
const TC = 0x0200;
const RD = 0x0100;
const OPCODE_MASK = 0x7800;
/** Without EDNS, a UDP answer is at most 512 bytes (RFC 1035); larger ones are truncated. */
const UDP_PLAIN_MAX = 512;
const UDP_EDNS_MAX = 4096;

/** A header-only error answer (FORMERR, SERVFAIL) built without decoding the question. */
function headerOnly(query: Buffer, rcode: number): Buffer {
  const out = Buffer.alloc(12);
  out.writeUInt16BE(query.readUInt16BE(0), 0);
  const flags = query.readUInt16BE(2);
  out.writeUInt16BE(QR | (flags & OPCODE_MASK) | (flags & RD) | rcode, 2);
  return out;
}

export interface AnswerOptions {
  readonly ttl: number;
  /** UDP answers are truncated to the client's limit; TCP ones are not. */
  readonly transport: "udp" | "tcp";
}

/**
 * The answer to one DNS message, or undefined when it deserves none (shorter than a header,
 * or a response). Never throws.
 */
export function answerQuery(
  query: Buffer,
  table: NameTable,
  options: AnswerOptions,
): Buffer | undefined {
  if (query.length < 12) return undefined;
  const flags = query.readUInt16BE(2);
  if ((flags & QR) !== 0) return undefined;
  let decoded: dnsPacket.DecodedPacket;
  try {
    decoded = dnsPacket.decode(query);
  } catch {
    return headerOnly(query, RCODES.FORMERR);
  }
  const opcode = (flags & OPCODE_MASK) >> 11;
  if (opcode !== 0) return headerOnly(query, RCODES.NOTIMP);
  const questions = decoded.questions ?? [];
  const question = questions[0];
  if (questions.length !== 1 || question === undefined || typeof question.name !== "string") {
    return headerOnly(query, RCODES.FORMERR);
  }
  const klass = question.class ?? "IN";
  const resolution =
    klass === "IN" || klass === "ANY"
      ? table.resolve(question.name, String(question.type))
      : { status: "REFUSED" as const, answers: [] };
  const respond = (answers: dnsPacket.Answer[], truncated: boolean): Buffer =>
    dnsPacket.encode({
      type: "response",
      id: decoded.id ?? 0,
      flags:
        AA | (flags & RD) | (truncated ? TC : 0) | RCODES[resolution.status as keyof typeof RCODES],
      questions: [question],
      answers,
    });
  try {
    const answers: dnsPacket.Answer[] = resolution.answers.map((answer) => ({
      name: answer.name,
      type: answer.type,
      class: "IN",
      ttl: options.ttl,
      data: answer.data,
    }));
    const full = respond(answers, false);
    if (options.transport === "tcp") return full;
    const opt = (decoded.additionals ?? []).find((record) => record.type === "OPT") as
      | { udpPayloadSize?: number }
      | undefined;
    const limit =
      opt === undefined
        ? UDP_PLAIN_MAX
        : Math.min(UDP_EDNS_MAX, Math.max(UDP_PLAIN_MAX, opt.udpPayloadSize ?? 0));
    return full.length <= limit ? full : respond([], true);
  } catch {
    return headerOnly(query, RCODES.SERVFAIL);
  }
}

export interface DnsResponderOptions {
  readonly host?: string;
  /** 0 picks a free port (the same one for UDP and TCP). */
  readonly port?: number;
  readonly ttl: number;
  readonly table: NameTable;
  /** Socket errors and the like, one line each. */
  readonly log?: (line: string) => void;
}

/** The longest a TCP connection may stay idle. */
const TCP_IDLE_MS = 30_000;
/** A TCP client that sends more than this without a full message is cut off. */
const TCP_MAX_BUFFER = 64 * 1024;
/** Open TCP connections at most; more are refused by the OS backlog. */
const TCP_MAX_CONNECTIONS = 1024;

export class DnsResponder {
  private table: NameTable;
  private readonly ttl: number;
  private readonly host: string;
  private readonly wantedPort: number;
  private readonly log: (line: string) => void;
  private udp: Socket | undefined;
  private tcp: Server | undefined;
  private readonly connections = new Set<TcpSocket>();
  /** Queries answered, by transport (for logs and benchmarks). */
  readonly counts = { udp: 0, tcp: 0, dropped: 0 };

  constructor(options: DnsResponderOptions) {
    this.table = options.table;
    this.ttl = options.ttl;
    this.host = options.host ?? "127.0.0.1";
    this.wantedPort = options.port ?? 0;
    this.log = options.log ?? (() => undefined);
  }

  /** Answers from `table` from now on. */
  update(table: NameTable): void {
    this.table = table;
  }

  get names(): NameTable {
    return this.table;
  }

  /** Binds UDP and TCP on one port; resolves with it. */
  async start(): Promise<{ host: string; port: number }> {
    // With port 0, UDP picks a port and TCP takes the same; retry if TCP finds it taken.
    for (let attempt = 0; ; attempt++) {
      const udp = await this.bindUdp(this.wantedPort);
      const port = udp.address().port;
      try {
        this.tcp = await this.listenTcp(port);
        this.udp = udp;
        return { host: this.host, port };
      } catch (error) {
        udp.close();
        if (this.wantedPort !== 0 || attempt >= 10) throw error;
      }
    }
  }

  async stop(): Promise<void> {
    for (const socket of this.connections) socket.destroy();
    await Promise.all([
      new Promise<void>((resolve) => (this.udp ? this.udp.close(() => resolve()) : resolve())),
      new Promise<void>((resolve) => (this.tcp ? this.tcp.close(() => resolve()) : resolve())),
    ]);
    this.udp = undefined;
    this.tcp = undefined;
  }

  private bindUdp(port: number): Promise<Socket> {
    return new Promise((resolve, reject) => {
      const socket = createSocket(isIPv6(this.host) ? "udp6" : "udp4");
      const fail = (error: Error): void => reject(error);
      socket.once("error", fail);
      socket.bind(port, this.host, () => {
        socket.off("error", fail);
        socket.on("error", (error) => this.log(`dns: udp error: ${error.message}`));
        socket.on("message", (message, remote) => this.onUdp(socket, message, remote));
        resolve(socket);
      });
    });
  }

  private onUdp(socket: Socket, message: Buffer, remote: RemoteInfo): void {
    let reply: Buffer | undefined;
    try {
      reply = answerQuery(message, this.table, { ttl: this.ttl, transport: "udp" });
    } catch (error) {
      this.log(`dns: could not answer: ${error instanceof Error ? error.message : String(error)}`);
    }
    if (reply === undefined) {
      this.counts.dropped++;
      return;
    }
    this.counts.udp++;
    socket.send(reply, remote.port, remote.address, (error) => {
      if (error) this.log(`dns: udp send to ${remote.address}: ${error.message}`);
    });
  }

  private listenTcp(port: number): Promise<Server> {
    return new Promise((resolve, reject) => {
      const server = createServer((socket) => this.onTcp(socket));
      server.maxConnections = TCP_MAX_CONNECTIONS;
      server.once("error", reject);
      server.listen(port, this.host, () => {
        server.off("error", reject);
        server.on("error", (error) => this.log(`dns: tcp error: ${error.message}`));
        resolve(server);
      });
    });
  }

  private onTcp(socket: TcpSocket): void {
    this.connections.add(socket);
    socket.setTimeout(TCP_IDLE_MS, () => socket.destroy());
    socket.on("close", () => this.connections.delete(socket));
    socket.on("error", () => socket.destroy());
    let buffer = Buffer.alloc(0);
    socket.on("data", (chunk: Buffer) => {
      buffer = Buffer.concat([buffer, chunk]);
      while (buffer.length >= 2) {
        const length = buffer.readUInt16BE(0);
        if (buffer.length < 2 + length) break;
        const message = buffer.subarray(2, 2 + length);
        buffer = buffer.subarray(2 + length);
        let reply: Buffer | undefined;
        try {
          reply = answerQuery(message, this.table, { ttl: this.ttl, transport: "tcp" });
        } catch {
          reply = undefined;
        }
        if (reply === undefined) {
          this.counts.dropped++;
          continue;
        }
        this.counts.tcp++;
        const prefix = Buffer.alloc(2);
        prefix.writeUInt16BE(reply.length);
        socket.write(Buffer.concat([prefix, reply]));
      }
      if (buffer.length > TCP_MAX_BUFFER) socket.destroy();
    });
  }
}
