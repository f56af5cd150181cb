// Messages: the envelope and the table of every message type with its
// payload codec (docs/protocol.md). decodeMessage and encodeMessage are the
// only way frames are read and written.

import { bool, type Codec, DecodeError, type JSONValue, obj, opt, type TypeOf, arr } from "./codec.js";
import * as p from "./payloads.js";

/** The protocol version this SDK speaks. */
export const PROTOCOL_VERSION = 1;

/** The WebSocket path of a bridge or agent. */
export const WS_PATH = "/v1/ws";

/** The largest JSON text frame a peer accepts. */
export const MAX_MESSAGE_BYTES = 1 << 20;

/** Codecs by message type; null for types without a payload. */
const payloadCodecs = {
  hello: p.Hello,
  user_message: p.Text,
  interrupt: null,
  ping: null,
  pong: null,
  run_tool: p.RunTool,
  user_echo: p.Text,
  assistant_delta: p.Text,
  assistant_message: p.Text,
  tool_call: p.ToolCall,
  tool_output: p.ToolOutput,
  tool_result: p.ToolResult,
  turn_done: p.TurnDone,
  error: p.ErrorPayload,
  tool_check: p.ToolCheck,
  tool_verdict: p.ToolVerdict,
  approve: p.ApprovalAnswer,
  deny: p.ApprovalAnswer,
  approval_request: p.ApprovalRequest,
  approval_decision: p.ApprovalDecision,
  usage: p.UsageReport,
  egress: p.EgressDecision,
  egress_rules: p.EgressRules,
  sandbox_exited: p.SandboxExited,
  sandbox_replaced: p.SandboxReplaced,
  history: null as unknown as Codec<History>, // set below: it holds messages
  resume: p.Resume,
  resumed: p.Resumed,
  events_lost: p.EventsLost,
  accepted: null,
  claim: p.Claim,
  claimed: null,
  terminal_open: p.TerminalOpen,
  terminal_attach: p.TerminalRef,
  terminal_detach: p.TerminalRef,
  terminal_resize: p.TerminalResize,
  terminal_signal: p.TerminalSignal,
  terminal_close: p.TerminalRef,
  terminal_list: null,
  terminal_attached: p.TerminalAttached,
  terminal_detached: p.TerminalDetached,
  terminal_exit: p.TerminalExit,
  terminal_closed: p.TerminalRef,
  terminal_sessions: p.TerminalSessions,
  port_open: p.PortOpen,
  port_opened: p.StreamRef,
  stream_close: p.StreamClose,
  port_list: null,
  ports: p.Ports,
  host_tools_list: null,
  host_tools: p.HostTools,
  host_call: p.HostCall,
  host_progress: p.HostProgress,
  host_result: p.HostResult,
  host_cancel: null,
} as const;

type Codecs = typeof payloadCodecs;

/** Every message type this version of the protocol defines. */
export type MessageType = keyof Codecs;

/** The payload type of message type T (undefined for types without one). */
export type PayloadOf<T extends MessageType> = Codecs[T] extends null ? undefined : TypeOf<Codecs[T]>;

/** The envelope of one frame (docs/protocol.md, Envelope). */
export interface Envelope<T extends MessageType = MessageType> {
  type: T;
  /** The conversation; clients may leave it out (hello binds the connection). */
  thread?: string;
  /** Events only: the per-thread event number, from 1, without gaps. */
  seq?: number;
  /** Correlation: a request's sender picks it; replies and caused events carry it. */
  id?: string;
}

/** A message of type T; a union over every type when T is left out, narrowed by `type`. */
export type Message<T extends MessageType = MessageType> = {
  [K in T]: Envelope<K> & (PayloadOf<K> extends undefined ? { data?: undefined } : { data: PayloadOf<K> });
}[T];

/** The payload of history: logged events handed to a new agent. */
export interface History {
  events: Message[];
  more?: boolean;
}

/** Types of events: numbered by seq and kept in the thread's log. */
export const EVENT_TYPES: ReadonlySet<MessageType> = new Set<MessageType>([
  "user_echo",
  "assistant_delta",
  "assistant_message",
  "tool_call",
  "tool_output",
  "tool_result",
  "turn_done",
  "error",
  "approval_request",
  "approval_decision",
  "usage",
  "egress",
  "egress_rules",
  "sandbox_exited",
  "sandbox_replaced",
  "events_lost",
  "ports",
]);

/** Every message type, sorted. */
export const MESSAGE_TYPES: readonly MessageType[] = (Object.keys(payloadCodecs) as MessageType[]).sort();

/** isKnownType reports whether t is a type of this protocol version. */
export function isKnownType(t: string): t is MessageType {
  return Object.hasOwn(payloadCodecs, t);
}

/** isEventType reports whether t is an event type (an error is one only with a seq). */
export function isEventType(t: string): boolean {
  return EVENT_TYPES.has(t as MessageType);
}

/** UnknownTypeError is thrown by decodeMessage for a type this SDK does not know. */
export class UnknownMessageTypeError extends DecodeError {
  override name = "UnknownMessageTypeError";
  constructor(readonly type: string) {
    super(`unknown message type ${JSON.stringify(type)}`);
  }
}

/**
 * decodeMessage checks a parsed frame (or its text) and returns the typed
 * message: fields the protocol does not define are dropped, missing
 * required fields get their zero value. It throws DecodeError for a frame
 * that is not an envelope or whose payload does not fit its type, and
 * UnknownMessageTypeError for a type it does not know.
 */
export function decodeMessage(frame: unknown): Message {
  const v: unknown = typeof frame === "string" ? parseJSON(frame) : frame;
  if (v === null || typeof v !== "object" || Array.isArray(v)) throw new DecodeError("message: not a JSON object");
  const src = v as Record<string, unknown>;
  const type = src["type"];
  if (typeof type !== "string" || type === "") throw new DecodeError("message: missing type");
  if (!isKnownType(type)) throw new UnknownMessageTypeError(type);
  const out: Record<string, unknown> = { type };
  for (const k of ["thread", "id"] as const) {
    const x = src[k];
    if (x === undefined || x === null || x === "") continue;
    if (typeof x !== "string") throw new DecodeError(`${type}.${k}: want string`);
    out[k] = x;
  }
  const seq = src["seq"];
  if (seq !== undefined && seq !== null && seq !== 0) {
    if (typeof seq !== "number" || !Number.isSafeInteger(seq) || seq < 0) throw new DecodeError(`${type}.seq: want a count`);
    out["seq"] = seq;
  }
  const codec = payloadCodecs[type] as Codec<unknown> | null;
  const data = src["data"];
  if (codec !== null) {
    if (data === undefined || data === null) throw new DecodeError(`${type}: missing data`);
    out["data"] = codec.decode(data, `${type}.data`);
  }
  return out as unknown as Message;
}

/** encodeMessage returns the JSON value of msg, as the Go side writes it. */
export function encodeMessage(msg: Message): JSONValue {
  const out: Record<string, JSONValue> = { type: msg.type };
  if (msg.thread) out["thread"] = msg.thread;
  if (msg.seq) out["seq"] = msg.seq;
  if (msg.id) out["id"] = msg.id;
  const codec = payloadCodecs[msg.type] as Codec<unknown> | null;
  if (codec !== null && msg.data !== undefined) out["data"] = codec.encode(msg.data);
  return out;
}

/** messageText is the frame text of msg. */
export function messageText(msg: Message): string {
  return JSON.stringify(encodeMessage(msg));
}

function parseJSON(text: string): unknown {
  try {
    return JSON.parse(text);
  } catch (err) {
    throw new DecodeError(`message: not JSON: ${(err as Error).message}`);
  }
}

// history holds whole messages, so its codec refers back to decodeMessage.
const messageCodec: Codec<Message> = {
  decode(v, path) {
    try {
      return decodeMessage(v);
    } catch (err) {
      throw new DecodeError(`${path}: ${(err as Error).message}`);
    }
  },
  encode: encodeMessage,
  zero: () => ({ type: "ping" }),
};
(payloadCodecs as { history: Codec<History> }).history = obj({ events: arr(messageCodec), more: opt(bool) });
