// The opening exchange of a connection (docs/protocol.md, Opening): send
// hello, wait for the server's hello or the error that refuses it.

import { ConnectionClosedError, errorFromCode } from "./errors.js";
import { SOFTWARE } from "./software.js";
import type { WebSocketLike } from "./socket.js";
import { DecodeError } from "./wire/codec.js";
import { decodeMessage, type Message, messageText, PROTOCOL_VERSION } from "./wire/messages.js";
import type { Hello } from "./wire/payloads.js";

/** What the handshake got: the server's hello, and what arrived after it before the Connection took over. */
export interface Handshake {
  hello: Hello;
  backlog: unknown[];
  closed: { code: number; reason: string } | null;
}

/** handshake sends hello and waits for the answer: hello, or an error that rejects. */
export function handshake(sock: WebSocketLike, thread: string, afterSeq: number, signal?: AbortSignal): Promise<Handshake> {
  return new Promise<Handshake>((resolve, reject) => {
    const finish = (err: Error | null, hello?: Hello) => {
      signal?.removeEventListener("abort", onAbort);
      sock.onmessage = sock.onclose = null;
      if (err) return reject(err);
      // Frames after hello may come in the same read: keep them for the Connection.
      const hs: Handshake = { hello: hello as Hello, backlog: [], closed: null };
      sock.onmessage = (ev) => hs.backlog.push(ev.data);
      sock.onclose = (ev) => (hs.closed = { code: ev.code, reason: ev.reason });
      resolve(hs);
    };
    const onAbort = () => finish(signal?.reason instanceof Error ? signal.reason : new Error("aborted"));
    signal?.addEventListener("abort", onAbort, { once: true });
    sock.onclose = (ev) => finish(new ConnectionClosedError(ev.code, ev.reason));
    sock.onmessage = (ev) => {
      if (typeof ev.data !== "string") return finish(new DecodeError("server sent a binary frame before hello"));
      let msg: Message;
      try {
        msg = decodeMessage(ev.data);
      } catch (err) {
        return finish(err as Error);
      }
      if (msg.type === "error") return finish(errorFromCode(msg.data.code, msg.data.message));
      if (msg.type !== "hello") return finish(new DecodeError(`server sent ${msg.type} before hello`));
      if (msg.data.version !== PROTOCOL_VERSION) {
        return finish(errorFromCode("version_mismatch", `server speaks protocol version ${msg.data.version}, want ${PROTOCOL_VERSION}`));
      }
      finish(null, { ...msg.data, thread: msg.data.thread ?? msg.thread ?? thread });
    };
    const hello: Message<"hello"> = {
      type: "hello",
      id: "h1",
      data: { version: PROTOCOL_VERSION, role: "client", software: SOFTWARE, ...(thread ? { thread } : {}), ...(afterSeq ? { after_seq: afterSeq } : {}) },
    };
    sock.send(messageText(hello));
  });
}

