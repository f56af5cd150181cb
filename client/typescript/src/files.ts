// File transfers over HTTP (docs/files.md): PUT and GET
// /v1/threads/{id}/files?path=P. Folders travel as tar streams, packed and
// parsed with tar-stream; one file may travel raw. A download's per-file
// failures come in the HTTP trailer Boxwire-Results, which fetch cannot
// read: in Node the download goes through node:http, which can.

import tar from "tar-stream";
import type { CallOptions, Client } from "./client.js";
import { threadPath } from "./paths.js";
import { httpRefusal } from "./socket.js";
import { TransferResult as TransferResultCodec, type TransferResult } from "./wire/payloads.js";

/** The trailer of a download that carries its TransferResult. */
export const RESULTS_TRAILER = "Boxwire-Results";

/** One entry to upload: a file (data), a folder (no data) or a relative symlink (linkname). */
export interface UploadEntry {
  /** The path inside the destination folder, with / separators. */
  path: string;
  /** A file's bytes (a string is UTF-8). */
  data?: Uint8Array | string;
  /** Set for a folder. */
  directory?: boolean;
  /** Set for a symlink: its target, which must stay inside the workspace. */
  linkname?: string;
  /** Permission bits; default 0644 for files, 0755 for folders. */
  mode?: number;
}

/** One downloaded entry. */
export interface DownloadEntry {
  path: string;
  type: "file" | "directory" | "symlink" | "other";
  mode: number;
  size: number;
  mtime: Date | undefined;
  linkname: string | undefined;
  /** A file's bytes (empty for others). */
  data: Uint8Array;
}

/** Options of a transfer. */
export type TransferOptions = CallOptions;

const utf8 = new TextEncoder();

function filesPath(thread: string): string {
  return `${threadPath(thread)}/files`;
}

/** uploadFile writes data as the one file `path` (raw upload) and resolves with the results. */
export async function uploadFile(c: Client, thread: string, path: string, data: Uint8Array | string, opts: TransferOptions = {}): Promise<TransferResult> {
  const body = typeof data === "string" ? utf8.encode(data) : data;
  const res = await c.fetch("PUT", filesPath(thread), { query: { path }, headers: { "Content-Type": "application/octet-stream" }, body: body as BodyInit, ...opts });
  return TransferResultCodec.decode(await res.json(), "result");
}

/** packEntries builds a tar stream of entries in memory. */
export async function packEntries(entries: UploadEntry[]): Promise<Uint8Array> {
  const pack = tar.pack();
  const chunks: Uint8Array[] = [];
  const collected = (async () => {
    for await (const c of pack) chunks.push(c as Uint8Array);
  })();
  for (const e of entries) {
    await new Promise<void>((resolve, reject) => {
      const cb = (err?: Error | null) => (err ? reject(err) : resolve());
      if (e.directory) pack.entry({ name: e.path, type: "directory", mode: e.mode ?? 0o755 }, cb);
      else if (e.linkname !== undefined) pack.entry({ name: e.path, type: "symlink", linkname: e.linkname, mode: e.mode ?? 0o777 }, cb);
      else {
        const data = typeof e.data === "string" ? utf8.encode(e.data) : (e.data ?? new Uint8Array());
        pack.entry({ name: e.path, type: "file", mode: e.mode ?? 0o644, size: data.length }, data as Buffer, cb);
      }
    });
  }
  pack.finalize();
  await collected;
  const out = new Uint8Array(chunks.reduce((n, c) => n + c.length, 0));
  let at = 0;
  for (const c of chunks) {
    out.set(c, at);
    at += c.length;
  }
  return out;
}

/**
 * uploadFiles extracts entries into the workspace folder dir (created) and
 * resolves with every entry's result; an entry refused by the agent (e.g.
 * a name leaving dir) is listed with its code, the others go on.
 */
export async function uploadFiles(c: Client, thread: string, dir: string, entries: UploadEntry[], opts: TransferOptions = {}): Promise<TransferResult> {
  return uploadTar(c, thread, dir, await packEntries(entries), opts);
}

/** uploadTar sends a tar stream to be extracted into the folder dir. */
export async function uploadTar(c: Client, thread: string, dir: string, body: Uint8Array | ReadableStream<Uint8Array>, opts: TransferOptions = {}): Promise<TransferResult> {
  const res = await c.fetch("PUT", filesPath(thread), { query: { path: dir }, headers: { "Content-Type": "application/x-tar" }, body: body as BodyInit, ...opts });
  return TransferResultCodec.decode(await res.json(), "result");
}

/** downloadFile resolves with the bytes of one file (raw download); IsDirectoryError for a folder. */
export async function downloadFile(c: Client, thread: string, path: string, opts: TransferOptions = {}): Promise<Uint8Array> {
  const res = await c.fetch("GET", filesPath(thread), { query: { path, format: "raw" }, ...opts });
  return new Uint8Array(await res.arrayBuffer());
}

/** An open tar download: read entries() to the end, then result() has the failures. */
export interface Download {
  /** entries yields the download's entries, named from the path's base name (none for the workspace root). */
  entries(): AsyncGenerator<DownloadEntry, void, undefined>;
  /** result is the trailer's TransferResult (failures only) once entries() ended; undefined where trailers cannot be read (browsers). */
  result(): TransferResult | undefined;
}

/**
 * download asks for path (file or folder) as a tar stream. It resolves
 * when the answer's headers arrive; refusals reject: FileNotFoundError,
 * PermissionDeniedError, InvalidPathError, NotFoundError (thread).
 */
export async function download(c: Client, thread: string, path: string, opts: TransferOptions = {}): Promise<Download> {
  const url = new URL(filesPath(thread), c.baseURL);
  url.searchParams.set("path", path);
  const body = isNode() ? await nodeGet(url, c.authHeaders(), opts.signal) : await webGet(c, thread, path, opts);
  let result: TransferResult | undefined;
  return {
    async *entries() {
      yield* tarEntries(body.chunks);
      const raw = body.trailer();
      if (raw) result = TransferResultCodec.decode(JSON.parse(raw), "trailer");
      else if (isNode()) result = { files: [], count: 0, bytes: 0, failed: 0 };
    },
    result: () => result,
  };
}

interface Body {
  chunks: AsyncIterable<Uint8Array>;
  trailer(): string | undefined;
}

async function webGet(c: Client, thread: string, path: string, opts: TransferOptions): Promise<Body> {
  const res = await c.fetch("GET", filesPath(thread), { query: { path }, ...opts });
  const rs = res.body;
  return { chunks: rs ? readerChunks(rs) : (async function* () {})(), trailer: () => undefined };
}

async function* readerChunks(rs: ReadableStream<Uint8Array>): AsyncGenerator<Uint8Array> {
  const reader = rs.getReader();
  try {
    for (;;) {
      const { value, done } = await reader.read();
      if (done) return;
      yield value;
    }
  } finally {
    reader.releaseLock();
  }
}

async function nodeGet(url: URL, headers: Record<string, string>, signal: AbortSignal | undefined): Promise<Body> {
  const mod = url.protocol === "https:" ? await import("node:https") : await import("node:http");
  const res = await new Promise<import("node:http").IncomingMessage>((resolve, reject) => {
    const req = mod.request(url, { method: "GET", headers, ...(signal ? { signal } : {}) }, resolve);
    req.on("error", reject);
    req.end();
  });
  const status = res.statusCode ?? 0;
  if (status < 200 || status > 299) {
    let text = "";
    for await (const c of res) text += String(c);
    throw httpRefusal(status, text);
  }
  return {
    chunks: res as AsyncIterable<Uint8Array>,
    trailer: () => {
      const v = res.trailers[RESULTS_TRAILER.toLowerCase()];
      return typeof v === "string" && v !== "" ? v : undefined;
    },
  };
}

/** tarEntries parses a tar stream into entries, each file's bytes read whole. */
async function* tarEntries(chunks: AsyncIterable<Uint8Array>): AsyncGenerator<DownloadEntry, void, undefined> {
  const extract = tar.extract();
  const feeding = (async () => {
    try {
      for await (const c of chunks) {
        if (!extract.write(c)) await new Promise<void>((r) => extract.once("drain", () => r()));
      }
      extract.end(() => {});
    } catch (err) {
      extract.destroy(err as Error);
    }
  })();
  for await (const entry of extract) {
    const parts: Uint8Array[] = [];
    for await (const c of entry) parts.push(c as Uint8Array);
    const h = entry.header;
    const data = new Uint8Array(parts.reduce((n, c) => n + c.length, 0));
    let at = 0;
    for (const p of parts) {
      data.set(p, at);
      at += p.length;
    }
    const type = h.type === "file" || h.type === "directory" || h.type === "symlink" ? h.type : "other";
    yield { path: h.name, type, mode: h.mode ?? 0, size: h.size ?? data.length, mtime: h.mtime, linkname: h.linkname ?? undefined, data };
  }
  await feeding;
}

function isNode(): boolean {
  return (globalThis as { process?: { versions?: { node?: string } } }).process?.versions?.node !== undefined;
}
