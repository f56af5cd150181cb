// Live keeps an attached thread connected: it opens the WebSocket, hands
// every event to the chat, and when the connection drops (a broken
// network, a bridge restart) opens it again by itself, with after_seq
// the last event shown — the bridge sends only what came after, so
// nothing on screen is lost or shown twice — then reattaches the
// terminals. Only close() ends it.

import { Connection } from "../../../client/typescript/src/connection.js";
import { BoxwireError } from "../../../client/typescript/src/errors.js";

/** Reconnect waits: the first retry, and the most between two. */
const RETRY_FIRST = 250;
const RETRY_MOST = 5_000;

/** What Live tells the page. */
export interface LiveHooks {
  /** event is each event, in order, once. */
  event(msg: import("../../../client/typescript/src/wire/messages.js").Message): void;
  /** connected is a new connection (the first, or after a reconnect); events flow meanwhile. */
  connected(conn: Connection, again: boolean): void | Promise<void>;
  /** state is "connected", "reconnecting: why" or "closed: why". */
  state(text: string): void;
}

export class Live {
  readonly thread: string;
  readonly #url: string;
  readonly #hooks: LiveHooks;
  #conn: Connection | null = null;
  #lastSeq = 0;
  #closed = false;
  #wake: (() => void) | null = null;
  /** How many times it connected (1 after the first). */
  connects = 0;

  constructor(url: string, thread: string, hooks: LiveHooks) {
    this.#url = url;
    this.thread = thread;
    this.#hooks = hooks;
  }

  get conn(): Connection | null {
    return this.#conn;
  }

  /** open makes the first connection (rejecting when it fails) and keeps it up until close(). */
  async open(): Promise<void> {
    await this.#connect();
    void this.#run();
  }

  async #connect(): Promise<void> {
    const conn = await Connection.open({ url: this.#url, token: undefined, webSocket: undefined, thread: this.thread, afterSeq: this.#lastSeq });
    if (this.#closed) {
      await conn.close();
      return;
    }
    this.#conn = conn;
    this.connects++;
    this.#hooks.state("connected");
    // Not awaited: what the hook does (listing files) may wait for events,
    // which only #run delivers.
    void Promise.resolve(this.#hooks.connected(conn, this.connects > 1)).catch(() => {}); // the page's hook shows its own errors
  }

  async #run(): Promise<void> {
    let wait = RETRY_FIRST;
    while (!this.#closed) {
      const conn = this.#conn;
      if (conn) {
        try {
          for await (const msg of conn.events()) {
            this.#hooks.event(msg);
            this.#lastSeq = conn.lastSeq;
          }
        } catch (err) {
          this.#lastSeq = conn.lastSeq;
          if (this.#closed) break;
          this.#hooks.state(`reconnecting: ${describe(err)}`);
        }
        this.#conn = null;
        if (this.#closed) break;
      }
      await this.#sleep(wait);
      if (this.#closed) break;
      try {
        await this.#connect();
        wait = RETRY_FIRST;
      } catch (err) {
        if (err instanceof BoxwireError && (err.code === "not_found" || err.code === "unauthorized")) {
          this.#hooks.state(`closed: ${describe(err)}`);
          this.#closed = true;
          break;
        }
        this.#hooks.state(`reconnecting: ${describe(err)}`);
        wait = Math.min(wait * 2, RETRY_MOST);
      }
    }
  }

  #sleep(ms: number): Promise<void> {
    return new Promise((r) => {
      const t = setTimeout(r, ms);
      this.#wake = () => (clearTimeout(t), r());
    });
  }

  /** close ends the connection and stops reconnecting. */
  async close(): Promise<void> {
    this.#closed = true;
    this.#wake?.();
    await this.#conn?.close();
  }
}

function describe(err: unknown): string {
  return err instanceof Error ? err.message : String(err);
}
