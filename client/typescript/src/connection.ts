// Connection: one WebSocket bound to one thread (docs/protocol.md). The
// socket's message handler is the only reader: it hands each reply to the
// request waiting for its id, terminal bytes and terminal notices to their
// Terminal, and queues everything else as events for the single consumer
// of events() (a Turn, a ToolRun, or your own loop).

import { ConnectionClosedError, errorFromCode, SlowConsumerError } from "./errors.js";
import { abortSocket, openSocket, type WebSocketFactory, type WebSocketLike } from "./socket.js";
import { Terminal, type TerminalOptions } from "./terminal.js";
import { ToolRun, Turn } from "./turn.js";
import { DecodeError, type JSONObject } from "./wire/codec.js";
import { decodeFrame, encodeFrame, FrameKind } from "./wire/frames.js";
import { handshake, type Handshake } from "./handshake.js";
import { decodeMessage, MAX_MESSAGE_BYTES, type Message, messageText } from "./wire/messages.js";
import type { Hello, TerminalAttached, TerminalInfo, ToolResult } from "./wire/payloads.js";

export { SOFTWARE } from "./software.js";

/** Connection.events' default buffer: events waiting unread before the connection is dropped. */
export const DEFAULT_EVENT_BUFFER = 4096;

/** How a Connection is opened; Client.connect fills url and token. */
export interface ConnectOptions {
  /** The thread to attach to; empty creates a new thread (and sandbox). */
  thread?: string;
  /** The last event seq already seen: every later event the bridge has follows its hello. */
  afterSeq?: number;
  /** Events that may wait unread before the connection ends with SlowConsumerError; 0: 4096. */
  eventBuffer?: number;
  /** Aborts connecting (not the connection once open). */
  signal?: AbortSignal;
}

/** Internal: everything a Connection needs to open. */
export interface DialOptions extends ConnectOptions {
  url: string;
  token: string | undefined;
  webSocket: WebSocketFactory | undefined;
}

interface Pending {
  resolve(msg: Message): void;
  reject(err: Error): void;
}

/** Options of a request. */
export interface RequestOptions {
  signal?: AbortSignal;
}

/**
 * Connection is one WebSocket bound to one thread. Its methods may be
 * called concurrently; events() has a single consumer. Close it when done.
 */
export class Connection implements AsyncIterable<Message> {
  /** The thread this connection is bound to, as the server said. */
  readonly thread: string;
  /** The hello the server answered with. */
  readonly server: Hello;

  readonly #sock: WebSocketLike;
  readonly #idPrefix: string;
  readonly #eventBuffer: number;
  #nextID = 0;
  #lastSeq: number;
  #queuedSeq: number;
  readonly #queue: Message[] = [];
  #wake: (() => void) | null = null;
  readonly #pending = new Map<string, Pending>();
  readonly #terminals = new Map<string, Terminal>();
  #err: Error | null = null; // why it ended; null while open
  #closedByUs = false;
  readonly #closed: Promise<void>;
  #resolveClosed!: () => void;

  private constructor(sock: WebSocketLike, hs: Handshake, thread: string, afterSeq: number, eventBuffer: number) {
    const hello = hs.hello;
    this.#sock = sock;
    this.server = hello;
    this.thread = thread;
    this.#lastSeq = afterSeq;
    this.#queuedSeq = afterSeq;
    this.#eventBuffer = eventBuffer > 0 ? eventBuffer : DEFAULT_EVENT_BUFFER;
    this.#idPrefix = randomHex(6);
    this.#closed = new Promise((r) => (this.#resolveClosed = r));
    sock.onmessage = (ev) => this.#onMessage(ev.data);
    sock.onclose = (ev) => this.#onClose(ev.code, ev.reason);
    sock.onerror = () => {}; // onclose follows with the code
    for (const data of hs.backlog) this.#onMessage(data);
    if (hs.closed) this.#onClose(hs.closed.code, hs.closed.reason);
  }

  /**
   * open connects, sends hello and waits for the server's hello; it rejects
   * with the server's error instead of hello (NotFoundError for an unknown
   * thread, SandboxLimitError, …), UnauthorizedError for a wrong token, or
   * ConnectionClosedError. A bridge creating the thread's sandbox answers
   * only when its agent is ready.
   */
  static async open(o: DialOptions): Promise<Connection> {
    const headers: Record<string, string> = {};
    if (o.token) headers["Authorization"] = `Bearer ${o.token}`;
    const sock = await openSocket(o.url, headers, o.webSocket, o.signal);
    const afterSeq = o.afterSeq ?? 0;
    try {
      const hs = await handshake(sock, o.thread ?? "", afterSeq, o.signal);
      const hello = hs.hello;
      const thread = hello.thread ?? o.thread ?? "";
      // A bridge's answer says where events start: the client's after_seq,
      // or the log's end when the client's was ahead of it (seq_ahead).
      const start = hello.after_seq !== undefined && hello.after_seq < afterSeq ? hello.after_seq : afterSeq;
      return new Connection(sock, hs, thread, start, o.eventBuffer ?? 0);
    } catch (err) {
      abortSocket(sock);
      throw err;
    }
  }

  /** The seq of the last event events() delivered (afterSeq before any): connect with it to resume. */
  get lastSeq(): number {
    return this.#lastSeq;
  }

  /** Why the connection ended: null while open. */
  get error(): Error | null {
    return this.#err;
  }

  /** Resolves when the connection has ended. */
  get closed(): Promise<void> {
    return this.#closed;
  }

  /** newID returns a request id starting with kind, unique to this connection. */
  newID(kind: string): string {
    this.#nextID += 1;
    return `${kind}-${this.#idPrefix}-${this.#nextID}`;
  }

  /**
   * send writes msg (thread defaults to this connection's). It throws
   * ConnectionClosedError once the connection has ended and TooLargeError
   * for a frame over 1 MiB.
   */
  send(msg: Message): void {
    const text = messageText({ ...msg, thread: msg.thread ?? this.thread } as Message);
    if (new TextEncoder().encode(text).length > MAX_MESSAGE_BYTES) {
      throw errorFromCode("too_large", `${msg.type} of more than ${MAX_MESSAGE_BYTES} bytes`);
    }
    this.#write(text);
  }

  /** sendFrame writes one binary terminal frame. */
  sendFrame(data: Uint8Array): void {
    this.#write(data);
  }

  #write(data: string | Uint8Array): void {
    if (this.#err) throw this.#err;
    this.#sock.send(data);
  }

  /**
   * request sends msg and resolves with the reply carrying its id (a fresh
   * one when msg has none); an error reply rejects with its BoxwireError
   * subclass; the connection's end rejects with why it ended.
   */
  request(msg: Message, opts: RequestOptions = {}): Promise<Message> {
    const id = msg.id ?? this.newID("q");
    return new Promise<Message>((resolve, reject) => {
      const onAbort = () => {
        this.#pending.delete(id);
        reject(opts.signal?.reason instanceof Error ? opts.signal.reason : new Error("aborted"));
      };
      const done = () => opts.signal?.removeEventListener("abort", onAbort);
      this.#pending.set(id, {
        resolve: (m) => (done(), resolve(m)),
        reject: (e) => (done(), reject(e)),
      });
      opts.signal?.addEventListener("abort", onAbort, { once: true });
      try {
        this.send({ ...msg, id } as Message);
      } catch (err) {
        this.#pending.delete(id);
        done();
        reject(err as Error);
      }
    });
  }

  /** ping sends a protocol ping (through a bridge, to the agent) and resolves with the round trip in ms. */
  async ping(opts: RequestOptions = {}): Promise<number> {
    const start = performance.now();
    await this.request({ type: "ping", id: this.newID("p") }, opts);
    return performance.now() - start;
  }

  /**
   * events yields every message but replies and terminal traffic, in
   * arrival order; events already seen (seq ≤ lastSeq) are skipped. It
   * ends when close() was called, and throws why otherwise
   * (ConnectionClosedError, SlowConsumerError). Breaking out of it leaves
   * the connection open. It has a single consumer at a time.
   */
  async *events(): AsyncGenerator<Message, void, undefined> {
    for (;;) {
      const msg = this.#queue.shift();
      if (msg) {
        if (msg.seq !== undefined && msg.seq > this.#lastSeq) this.#lastSeq = msg.seq;
        yield msg;
        continue;
      }
      if (this.#err) {
        if (this.#closedByUs) return;
        throw this.#err;
      }
      await new Promise<void>((r) => (this.#wake = r));
    }
  }

  [Symbol.asyncIterator](): AsyncIterator<Message> {
    return this.events();
  }

  /**
   * chat starts a turn with text and returns it: iterate it for the turn's
   * events, or await result(). A turn already running makes it throw BusyError.
   */
  chat(text: string): Turn {
    const id = this.newID("m");
    this.send({ type: "user_message", id, data: { text } });
    return new Turn(this, id);
  }

  /** turn follows the turn started by the user_message id, e.g. on a new connection after a drop. */
  turn(id: string): Turn {
    return new Turn(this, id);
  }

  /** interrupt cancels the running turn and every running run_tool; without one it does nothing. */
  interrupt(): void {
    this.send({ type: "interrupt", id: this.newID("i") });
  }

  /** approve answers an approval_request; a later answer for the same id gets NotFoundError as an event. */
  approve(approvalID: string, reason?: string): void {
    this.send({ type: "approve", id: this.newID("v"), data: { approval_id: approvalID, ...(reason ? { reason } : {}) } });
  }

  /** deny refuses an approval_request; reason is shown to the model. */
  deny(approvalID: string, reason?: string): void {
    this.send({ type: "deny", id: this.newID("v"), data: { approval_id: approvalID, ...(reason ? { reason } : {}) } });
  }

  /**
   * runTool runs one tool directly, outside the conversation (run_tool):
   * iterate the run for its tool_call, tool_output… and tool_result, or
   * await result(). Tools: execute, ls, read_file, write_file, edit_file,
   * delete, glob, grep, job_* (docs/tools.md).
   */
  runTool(name: string, args: JSONObject = {}): ToolRun {
    const id = this.newID("r");
    this.send({ type: "run_tool", id, data: { name, arguments: args } });
    return new ToolRun(this, id);
  }

  /** execute runs a command with bash -lc in the workspace and resolves with its tool_result. */
  execute(command: string, opts: { timeout?: number; background?: boolean } = {}): Promise<ToolResult> {
    return this.runTool("execute", { command, ...opts }).result();
  }

  /** openTerminal starts a PTY session and attaches to it. */
  async openTerminal(opts: TerminalOptions = {}, ro: RequestOptions = {}): Promise<Terminal> {
    const reply = await this.request({ type: "terminal_open", data: opts }, ro);
    return this.#terminalFrom(reply);
  }

  /** attachTerminal watches an existing session; its screen is redrawn in Terminal.screen. */
  async attachTerminal(session: string, ro: RequestOptions = {}): Promise<Terminal> {
    const reply = await this.request({ type: "terminal_attach", data: { session } }, ro);
    return this.#terminalFrom(reply);
  }

  /** listTerminals lists the thread's terminal sessions. */
  async listTerminals(ro: RequestOptions = {}): Promise<TerminalInfo[]> {
    const reply = await this.request({ type: "terminal_list" }, ro);
    if (reply.type !== "terminal_sessions") throw new DecodeError(`terminal_list answered ${reply.type}`);
    return reply.data.sessions;
  }

  #terminalFrom(reply: Message): Terminal {
    if (reply.type !== "terminal_attached") throw new DecodeError(`terminal request answered ${reply.type}`);
    const t = this.#terminals.get(reply.data.session);
    if (!t) throw new DecodeError(`terminal ${reply.data.session} not registered`);
    return t;
  }

  /** Internal (Terminal): stop routing a session's traffic. */
  forgetTerminal(t: Terminal): void {
    if (this.#terminals.get(t.session) === t) this.#terminals.delete(t.session);
  }

  /** Internal (Terminal): the input frame of session with data. */
  terminalInput(session: string, data: Uint8Array): void {
    this.sendFrame(encodeFrame(FrameKind.Input, session, data));
  }

  /**
   * close ends the connection with a normal close; events() then ends and
   * waiting requests reject. It is idempotent and resolves once closed.
   */
  async close(): Promise<void> {
    if (!this.#err) {
      this.#closedByUs = true;
      this.#end(new ConnectionClosedError(1000, "closed by the client"));
      try {
        this.#sock.close(1000, "");
      } catch {
        // already closing
      }
      setTimeout(() => abortSocket(this.#sock), 1000).unref?.();
    }
    await this.#closed;
  }

  /** abort drops the socket at once, without a close handshake (as a broken network would). */
  abort(): void {
    this.#end(new ConnectionClosedError(1006, "aborted by the client"));
    abortSocket(this.#sock);
  }

  #onMessage(data: unknown): void {
    if (this.#err) return;
    if (typeof data !== "string") {
      this.#onFrame(data);
      return;
    }
    let msg: Message;
    try {
      msg = decodeMessage(data);
    } catch {
      return; // a type or shape from a newer protocol: not ours to show
    }
    if (msg.seq === undefined && msg.id !== undefined) {
      const p = this.#pending.get(msg.id);
      if (p) {
        this.#pending.delete(msg.id);
        if (msg.type === "terminal_attached") this.#registerTerminal(msg.data);
        if (msg.type === "error") p.reject(errorFromCode(msg.data.code, msg.data.message));
        else p.resolve(msg);
        return;
      }
    }
    if (this.#routeTerminal(msg)) return;
    if (msg.seq !== undefined) {
      if (msg.seq <= this.#queuedSeq) return; // a repeat after resume
      this.#queuedSeq = msg.seq;
    }
    if (this.#queue.length >= this.#eventBuffer) {
      this.#end(new SlowConsumerError(this.#queue.length));
      abortSocket(this.#sock);
      return;
    }
    this.#queue.push(msg);
    this.#notify();
  }

  #registerTerminal(info: TerminalAttached): void {
    this.#terminals.get(info.session)?.end(null);
    this.#terminals.set(info.session, new Terminal(this, info));
  }

  /** routeTerminal hands unprompted terminal notices to their Terminal. */
  #routeTerminal(msg: Message): boolean {
    if (msg.type !== "terminal_exit" && msg.type !== "terminal_detached") return false;
    const t = this.#terminals.get(msg.data.session);
    if (!t) return false;
    if (msg.type === "terminal_exit") t.exit(msg.data.exit_code);
    else t.end(msg.data.reason === "too_slow" ? new ConnectionClosedError(1000, "too_slow", "terminal detached: too slow") : null);
    return true;
  }

  #onFrame(data: unknown): void {
    const bytes = data instanceof ArrayBuffer ? new Uint8Array(data) : ArrayBuffer.isView(data) ? new Uint8Array(data.buffer, data.byteOffset, data.byteLength) : null;
    if (!bytes) return;
    try {
      const f = decodeFrame(bytes);
      if (f.kind === FrameKind.Output) this.#terminals.get(f.session)?.push(f.data);
    } catch {
      // a malformed frame: nothing to route it to
    }
  }

  #onClose(code: number, reason: string): void {
    this.#end(new ConnectionClosedError(code, reason));
    this.#resolveClosed();
  }

  #end(err: Error): void {
    if (!this.#err) {
      this.#err = err;
      for (const p of this.#pending.values()) p.reject(err);
      this.#pending.clear();
      for (const t of this.#terminals.values()) t.end(this.#closedByUs ? null : err);
      this.#terminals.clear();
      this.#notify();
    }
  }

  #notify(): void {
    const w = this.#wake;
    this.#wake = null;
    w?.();
  }
}

function randomHex(n: number): string {
  const b = new Uint8Array(n);
  globalThis.crypto.getRandomValues(b);
  return Array.from(b, (x) => x.toString(16).padStart(2, "0")).join("");
}

