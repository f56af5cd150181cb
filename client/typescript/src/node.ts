// boxwire/node: copy local files and folders in and out of a thread's
// workspace (Node only; the main entry works in browsers too).

import { lstat, mkdir, readdir, readFile, readlink, symlink, writeFile } from "node:fs/promises";
import { basename, dirname, isAbsolute, join, relative, resolve, sep } from "node:path";
import type { Client } from "./client.js";
import type { UploadEntry } from "./files.js";
import type { TransferResult } from "./wire/payloads.js";

/**
 * uploadPath copies the local file or folder `local` into the workspace
 * folder `dest` (as `client cp LOCAL THREAD:DEST`): a folder arrives as
 * dest/<its name>/…, a file as dest/<its name>. Links are sent as links.
 * The tar stream is built in memory.
 */
export async function uploadPath(c: Client, thread: string, local: string, dest: string): Promise<TransferResult> {
  const entries: UploadEntry[] = [];
  await collect(resolve(local), basename(resolve(local)), entries);
  return c.uploadFiles(thread, dest, entries);
}

async function collect(abs: string, name: string, out: UploadEntry[]): Promise<void> {
  const st = await lstat(abs);
  const mode = st.mode & 0o7777;
  if (st.isSymbolicLink()) {
    out.push({ path: name, linkname: await readlink(abs), mode });
  } else if (st.isDirectory()) {
    out.push({ path: name, directory: true, mode });
    for (const child of (await readdir(abs)).sort()) await collect(join(abs, child), `${name}/${child}`, out);
  } else if (st.isFile()) {
    out.push({ path: name, data: await readFile(abs), mode });
  }
}

/**
 * downloadTo copies the workspace file or folder `path` into the local
 * folder `localDir` (created), as `client cp THREAD:PATH LOCAL`, and
 * resolves with the download's results (failures listed). An entry that
 * would land outside localDir is refused.
 */
export async function downloadTo(c: Client, thread: string, path: string, localDir: string): Promise<TransferResult> {
  const root = resolve(localDir);
  await mkdir(root, { recursive: true });
  const dl = await c.download(thread, path);
  for await (const e of dl.entries()) {
    const target = resolve(root, e.path);
    const rel = relative(root, target);
    if (rel.startsWith("..") || isAbsolute(rel) || rel.split(sep).includes("..")) {
      throw new Error(`download entry ${JSON.stringify(e.path)} leaves ${root}`);
    }
    if (e.type === "directory") {
      await mkdir(target, { recursive: true, mode: e.mode || 0o755 });
    } else if (e.type === "symlink" && e.linkname !== undefined) {
      await mkdir(dirname(target), { recursive: true });
      await symlink(e.linkname, target);
    } else if (e.type === "file") {
      await mkdir(dirname(target), { recursive: true });
      await writeFile(target, e.data, { mode: e.mode || 0o644 });
    }
  }
  return dl.result() ?? { files: [], count: 0, bytes: 0, failed: 0 };
}
