// The WebSocket under a Connection: the browser's global WebSocket, or the
// npm package ws in Node (which, unlike a browser, can send the bearer
// token in the upgrade request).

import { ConnectionClosedError, errorFromCode, UnauthorizedError, type BoxwireError } from "./errors.js";

/** The part of the WebSocket API a Connection uses (browsers' and ws's). */
export interface WebSocketLike {
  binaryType: string;
  readonly readyState: number;
  send(data: string | Uint8Array): void;
  close(code?: number, reason?: string): void;
  onopen: ((ev: unknown) => void) | null;
  onmessage: ((ev: { data: unknown }) => void) | null;
  onclose: ((ev: { code: number; reason: string }) => void) | null;
  onerror: ((ev: unknown) => void) | null;
}

/** A WebSocket constructor: the browser's, ws's, or one of your own. */
export type WebSocketFactory = (url: string, headers: Record<string, string>) => WebSocketLike;

/** The largest frame a Connection reads (the bridge closes over 16 MiB itself). */
const MAX_PAYLOAD = 17 << 20;

/** A ws socket, when the factory made one: its extra API. */
interface NodeSocket extends WebSocketLike {
  on(event: "unexpected-response", fn: (req: { destroy(): void }, res: NodeResponse) => void): void;
  terminate(): void;
}
interface NodeResponse {
  statusCode?: number;
  on(event: "data", fn: (chunk: Uint8Array) => void): void;
  on(event: "end", fn: () => void): void;
}

/** defaultFactory uses the global WebSocket in browsers and ws in Node. */
async function defaultFactory(): Promise<WebSocketFactory> {
  const g = globalThis as { WebSocket?: new (url: string) => WebSocketLike; process?: { versions?: { node?: string } } };
  if (g.process?.versions?.node === undefined && g.WebSocket) {
    const WS = g.WebSocket;
    return (url, headers) => {
      if (headers["Authorization"]) {
        throw new Error(
          "a browser cannot send the bearer token on a WebSocket: reach the bridge through a same-origin proxy that adds it, and leave token empty",
        );
      }
      return new WS(url);
    };
  }
  const { WebSocket: WS } = await import("ws");
  return (url, headers) =>
    new WS(url, { headers, maxPayload: MAX_PAYLOAD, perMessageDeflate: false }) as unknown as WebSocketLike;
}

/**
 * openSocket opens a WebSocket to url and resolves once it is open. An
 * HTTP refusal of the upgrade rejects with its protocol error (401:
 * UnauthorizedError); signal aborts the attempt.
 */
export async function openSocket(
  url: string,
  headers: Record<string, string>,
  factory: WebSocketFactory | undefined,
  signal: AbortSignal | undefined,
): Promise<WebSocketLike> {
  const make = factory ?? (await defaultFactory());
  signal?.throwIfAborted();
  const sock = make(url, headers);
  sock.binaryType = "arraybuffer";
  return new Promise<WebSocketLike>((resolve, reject) => {
    let settled = false;
    const settle = (err: Error | null) => {
      if (settled) return;
      settled = true;
      signal?.removeEventListener("abort", onAbort);
      sock.onopen = sock.onerror = sock.onclose = null;
      if (err) {
        abortSocket(sock);
        reject(err);
      } else {
        resolve(sock);
      }
    };
    const onAbort = () => settle(signal?.reason instanceof Error ? signal.reason : new Error("aborted"));
    signal?.addEventListener("abort", onAbort, { once: true });
    const node = sock as Partial<NodeSocket>;
    if (typeof node.on === "function") {
      node.on("unexpected-response", (req, res) => {
        const chunks: Uint8Array[] = [];
        res.on("data", (c) => chunks.push(c));
        res.on("end", () => {
          req.destroy();
          settle(httpRefusal(res.statusCode ?? 0, new TextDecoder().decode(concat(chunks))));
        });
      });
    }
    sock.onopen = () => settle(null);
    sock.onerror = (ev) => {
      const msg = (ev as { message?: string }).message;
      settle(new ConnectionClosedError(1006, "", `connect to ${url}: ${msg ?? "failed"}`));
    };
    sock.onclose = (ev) => settle(new ConnectionClosedError(ev.code, ev.reason));
  });
}

/** abortSocket drops sock at once (ws: terminate; browsers: close). */
export function abortSocket(sock: WebSocketLike): void {
  const node = sock as Partial<NodeSocket>;
  sock.onerror = () => {}; // ws reports an aborted handshake as an error
  try {
    if (typeof node.terminate === "function") node.terminate();
    else sock.close();
  } catch {
    // already closed
  }
}

/** httpRefusal turns an HTTP error answer (status, body) into its protocol error. */
export function httpRefusal(status: number, body: string): BoxwireError {
  let code = "";
  let message = body.trim();
  try {
    const v = JSON.parse(body) as { error?: { code?: unknown; message?: unknown }; code?: unknown; message?: unknown };
    const e = v.error ?? v;
    if (typeof e.code === "string" && e.code !== "") {
      code = e.code;
      message = typeof e.message === "string" ? e.message : "";
    }
  } catch {
    // not JSON: keep the text
  }
  if (status === 401) return new UnauthorizedError("unauthorized", message || "missing or wrong bearer token", status);
  if (code === "") code = statusCodes[status] ?? `http_${status}`;
  return errorFromCode(code, message || `HTTP ${status}`, status);
}

/** Codes for statuses answered without a JSON error body. */
const statusCodes: Record<number, string> = {
  400: "bad_message",
  403: "not_allowed",
  404: "not_found",
  413: "too_large",
  502: "sandbox_unavailable",
  503: "sandbox_unavailable",
};

export function concat(chunks: Uint8Array[]): Uint8Array {
  let n = 0;
  for (const c of chunks) n += c.length;
  const out = new Uint8Array(n);
  let at = 0;
  for (const c of chunks) {
    out.set(c, at);
    at += c.length;
  }
  return out;
}
