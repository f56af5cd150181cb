// boxwire: the TypeScript SDK for the boxwire bridge (docs/protocol.md).
//
//   const bw = new Client({ url: "http://127.0.0.1:7420", token });
//   const conn = await bw.connect();            // a new thread and sandbox
//   const done = await conn.chat("hi").result();
//
// Client: threads, transcript and files over HTTP; Connection: one
// WebSocket bound to a thread (turns, run_tool, approvals, terminals);
// errors: a BoxwireError subclass per protocol error code.
export * from "./client.js";
export * from "./connection.js";
export * from "./errors.js";
export * from "./files.js";
export * from "./terminal.js";
export * from "./turn.js";
export { type WebSocketFactory, type WebSocketLike } from "./socket.js";
export * from "./wire/codec.js";
export * from "./wire/payloads.js";
export * from "./wire/messages.js";
export * from "./wire/frames.js";
