// The file browser on /workspace: lists a folder (the ls tool, run on the
// thread's connection outside the conversation), downloads files and
// folders (GET …/files: a file's bytes, a folder as a tar stream) and
// uploads picked or dropped files (PUT …/files, one request a file so
// each has its own progress bar and its own error), docs/files.md.

import type { Connection } from "../../../client/typescript/src/connection.js";
import type { Message } from "../../../client/typescript/src/wire/messages.js";
import { CSRF_HEADER } from "./api.js";
import { button, h, showStatus } from "./dom.js";

/** Requests of the file browser carry ids with this prefix; their events are not the chat's. */
export const FILES_ID = "fb-";

/** One entry of a listing. */
export interface Entry {
  kind: string;
  size: string;
  mtime: string;
  name: string;
}

/** parseLs reads the ls tool's `type⇥size⇥mtime⇥name` lines. */
export function parseLs(output: string): Entry[] {
  const out: Entry[] = [];
  for (const line of output.split("\n")) {
    const [kind, size, mtime, ...rest] = line.split("\t");
    if (kind === undefined || size === undefined || mtime === undefined || rest.length === 0) continue;
    out.push({ kind, size, mtime, name: rest.join("\t").replace(/\/$/, "") });
  }
  return out;
}

/** A file to upload and the folder (under the current one) it goes into. */
interface Pick {
  file: File;
  dir: string;
}

export class Files {
  readonly #root: HTMLElement;
  readonly #thread: string;
  readonly #csrf: string;
  #conn: Connection | null = null;
  #dir = "";
  #next = 0;
  readonly #waiting = new Map<string, { output: string; done(out: string, err?: string): void }>();
  readonly #list: HTMLElement;
  readonly #path: HTMLElement;
  readonly #uploads: HTMLElement;

  constructor(root: HTMLElement, thread: string, csrf: string) {
    this.#root = root;
    this.#thread = thread;
    this.#csrf = csrf;
    const picker = h("input", { type: "file", multiple: "", id: "file-pick", "aria-label": "upload files" });
    picker.addEventListener("change", () => {
      const files = [...(picker.files ?? [])].map((file) => ({ file, dir: "" }));
      picker.value = "";
      void this.upload(files);
    });
    this.#path = h("span", { class: "files-path" });
    this.#list = h("table", { class: "files-list" });
    this.#uploads = h("ul", { class: "uploads" });
    root.replaceChildren(
      h("div", { class: "files-bar" }, button("Up", { class: "files-up" }, () => this.go(parentOf(this.#dir))), this.#path,
        button("Refresh", { class: "files-refresh" }, () => this.refresh()), h("label", { class: "files-pick" }, "Upload ", picker)),
      h("div", { class: "drop-zone", id: "drop-zone" }, "drop files or folders here to upload them into this folder"),
      this.#list,
      this.#uploads,
    );
    root.addEventListener("dragover", (ev) => {
      ev.preventDefault();
      root.classList.add("dragging");
    });
    root.addEventListener("dragleave", () => root.classList.remove("dragging"));
    root.addEventListener("drop", (ev) => {
      ev.preventDefault();
      root.classList.remove("dragging");
      if (ev.dataTransfer) void dropped(ev.dataTransfer).then((picks) => this.upload(picks));
    });
  }

  /** use lists over conn from now on (the thread's connection after a reconnect). */
  use(conn: Connection | null): void {
    this.#conn = conn;
    if (!conn) for (const w of this.#waiting.values()) w.done("", "connection lost");
  }

  /** event takes the events of the browser's own requests (their id starts with FILES_ID). */
  event(msg: Message): void {
    const w = msg.id ? this.#waiting.get(msg.id) : undefined;
    if (!w) return;
    if (msg.type === "tool_output") w.output += msg.data.output;
    if (msg.type === "tool_result") {
      this.#waiting.delete(msg.id ?? "");
      w.done(msg.data.output || w.output, msg.data.error || (msg.data.status && msg.data.status !== "exited" ? msg.data.status : undefined));
    }
    if (msg.type === "error") {
      this.#waiting.delete(msg.id ?? "");
      w.done("", `${msg.data.code}: ${msg.data.message}`);
    }
  }

  #ls(path: string): Promise<string> {
    const conn = this.#conn;
    if (!conn) return Promise.reject(new Error("not connected: reconnecting…"));
    const id = `${FILES_ID}${Date.now().toString(36)}-${++this.#next}`;
    return new Promise((resolve, reject) => {
      this.#waiting.set(id, { output: "", done: (out, err) => (err ? reject(new Error(err)) : resolve(out)) });
      conn.send({ type: "run_tool", id, data: { name: "ls", arguments: { path: path === "" ? "." : path } } });
    });
  }

  /** go lists folder dir (relative to /workspace). */
  async go(dir: string): Promise<void> {
    this.#dir = dir;
    await this.refresh();
  }

  async refresh(): Promise<void> {
    const dir = this.#dir;
    this.#path.textContent = `/workspace/${dir}`;
    this.#root.dataset["dir"] = dir;
    const out = await this.#ls(dir);
    if (dir !== this.#dir) return;
    const rows = parseLs(out).map((e) => this.#row(e));
    this.#list.replaceChildren(h("tr", {}, h("th", {}, "name"), h("th", {}, "size"), h("th", {}, "modified"), h("th", {}, "")), ...rows);
    this.#root.dataset["listed"] = String(Number(this.#root.dataset["listed"] ?? "0") + 1);
  }

  #row(e: Entry): HTMLElement {
    const path = join(this.#dir, e.name.replace(/ -> .*$/, ""));
    const isDir = e.kind === "dir";
    const name = isDir ? button(`${e.name}/`, { class: "files-dir" }, () => this.go(path)) : h("span", {}, e.name);
    const url = `/v1/threads/${encodeURIComponent(this.#thread)}/files?path=${encodeURIComponent(path)}${isDir ? "" : "&format=raw"}`;
    const base = path.split("/").pop() ?? path;
    const dl = h("a", { href: url, download: isDir ? `${base}.tar` : base, class: "download" }, isDir ? "Download .tar" : "Download");
    return h("tr", { "data-name": e.name, "data-kind": e.kind }, h("td", {}, name), h("td", {}, e.size), h("td", {}, e.mtime), h("td", {}, dl));
  }

  /** upload sends each pick into the current folder, each with its progress and its own error. */
  async upload(picks: Pick[]): Promise<void> {
    const dir = this.#dir;
    await Promise.all(picks.map((p) => this.#one(p, dir)));
    await this.refresh().catch((err: unknown) => showStatus(`files: ${err instanceof Error ? err.message : String(err)}`));
  }

  #one(p: Pick, dir: string): Promise<void> {
    const path = join(join(dir, p.dir), p.file.name);
    const bar = h("progress", { max: String(Math.max(p.file.size, 1)), value: "0" });
    const status = h("span", { class: "upload-status" }, "uploading…");
    const row = h("li", { class: "upload", "data-path": path, "data-state": "uploading" }, h("span", { class: "upload-name" }, path), " ", bar, " ", status);
    this.#uploads.append(row);
    return new Promise((resolve) => {
      const xhr = new XMLHttpRequest();
      xhr.open("PUT", `/v1/threads/${encodeURIComponent(this.#thread)}/files?path=${encodeURIComponent(path)}`);
      xhr.setRequestHeader(CSRF_HEADER, this.#csrf);
      xhr.setRequestHeader("Content-Type", "application/octet-stream");
      let events = 0;
      xhr.upload.onprogress = (ev) => {
        events++;
        bar.value = ev.loaded;
        row.dataset["progress"] = String(events);
        status.textContent = `${Math.floor((100 * ev.loaded) / Math.max(ev.total || p.file.size, 1))}%`;
      };
      const finish = (ok: boolean, text: string) => {
        row.dataset["state"] = ok ? "done" : "failed";
        status.textContent = text;
        if (ok) bar.value = Math.max(p.file.size, 1);
        resolve();
      };
      xhr.onload = () => {
        const why = failure(xhr.status, xhr.responseText);
        finish(why === "", why || `done (${p.file.size} bytes)`);
      };
      xhr.onerror = () => finish(false, "error: the connection failed");
      xhr.send(p.file);
    });
  }
}

/** failure is why an upload's answer is not a success ("" when it is). */
function failure(status: number, body: string): string {
  let parsed: unknown;
  try {
    parsed = JSON.parse(body);
  } catch {
    parsed = null;
  }
  const o = (parsed ?? {}) as { error?: { code?: string; message?: string }; failed?: number; files?: { code?: string; message?: string }[] };
  if (status < 200 || status > 299) return `error: ${o.error?.code ?? status}: ${o.error?.message ?? body.slice(0, 200)}`;
  const bad = o.files?.find((f) => f.code);
  if ((o.failed ?? 0) > 0 || bad) return `error: ${bad?.code ?? "failed"}: ${bad?.message ?? ""}`;
  return "";
}

/** dropped lists the files of a drop, walking dropped folders. */
async function dropped(dt: DataTransfer): Promise<Pick[]> {
  const entries = [...dt.items].map((i) => i.webkitGetAsEntry?.()).filter((e): e is FileSystemEntry => !!e);
  if (entries.length === 0) return [...dt.files].map((file) => ({ file, dir: "" }));
  const out: Pick[] = [];
  const walk = async (e: FileSystemEntry, dir: string): Promise<void> => {
    if (e.isFile) {
      const file = await new Promise<File>((res, rej) => (e as FileSystemFileEntry).file(res, rej));
      out.push({ file, dir });
      return;
    }
    const reader = (e as FileSystemDirectoryEntry).createReader();
    for (;;) {
      const batch = await new Promise<FileSystemEntry[]>((res, rej) => reader.readEntries(res, rej));
      if (batch.length === 0) break;
      for (const c of batch) await walk(c, join(dir, e.name));
    }
  };
  for (const e of entries) await walk(e, "");
  return out;
}

function join(a: string, b: string): string {
  return [a, b].filter((x) => x !== "").join("/");
}

function parentOf(dir: string): string {
  return dir.split("/").slice(0, -1).join("/");
}
