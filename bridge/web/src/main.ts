// The page: login, the thread list (create with image, egress and policy
// choices, attach, delete, export, each thread's sandbox state), and the
// attached thread: its chat, terminals and files, kept connected by Live
// (docs/web.md). The attached thread is in the address (#thread=ID), so a
// reload comes back to it, its chat replayed and its terminals reattached.

import "@xterm/xterm/css/xterm.css";
import "./app.css";
import type { Connection } from "../../../client/typescript/src/connection.js";
import type { JSONObject } from "../../../client/typescript/src/wire/codec.js";
import type { ThreadInfo } from "../../../client/typescript/src/wire/payloads.js";
import { Api, login, loginOptions, resume } from "./api.js";
import { Chat } from "./chat.js";
import { button, byId, h, showStatus } from "./dom.js";
import { Files, FILES_ID } from "./files.js";
import { Live } from "./live.js";
import { Terminals } from "./term.js";

const wsURL = `${location.protocol === "https:" ? "wss:" : "ws:"}//${location.host}/v1/ws`;

/** The attached thread: its live connection, chat, terminals and files. */
interface Attached {
  live: Live;
  chat: Chat;
  terminals: Terminals;
  files: Files;
}

let api: Api | null = null;
let attached: Attached | null = null;

function message(err: unknown): string {
  return err instanceof Error ? err.message : String(err);
}

async function start(): Promise<void> {
  byId<HTMLFormElement>("login-form").addEventListener("submit", (ev) => {
    ev.preventDefault();
    const key = byId<HTMLInputElement>("key");
    login(key.value)
      .then((a) => {
        key.value = "";
        return enter(a);
      })
      .catch((err: unknown) => showStatus(`login: ${message(err)}`));
  });
  const failed = /^#login_error=(.*)$/.exec(location.hash)?.[1];
  if (failed) {
    showStatus(`sign-in: ${decodeURIComponent(failed.replace(/\+/g, " "))}`);
    history.replaceState(null, "", "/");
  }
  const a = await resume();
  if (a) {
    await enter(a);
    return;
  }
  const opts = await loginOptions();
  if (opts.oidc) {
    const link = byId<HTMLAnchorElement>("oidc-login");
    link.textContent = `Sign in with ${new URL(opts.oidc).host}`;
    link.hidden = false;
  }
}

async function enter(a: Api): Promise<void> {
  api = a;
  byId("login").hidden = true;
  byId("main").hidden = false;
  byId("who").textContent = `${a.login.user}${a.login.admin ? " (admin)" : ""}`;
  byId<HTMLFormElement>("new-thread-form").onsubmit = (ev) => {
    ev.preventDefault();
    void newThread(a).catch((err: unknown) => showStatus(`new thread: ${message(err)}`));
  };
  byId("thread-tools").replaceChildren(
    button("Refresh", { id: "refresh" }, () => refresh()),
    button("Log out", { id: "logout" }, async () => {
      await detach();
      await a.logout();
      location.hash = "";
      location.reload();
    }),
  );
  await refresh();
  showStatus("");
  const want = /^#thread=(.+)$/.exec(location.hash)?.[1];
  if (want) await attach(decodeURIComponent(want)).catch((err: unknown) => showStatus(`attach: ${message(err)}`));
}

async function newThread(a: Api): Promise<void> {
  const image = byId<HTMLInputElement>("new-image").value.trim();
  const egress = byId<HTMLInputElement>("new-egress").value.split(/[\s,]+/).filter((r) => r !== "");
  const policyText = byId<HTMLTextAreaElement>("new-policy").value.trim();
  let policy: JSONObject | undefined;
  try {
    policy = policyText ? (JSON.parse(policyText) as JSONObject) : undefined;
  } catch (err) {
    throw new Error(`the policy is not JSON: ${message(err)}`);
  }
  showStatus("starting a sandbox…");
  const t = await a.createThread({ ...(image ? { image } : {}), ...(egress.length ? { egress } : {}), ...(policy ? { policy } : {}) });
  await refresh();
  await attach(t.id);
}

/** stateText is a thread's sandbox state as the list shows it. */
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

async function refresh(): Promise<void> {
  if (!api) return;
  const threads = await api.threads();
  byId("threads").replaceChildren(
    ...threads.map((t) =>
      h(
        "li",
        { "data-thread": t.id, "data-status": t.status, class: attached?.live.thread === t.id ? "current" : "" },
        h("span", { class: "thread-id" }, t.id),
        h("div", { class: "thread-state" }, stateText(t)),
        button("Attach", { class: "attach" }, () => attach(t.id)),
        h("a", { class: "export", href: `/v1/threads/${encodeURIComponent(t.id)}/events`, download: `${t.id}.jsonl` }, "Export"),
        button("Delete", { class: "delete" }, async () => {
          if (attached?.live.thread === t.id) {
            await detach();
            history.replaceState(null, "", "/");
          }
          await api?.deleteThread(t.id);
          await refresh();
        }),
      ),
    ),
  );
}

async function detach(): Promise<void> {
  const cur = attached;
  if (!cur) return;
  attached = null;
  cur.terminals.dispose();
  await cur.live.close();
  byId("thread").hidden = true;
}

async function attach(id: string): Promise<void> {
  await detach();
  if (!api) return;
  showStatus(`attaching ${id}…`);
  location.hash = `thread=${encodeURIComponent(id)}`;
  const log = byId("chat-log");
  log.replaceChildren();
  byId("terminal-tabs").replaceChildren();
  byId("terminals").replaceChildren();
  byId("thread-title").textContent = id;
  const chat = new Chat(log);
  const terminals = new Terminals(byId("terminal-tabs"), byId("terminals"));
  const files = new Files(byId("files"), id, api.login.csrf);
  const conn = byId("conn-state");
  const stop = byId<HTMLButtonElement>("stop");
  chat.onTurn = (running) => (stop.disabled = !running);
  chat.onSandbox = () => void refresh().catch(() => {});
  stop.disabled = true;
  const live = new Live(wsURL, id, {
    event: (msg) => (msg.id?.startsWith(FILES_ID) ? files.event(msg) : chat.show(msg)),
    connected: async (c: Connection, again: boolean) => {
      chat.use(c);
      files.use(c);
      await terminals.attach(c).catch((err: unknown) => showStatus(`terminals: ${message(err)}`));
      if (!again) await files.go("").catch((err: unknown) => showStatus(`files: ${message(err)}`));
      else await refresh().catch(() => {});
    },
    state: (text) => {
      conn.textContent = text;
      conn.dataset["state"] = text.split(":")[0] ?? text;
      if (text !== "connected") {
        chat.use(null);
        files.use(null);
      }
    },
  });
  const cur: Attached = { live, chat, terminals, files };
  attached = cur;
  byId("thread").hidden = false;
  stop.onclick = () => chat.stop();
  byId<HTMLFormElement>("chat-form").onsubmit = (ev) => {
    ev.preventDefault();
    const input = byId<HTMLTextAreaElement>("chat-input");
    if (input.value.trim() === "") return;
    try {
      chat.send(input.value);
      input.value = "";
    } catch (err) {
      showStatus(message(err));
    }
  };
  byId<HTMLButtonElement>("open-terminal").onclick = () => {
    terminals.openNew().catch((err: unknown) => showStatus(`terminal: ${message(err)}`));
  };
  await live.open();
  showStatus("");
  await refresh();
}

start().catch((err: unknown) => showStatus(String(err)));
