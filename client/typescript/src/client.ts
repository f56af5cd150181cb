// Client: the bridge's HTTP API (threads, transcript, files) and the door
// to its WebSocket (connect). It holds the URL and the token; the token is
// never printed (it lives in a private field, and toJSON leaves it out).

import { Connection, type ConnectOptions } from "./connection.js";
import * as files from "./files.js";
import { threadPath } from "./paths.js";
import { httpRefusal, type WebSocketFactory } from "./socket.js";
import { decodeMessage, type Message, WS_PATH } from "./wire/messages.js";
import {
  CreateThread as CreateThreadCodec,
  ImageList as ImageListCodec,
  ThreadInfo as ThreadInfoCodec,
  ThreadList as ThreadListCodec,
  type CreateThread,
  type ImageList,
  type ThreadInfo,
  type TransferResult,
} from "./wire/payloads.js";

/** Where a Client connects when no url is given: a bridge on its default local port. */
export const DEFAULT_URL = "http://127.0.0.1:7420";

/** How a Client reaches its bridge. Every field is optional. */
export interface ClientOptions {
  /** The bridge: http(s)://host:port, ws(s)://host:port[/v1/ws] or host:port. Default DEFAULT_URL. */
  url?: string;
  /** The bridge's bearer token. */
  token?: string;
  /** The fetch to use (default: the global one). */
  fetch?: typeof fetch;
  /** Makes WebSockets (default: ws in Node, the global WebSocket in browsers). */
  webSocket?: WebSocketFactory;
}

/** Options of a call that may take long. */
export interface CallOptions {
  signal?: AbortSignal;
}

/** Client is a bridge's API. It keeps no connection open; safe for concurrent use. */
export class Client {
  /** The http(s) root of the bridge, e.g. http://127.0.0.1:7420. */
  readonly baseURL: string;
  /** The WebSocket endpoint, e.g. ws://127.0.0.1:7420/v1/ws. */
  readonly wsURL: string;
  readonly #token: string | undefined;
  readonly #fetch: typeof fetch;
  readonly #webSocket: WebSocketFactory | undefined;

  constructor(opts: ClientOptions = {}) {
    const { http, ws } = resolveURL(opts.url ?? DEFAULT_URL);
    this.baseURL = http;
    this.wsURL = ws;
    this.#token = opts.token || undefined;
    this.#fetch = opts.fetch ?? globalThis.fetch.bind(globalThis);
    this.#webSocket = opts.webSocket;
  }

  /** fromEnv makes a Client from BOXWIRE_URL and BOXWIRE_TOKEN (Node; pass env elsewhere). */
  static fromEnv(env: Record<string, string | undefined> = nodeEnv(), opts: Omit<ClientOptions, "url" | "token"> = {}): Client {
    return new Client({ ...opts, ...(env["BOXWIRE_URL"] ? { url: env["BOXWIRE_URL"] } : {}), ...(env["BOXWIRE_TOKEN"] ? { token: env["BOXWIRE_TOKEN"] } : {}) });
  }

  /** toJSON describes the client without its token. */
  toJSON(): { url: string; token: string } {
    return { url: this.baseURL, token: this.#token ? "[redacted]" : "" };
  }

  /**
   * createThread creates a thread and its sandbox (POST /v1/threads) and
   * resolves when its agent is ready. A refusal rejects: NotAllowedError for
   * an image, runtime, scope or egress the bridge does not allow,
   * SandboxLimitError, BadMessageError.
   */
  async createThread(req: CreateThread = {}, opts: CallOptions = {}): Promise<ThreadInfo> {
    const res = await this.fetch("POST", "/v1/threads", { json: CreateThreadCodec.encode(req), ...opts });
    return ThreadInfoCodec.decode(await res.json(), "thread");
  }

  /** getThread describes a thread; NotFoundError when there is none. */
  async getThread(id: string, opts: CallOptions = {}): Promise<ThreadInfo> {
    const res = await this.fetch("GET", threadPath(id), opts);
    return ThreadInfoCodec.decode(await res.json(), "thread");
  }

  /** listThreads lists the bridge's threads. */
  async listThreads(opts: CallOptions = {}): Promise<ThreadInfo[]> {
    const res = await this.fetch("GET", "/v1/threads", opts);
    return ThreadListCodec.decode(await res.json(), "threads").threads;
  }

  /** listImages lists the images createThread may name (GET /v1/images), the default first. */
  async listImages(opts: CallOptions = {}): Promise<ImageList> {
    const res = await this.fetch("GET", "/v1/images", opts);
    return ImageListCodec.decode(await res.json(), "images");
  }

  /** deleteThread removes a thread, its sandbox, log and workspace; NotFoundError when there is none. */
  async deleteThread(id: string, opts: CallOptions = {}): Promise<void> {
    const res = await this.fetch("DELETE", threadPath(id), opts);
    await res.arrayBuffer();
  }

  /** setEgress replaces a thread's own egress rules (an empty list removes them) and resolves with the thread. */
  async setEgress(id: string, rules: string[], opts: CallOptions = {}): Promise<ThreadInfo> {
    const res = await this.fetch("PATCH", threadPath(id), { json: { egress: rules }, ...opts });
    return ThreadInfoCodec.decode(await res.json(), "thread");
  }

  /** transcript returns a thread's logged events with seq > after (GET /v1/threads/{id}/events). */
  async transcript(id: string, opts: CallOptions & { after?: number } = {}): Promise<Message[]> {
    const res = await this.fetch("GET", `${threadPath(id)}/events`, { query: { after: String(opts.after ?? 0) }, ...opts });
    const text = await res.text();
    return text
      .split("\n")
      .filter((l) => l.trim() !== "")
      .map((l) => decodeMessage(l));
  }

  /**
   * connect opens a WebSocket bound to a thread: opts.thread to attach
   * (afterSeq to resume after the last event seen), or a new thread, made
   * with `create`'s settings when given.
   */
  async connect(opts: ConnectOptions & { create?: CreateThread } = {}): Promise<Connection> {
    let thread = opts.thread;
    if (!thread && opts.create) thread = (await this.createThread(opts.create, opts)).id;
    return Connection.open({ ...opts, ...(thread ? { thread } : {}), url: this.wsURL, token: this.#token, webSocket: this.#webSocket });
  }

  /**
   * fetch sends an authenticated request to the bridge and resolves with a
   * 2xx response; any other answer rejects with its protocol error
   * (UnauthorizedError for 401, NotFoundError, TooLargeError, …).
   */
  async fetch(method: string, path: string, o: FetchOptions = {}): Promise<Response> {
    const url = new URL(path, this.baseURL);
    for (const [k, v] of Object.entries(o.query ?? {})) url.searchParams.set(k, v);
    const headers: Record<string, string> = { ...(o.headers ?? {}) };
    if (this.#token) headers["Authorization"] = `Bearer ${this.#token}`;
    let body: BodyInit | undefined = o.body;
    if (o.json !== undefined) {
      headers["Content-Type"] = "application/json";
      body = JSON.stringify(o.json);
    }
    const init: RequestInit & { duplex?: "half" } = { method, headers, ...(body !== undefined ? { body } : {}), ...(o.signal ? { signal: o.signal } : {}) };
    if (typeof ReadableStream !== "undefined" && body instanceof ReadableStream) init.duplex = "half";
    const res = await this.#fetch(url, init);
    if (res.status < 200 || res.status > 299) throw httpRefusal(res.status, await res.text().catch(() => ""));
    return res;
  }

  /** uploadFile writes data as the one workspace file `path` (a raw upload). */
  uploadFile(thread: string, path: string, data: Uint8Array | string, opts: CallOptions = {}): Promise<TransferResult> {
    return files.uploadFile(this, thread, path, data, opts);
  }

  /** uploadFiles extracts entries (files, folders, relative links) into the workspace folder dir (created). */
  uploadFiles(thread: string, dir: string, entries: files.UploadEntry[], opts: CallOptions = {}): Promise<TransferResult> {
    return files.uploadFiles(this, thread, dir, entries, opts);
  }

  /** uploadTar sends a tar stream to be extracted into the workspace folder dir. */
  uploadTar(thread: string, dir: string, body: Uint8Array | ReadableStream<Uint8Array>, opts: CallOptions = {}): Promise<TransferResult> {
    return files.uploadTar(this, thread, dir, body, opts);
  }

  /** downloadFile resolves with one workspace file's bytes. */
  downloadFile(thread: string, path: string, opts: CallOptions = {}): Promise<Uint8Array> {
    return files.downloadFile(this, thread, path, opts);
  }

  /** download opens a workspace file or folder as a tar stream of entries. */
  download(thread: string, path: string, opts: CallOptions = {}): Promise<files.Download> {
    return files.download(this, thread, path, opts);
  }

  /** Internal (files): the token, for requests made without fetch. */
  authHeaders(): Record<string, string> {
    return this.#token ? { Authorization: `Bearer ${this.#token}` } : {};
  }
}

/** Options of Client.fetch. */
export interface FetchOptions extends CallOptions {
  query?: Record<string, string>;
  headers?: Record<string, string>;
  json?: unknown;
  body?: BodyInit;
}

/** resolveURL maps a bridge address to its http(s) root and WebSocket endpoint. */
export function resolveURL(raw: string): { http: string; ws: string } {
  let s = raw.trim();
  if (!s.includes("://")) s = "http://" + s;
  const u = new URL(s);
  switch (u.protocol) {
    case "http:":
    case "https:":
      break;
    case "ws:":
      u.protocol = "http:";
      break;
    case "wss:":
      u.protocol = "https:";
      break;
    default:
      throw new Error(`url ${JSON.stringify(raw)}: scheme ${u.protocol} is not http, https, ws or wss`);
  }
  const http = `${u.protocol}//${u.host}`;
  const wsPath = u.pathname === "" || u.pathname === "/" ? WS_PATH : u.pathname;
  return { http, ws: `${u.protocol === "https:" ? "wss:" : "ws:"}//${u.host}${wsPath}` };
}

function nodeEnv(): Record<string, string | undefined> {
  const p = (globalThis as { process?: { env?: Record<string, string | undefined> } }).process;
  return p?.env ?? {};
}
