// boxwire: the TypeScript SDK for the boxwire bridge (docs/protocol.md).
export * from "./wire/codec.js";
export * from "./wire/payloads.js";
export * from "./wire/messages.js";
export * from "./wire/frames.js";
