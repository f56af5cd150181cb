// Terminal: one attached PTY session (docs/terminal.md). The Connection's
// reader pushes output frames and notices into it; read() hands the bytes
// to a single consumer. Output waiting unread is bounded: past
// MAX_BUFFERED bytes the terminal detaches itself, as the bridge does with
// a connection too slow for a session.

import type { Connection } from "./connection.js";
import { ConnectionClosedError } from "./errors.js";
import { MAX_FRAME_DATA } from "./wire/frames.js";
import type { TerminalAttached, TerminalOpen } from "./wire/payloads.js";

/** How a terminal is opened: zero fields mean a login shell, 80×24, the workspace. */
export type TerminalOptions = TerminalOpen;

/** Signals terminal_signal accepts. */
export type TerminalSignalName = "INT" | "TERM" | "HUP" | "KILL" | "QUIT" | "TSTP" | "CONT" | "USR1" | "USR2";

/** The most output bytes a Terminal holds unread before it detaches. */
export const MAX_BUFFERED = 16 << 20;

/** Terminal is an attached session. Its methods may be called concurrently; read() has one consumer. */
export class Terminal {
  /** The session id. */
  readonly session: string;
  /** The session as attached: command, size, watchers, and `screen`, the redraw output continues from. */
  readonly info: TerminalAttached;

  readonly #conn: Connection;
  readonly #chunks: Uint8Array[] = [];
  #buffered = 0;
  #wake: (() => void) | null = null;
  #ended = false;
  #err: Error | null = null;
  #exitCode: number | null = null;
  readonly #exited: Promise<number | null>;
  #resolveExited!: (code: number | null) => void;

  /** Internal: made by the Connection when terminal_attached arrives. */
  constructor(conn: Connection, info: TerminalAttached) {
    this.#conn = conn;
    this.info = info;
    this.session = info.session;
    this.#exited = new Promise((r) => (this.#resolveExited = r));
    if (info.exited) this.exit(info.exit_code ?? 0);
  }

  /** The screen redraw sent on attach; output frames continue from it. */
  get screen(): string {
    return this.info.screen;
  }

  /** Resolves with the exit code after the session's last output, or null when detached first. */
  get exited(): Promise<number | null> {
    return this.#exited;
  }

  /** write types data (UTF-8 for a string) into the session, in frames of at most 64 KiB. */
  write(data: string | Uint8Array): void {
    const bytes = typeof data === "string" ? new TextEncoder().encode(data) : data;
    for (let at = 0; at < bytes.length; at += MAX_FRAME_DATA) {
      this.#conn.terminalInput(this.session, bytes.subarray(at, at + MAX_FRAME_DATA));
    }
  }

  /** resize sets the window size; an error answer comes as an error event. */
  resize(cols: number, rows: number): void {
    this.#conn.send({ type: "terminal_resize", id: this.#conn.newID("t"), data: { session: this.session, cols, rows } });
  }

  /** signal sends sig to the session's process group. */
  signal(sig: TerminalSignalName): void {
    this.#conn.send({ type: "terminal_signal", id: this.#conn.newID("t"), data: { session: this.session, signal: sig } });
  }

  /** detach stops watching; the session goes on (attach again with Connection.attachTerminal). */
  async detach(): Promise<void> {
    this.#conn.forgetTerminal(this);
    await this.#conn.request({ type: "terminal_detach", data: { session: this.session } });
    this.end(null);
  }

  /** close ends the session: its process group is stopped. */
  async close(): Promise<void> {
    await this.#conn.request({ type: "terminal_close", data: { session: this.session } });
  }

  /**
   * read yields output as it arrives until the session exits or is
   * detached (then it ends), or the connection ends (then it throws).
   */
  async *read(): AsyncGenerator<Uint8Array, void, undefined> {
    for (;;) {
      const c = this.#chunks.shift();
      if (c) {
        this.#buffered -= c.length;
        yield c;
        continue;
      }
      if (this.#ended) {
        if (this.#err) throw this.#err;
        return;
      }
      await new Promise<void>((r) => (this.#wake = r));
    }
  }

  /** readAll collects the output until the session exits or is detached. */
  async readAll(): Promise<Uint8Array> {
    const parts: Uint8Array[] = [];
    for await (const c of this.read()) parts.push(c);
    const out = new Uint8Array(parts.reduce((n, c) => n + c.length, 0));
    let at = 0;
    for (const c of parts) {
      out.set(c, at);
      at += c.length;
    }
    return out;
  }

  /** Internal (Connection): output arrived. */
  push(data: Uint8Array): void {
    if (this.#ended) return;
    if (this.#buffered + data.length > MAX_BUFFERED) {
      this.#conn.forgetTerminal(this);
      try {
        this.#conn.send({ type: "terminal_detach", id: this.#conn.newID("t"), data: { session: this.session } });
      } catch {
        // the connection is ending anyway
      }
      this.end(new ConnectionClosedError(1000, "too_slow", `terminal ${this.session}: output not read fast enough; attach again`));
      return;
    }
    this.#chunks.push(data.slice());
    this.#buffered += data.length;
    this.#notify();
  }

  /** Internal (Connection): the session exited. */
  exit(code: number): void {
    this.#exitCode = code;
    this.#conn.forgetTerminal(this);
    this.end(null);
  }

  /** Internal: no more output will come; err, if any, is thrown by read(). */
  end(err: Error | null): void {
    if (this.#ended) return;
    this.#ended = true;
    this.#err = err;
    this.#resolveExited(this.#exitCode);
    this.#notify();
  }

  #notify(): void {
    const w = this.#wake;
    this.#wake = null;
    w?.();
  }
}
