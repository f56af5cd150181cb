// The page: login, the thread list (create with image, egress and policy
// choices, attach, delete, export, each thread's sandbox state), and the
// attached thread: its chat, terminals and files, kept connected by Live
// (docs/web.md). The attached thread is in the address (#thread=ID), so a
// reload comes back to it, its chat replayed and its terminals reattached.

import "@xterm/xterm/css/xterm.css";
import "./app.css";
import type { Connection } from "../../../client/typescript/src/connection.js";
import type { JSONObject } from "../../../client/typescript/src/wire/codec.js";
import { Api, login, loginOptions, resume } from "./api.js";
import { Chat } from "./chat.js";
import { button, byId, h, showStatus } from "./dom.js";
import { Files, FILES_ID } from "./files.js";
import { Live } from "./live.js";
import { Terminals } from "./term.js";
import { ThreadList } from "./threads.js";

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
let list: ThreadList | null = null;

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

/** The longest setTimeout delay: a session that ends later is not timed. */
const MAX_DELAY = 2 ** 31 - 1;

async function enter(a: Api): Promise<void> {
  api = a;
  // The session ends at its expiry (an OIDC ID token's, a key's, or the
  // bridge's session TTL): then the page goes back to the login.
  const left = Date.parse(a.login.expires) - Date.now();
  if (left < MAX_DELAY) {
    setTimeout(() => {
      history.replaceState(null, "", `/#login_error=${encodeURIComponent("the session expired: log in again")}`);
      location.reload();
    }, Math.max(left, 0) + 250);
  }
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
      list?.stop();
      await detach();
      await a.logout();
      location.hash = "";
      location.reload();
    }),
  );
  list = new ThreadList(a, {
    attach,
    current: () => attached?.live.thread ?? null,
    remove: async (id) => {
      if (attached?.live.thread === id) {
        await detach();
        history.replaceState(null, "", "/");
      }
      await a.deleteThread(id);
      await refresh();
    },
  });
  await Promise.all([list.start(), images(a)]);
  showStatus("");
  const want = /^#thread=(.+)$/.exec(location.hash)?.[1];
  if (want) await attach(decodeURIComponent(want)).catch((err: unknown) => showStatus(`attach: ${message(err)}`));
}

async function newThread(a: Api): Promise<void> {
  const image = byId<HTMLSelectElement>("new-image").value;
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

/** images offers the images a new thread may ask for, the default chosen. */
async function images(a: Api): Promise<void> {
  const select = byId<HTMLSelectElement>("new-image");
  try {
    const list = await a.images();
    select.replaceChildren(
      ...list.images.map((im) => {
        const o = h("option", { value: im }, im === list.default ? `${im} (default)` : im);
        o.selected = im === list.default;
        return o;
      }),
    );
  } catch (err) {
    select.replaceChildren(h("option", { value: "" }, "the default image"));
    showStatus(`images: ${message(err)}`);
  }
}

async function refresh(): Promise<void> {
  await list?.refresh();
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
  chat.onSandbox = (type, text, sandbox) => list?.sandboxEvent(id, type, text, sandbox);
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
