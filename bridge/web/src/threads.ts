// The thread list: each thread with its sandbox state (running,
// replaced, exited, suspended), what it runs and its confinement posture,
// kept up to date by itself: it asks the bridge again every few seconds
// and at once when the attached thread's sandbox exits or is replaced
// (docs/web.md). It renders again only when something shown changed, so
// a button is not swapped under the pointer.

import type { Posture, ThreadInfo } from "../../../client/typescript/src/wire/payloads.js";
import type { Api } from "./api.js";
import { button, byId, h } from "./dom.js";

/** How often the list asks the bridge again. */
const POLL_MS = 3000;

/** What the list does for its buttons. */
export interface ThreadActions {
  attach(id: string): Promise<void>;
  remove(id: string): Promise<void>;
  /** current is the attached thread, if any. */
  current(): string | null;
}

/** ThreadList shows the caller's threads in #threads. */
export class ThreadList {
  readonly #api: Api;
  readonly #act: ThreadActions;
  /** The sandbox each thread was last seen on. */
  readonly #sandboxes = new Map<string, string>();
  /** Threads seen to move to another sandbox, with why. */
  readonly #replaced = new Map<string, string>();
  #shown = "";
  #running: Promise<void> = Promise.resolve();
  #timer: ReturnType<typeof setInterval> | undefined;

  constructor(api: Api, act: ThreadActions) {
    this.#api = api;
    this.#act = act;
  }

  /** start shows the list and keeps it up to date until stop. */
  async start(): Promise<void> {
    await this.refresh();
    this.#timer = setInterval(() => {
      if (!document.hidden) this.refresh().catch(() => {});
    }, POLL_MS);
  }

  stop(): void {
    clearInterval(this.#timer);
  }

  /** refresh asks the bridge for the list now (one request at a time). */
  refresh(): Promise<void> {
    const next = this.#running.catch(() => {}).then(() => this.#load());
    this.#running = next;
    return next;
  }

  /** sandboxEvent is a sandbox_exited or sandbox_replaced (by sandbox) of thread id. */
  sandboxEvent(id: string, type: string, message: string, sandbox: string): void {
    if (type === "sandbox_replaced") {
      this.#replaced.set(id, message);
      this.#sandboxes.set(id, sandbox); // said already: the list's new id is no news
    }
    this.refresh().catch(() => {});
  }

  async #load(): Promise<void> {
    const threads = await this.#api.threads();
    for (const t of threads) {
      const before = this.#sandboxes.get(t.id);
      if (before !== undefined && t.sandbox_id !== "" && before !== t.sandbox_id) {
        this.#replaced.set(t.id, `sandbox ${short(before) || "none"} replaced by ${short(t.sandbox_id)}`);
      }
      if (t.status !== "running") this.#replaced.delete(t.id);
      this.#sandboxes.set(t.id, t.sandbox_id);
    }
    const cur = this.#act.current();
    const rows = threads.map((t) => ({ t, state: this.#replaced.has(t.id) ? "replaced" : t.status, why: this.#replaced.get(t.id) ?? "" }));
    const shown = JSON.stringify([cur, rows]);
    if (shown === this.#shown) return;
    this.#shown = shown;
    byId("threads").replaceChildren(...rows.map(({ t, state, why }) => this.#row(t, state, why, cur === t.id)));
  }

  #row(t: ThreadInfo, state: string, why: string, current: boolean): HTMLElement {
    return h(
      "li",
      { "data-thread": t.id, "data-status": t.status, "data-state": state, "data-sandbox": t.sandbox_id, class: current ? "current" : "" },
      h("span", { class: "thread-id" }, t.id),
      " ",
      h("span", { class: "sandbox-state", "data-state": state, ...(why ? { title: why } : {}) }, state),
      h("div", { class: "thread-state" }, stateText(t)),
      h("div", { class: "thread-posture", "data-reported": t.posture ? "yes" : "no" }, postureText(t.posture)),
      button("Attach", { class: "attach" }, () => this.#act.attach(t.id)),
      h("a", { class: "export", href: `/v1/threads/${encodeURIComponent(t.id)}/events`, download: `${t.id}.jsonl` }, "Export"),
      button("Delete", { class: "delete" }, () => this.#act.remove(t.id)),
    );
  }
}

function short(id: string): string {
  return id.slice(0, 12);
}

/** stateText is what a thread runs, as the list shows it. */
function stateText(t: ThreadInfo): string {
  const parts = [t.status, t.image];
  if (t.image_id) parts.push(t.image_id.replace(/^sha256:/, "").slice(0, 12));
  if (t.agent_version) parts.push(`agent ${t.agent_version}`);
  parts.push(t.runtime ? `runtime ${t.runtime}` : "default runtime");
  if (t.egress?.length) parts.push(`egress ${t.egress.join(" ")}`);
  if (t.owner) parts.push(`owner ${t.owner}`);
  if (t.suspended) parts.push(`suspended ${t.suspended}`);
  return parts.join(" · ");
}

const SECCOMP = ["seccomp off", "seccomp strict", "seccomp filter"];

/** postureText is what the sandbox's agent found about its confinement. */
export function postureText(p: Posture | undefined): string {
  if (!p) return "posture: not reported (no agent answered yet)";
  const parts = [p.uid === 0 ? "root (uid 0)" : `uid ${p.uid}`];
  parts.push(/^0*$/.test(p.cap_eff) ? "no capabilities" : `capabilities ${p.cap_eff}`);
  parts.push(p.no_new_privs ? "no_new_privs" : "new privileges allowed");
  parts.push(SECCOMP[p.seccomp] ?? `seccomp mode ${p.seccomp}`);
  parts.push(p.read_only_root ? "read-only root" : "writable root");
  parts.push(p.pids_max ? `pids ${p.pids_max}` : "no pids limit");
  parts.push(p.memory_max_bytes ? `memory ${mib(p.memory_max_bytes)}` : "no memory limit");
  if (p.cpu_quota) parts.push(`${p.cpu_quota} CPU${p.cpu_quota === 1 ? "" : "s"}`);
  if (p.errors?.length) parts.push(`unread: ${p.errors.join("; ")}`);
  return `posture: ${parts.join(" · ")}`;
}

function mib(n: number): string {
  return n >= 1 << 30 && n % (1 << 30) === 0 ? `${n / (1 << 30)} GiB` : `${Math.round(n / (1 << 20))} MiB`;
}
