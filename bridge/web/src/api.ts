// The bridge's HTTP API as the page uses it: login and logout (the session
// cookie, docs/web.md), and the threads, each state-changing call with the
// session's CSRF token. The cookie itself is HttpOnly: the page never
// sees it; GET /v1/login tells it who it is after a reload.

import {
  ImageList as ImageListCodec,
  ThreadInfo as ThreadInfoCodec,
  ThreadList as ThreadListCodec,
  type CreateThread,
  type ImageList,
  type ThreadInfo,
} from "../../../client/typescript/src/wire/payloads.js";
import { httpRefusal } from "../../../client/typescript/src/socket.js";

export const CSRF_HEADER = "X-Boxwire-CSRF";

/** Who the page is logged in as. */
export interface Login {
  user: string;
  admin: boolean;
  via: string;
  csrf: string;
  expires: string;
}

/** Api calls the page's own origin; one per login. */
export class Api {
  constructor(readonly login: Login) {}

  async #call(method: string, path: string, json?: unknown): Promise<Response> {
    const headers: Record<string, string> = { [CSRF_HEADER]: this.login.csrf };
    if (json !== undefined) headers["Content-Type"] = "application/json";
    const res = await fetch(path, {
      method,
      headers,
      credentials: "same-origin",
      ...(json !== undefined ? { body: JSON.stringify(json) } : {}),
    });
    if (!res.ok) throw httpRefusal(res.status, await res.text().catch(() => ""));
    return res;
  }

  async threads(): Promise<ThreadInfo[]> {
    const res = await this.#call("GET", "/v1/threads");
    return ThreadListCodec.decode(await res.json(), "threads").threads;
  }

  /** images are the images a new thread may ask for, the default first (GET /v1/images). */
  async images(): Promise<ImageList> {
    const res = await this.#call("GET", "/v1/images");
    return ImageListCodec.decode(await res.json(), "images");
  }

  /** createThread makes a thread and its sandbox with opts (image, egress, policy…). */
  async createThread(opts: CreateThread = {}): Promise<ThreadInfo> {
    const res = await this.#call("POST", "/v1/threads", opts);
    return ThreadInfoCodec.decode(await res.json(), "thread");
  }

  async deleteThread(id: string): Promise<void> {
    await this.#call("DELETE", `/v1/threads/${encodeURIComponent(id)}`);
  }

  async logout(): Promise<void> {
    await this.#call("POST", "/v1/logout");
  }
}

/** login exchanges key for the session cookie. */
export async function login(key: string): Promise<Api> {
  const res = await fetch("/v1/login", {
    method: "POST",
    headers: { "Content-Type": "application/json" },
    credentials: "same-origin",
    body: JSON.stringify({ key }),
  });
  if (!res.ok) throw httpRefusal(res.status, await res.text().catch(() => ""));
  return new Api((await res.json()) as Login);
}

/** loginOptions says how the page may log in besides a key: oidc is the issuer of its OIDC sign-in. */
export async function loginOptions(): Promise<{ oidc?: string }> {
  const res = await fetch("/v1/login/options", { credentials: "same-origin" });
  return res.ok ? ((await res.json()) as { oidc?: string }) : {};
}

/** resume returns the session the cookie holds, or null when logged out. */
export async function resume(): Promise<Api | null> {
  const res = await fetch("/v1/login", { credentials: "same-origin" });
  if (!res.ok) return null;
  return new Api((await res.json()) as Login);
}
