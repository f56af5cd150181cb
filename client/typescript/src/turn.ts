// Turn and ToolRun: the events of one request, read from the Connection's
// event stream until the message that ends it (turn_done, tool_result).

import type { Connection } from "./connection.js";
import { errorFromCode, type BoxwireError } from "./errors.js";
import type { Message } from "./wire/messages.js";
import type { ToolResult, TurnDone } from "./wire/payloads.js";

/** What a turn ended with. */
export interface TurnResult extends TurnDone {
  /** The turn's id (its user_message's). */
  id: string;
  /** The text of the turn's assistant messages, joined by blank lines. */
  text: string;
  /** Every event of the turn, in seq order. */
  events: Message[];
  /** The error event the turn logged (e.g. LLMError), if any. */
  error?: BoxwireError;
}

/**
 * requestEvents yields the events of request id from conn: its own (which
 * carry the id), approval events (which carry none: a turn waits on them)
 * and error replies to other requests sent meanwhile. It throws the error
 * answering the request itself (e.g. BusyError) and stops after isEnd.
 */
async function* requestEvents(conn: Connection, id: string, isEnd: (m: Message) => boolean): AsyncGenerator<Message, void, undefined> {
  for await (const msg of conn.events()) {
    const mine = msg.id === id;
    const approval = msg.type === "approval_request" || msg.type === "approval_decision";
    const otherError = msg.type === "error" && msg.seq === undefined;
    if (!mine && !approval && !otherError) continue;
    if (mine && msg.type === "error" && msg.seq === undefined) throw errorFromCode(msg.data.code, msg.data.message);
    yield msg;
    if (mine && isEnd(msg)) return;
  }
}

/**
 * Turn is a running turn. Iterate it (once) for its events, ending with
 * turn_done, or await result(). Both consume the Connection's events:
 * nothing else may read them meanwhile. A connection that ends first makes
 * them throw; after a drop, connect again with the old lastSeq and follow
 * the same id with Connection.turn(id).
 */
export class Turn implements AsyncIterable<Message> {
  readonly id: string;
  readonly #conn: Connection;
  readonly #events: Message[] = [];
  #started = false;

  constructor(conn: Connection, id: string) {
    this.#conn = conn;
    this.id = id;
  }

  async *[Symbol.asyncIterator](): AsyncGenerator<Message, void, undefined> {
    if (this.#started) throw new Error(`turn ${this.id} is already being read`);
    this.#started = true;
    for await (const msg of requestEvents(this.#conn, this.id, (m) => m.type === "turn_done")) {
      if (msg.id === this.id) this.#events.push(msg);
      yield msg;
    }
  }

  /** result reads the turn to its end (or what is left of it) and resolves with how it ended. */
  async result(): Promise<TurnResult> {
    if (!this.#started) for await (const _ of this) void _;
    const texts: string[] = [];
    let error: BoxwireError | undefined;
    let done: TurnDone | undefined;
    for (const m of this.#events) {
      if (m.type === "assistant_message") texts.push(m.data.text);
      if (m.type === "error" && !error) error = errorFromCode(m.data.code, m.data.message);
      if (m.type === "turn_done") done = m.data;
    }
    if (!done) throw new Error(`turn ${this.id}: read without its turn_done`);
    return { ...done, id: this.id, text: texts.join("\n\n"), events: this.#events, ...(error ? { error } : {}) };
  }
}

/** ToolRun is a running run_tool: iterate it for tool_call, tool_output… and tool_result, or await result(). */
export class ToolRun implements AsyncIterable<Message> {
  readonly id: string;
  readonly #conn: Connection;
  #result: ToolResult | undefined;
  #output = "";
  #started = false;

  constructor(conn: Connection, id: string) {
    this.#conn = conn;
    this.id = id;
  }

  /** The raw output streamed so far (terminal bytes as text). */
  get output(): string {
    return this.#output;
  }

  async *[Symbol.asyncIterator](): AsyncGenerator<Message, void, undefined> {
    if (this.#started) throw new Error(`run ${this.id} is already being read`);
    this.#started = true;
    for await (const msg of requestEvents(this.#conn, this.id, (m) => m.type === "tool_result")) {
      if (msg.type === "tool_output" && msg.id === this.id) this.#output += msg.data.output;
      if (msg.type === "tool_result" && msg.id === this.id) this.#result = msg.data;
      yield msg;
    }
  }

  /** result reads the run to its tool_result and resolves with it (a tool failure is its `error`). */
  async result(): Promise<ToolResult> {
    if (!this.#started) for await (const _ of this) void _;
    if (!this.#result) throw new Error(`run ${this.id}: read without its tool_result`);
    return this.#result;
  }
}
