// The page: login, the thread list (create, attach, delete), the chat of
// the attached thread and a terminal in its sandbox (docs/web.md).

import "@xterm/xterm/css/xterm.css";
import "./app.css";
import { Connection } from "../../../client/typescript/src/connection.js";
import { Api, login, resume } from "./api.js";
import { Chat } from "./chat.js";
import { button, byId, h, showStatus } from "./dom.js";
import { openTerminal } from "./term.js";

const wsURL = `${location.protocol === "https:" ? "wss:" : "ws:"}//${location.host}/v1/ws`;

/** The attached thread: its connection, chat and terminal. */
interface Attached {
  conn: Connection;
  terminal: { dispose(): void } | null;
}

let api: Api | null = null;
let attached: Attached | null = null;

async function start(): Promise<void> {
  byId<HTMLFormElement>("login-form").addEventListener("submit", (ev) => {
    ev.preventDefault();
    const key = byId<HTMLInputElement>("key");
    login(key.value)
      .then((a) => {
        key.value = "";
        return enter(a);
      })
      .catch((err: unknown) => showStatus(`login: ${err instanceof Error ? err.message : String(err)}`));
  });
  const a = await resume();
  if (a) await enter(a);
}

async function enter(a: Api): Promise<void> {
  api = a;
  byId("login").hidden = true;
  byId("main").hidden = false;
  byId("who").textContent = `${a.login.user}${a.login.admin ? " (admin)" : ""}`;
  const tools = byId("thread-tools");
  tools.replaceChildren(
    button("New thread", { id: "new-thread" }, async () => {
      showStatus("starting a sandbox…");
      const t = await a.createThread();
      await refresh();
      await attach(t.id);
    }),
    button("Log out", { id: "logout" }, async () => {
      detach();
      await a.logout();
      location.reload();
    }),
  );
  await refresh();
  showStatus("");
}

async function refresh(): Promise<void> {
  if (!api) return;
  const list = byId("threads");
  const threads = await api.threads();
  list.replaceChildren(
    ...threads.map((t) =>
      h(
        "li",
        { "data-thread": t.id, class: attached?.conn.thread === t.id ? "current" : "" },
        h("span", { class: "thread-id" }, t.id),
        h("span", { class: "thread-state" }, ` ${t.status} · ${t.image}${t.runtime ? ` · ${t.runtime}` : ""}`),
        button("Attach", { class: "attach" }, () => attach(t.id)),
        button("Delete", { class: "delete" }, async () => {
          if (attached?.conn.thread === t.id) detach();
          await api?.deleteThread(t.id);
          await refresh();
        }),
      ),
    ),
  );
}

function detach(): void {
  if (!attached) return;
  attached.terminal?.dispose();
  void attached.conn.close();
  attached = null;
  byId("thread").hidden = true;
}

async function attach(id: string): Promise<void> {
  detach();
  showStatus(`attaching ${id}…`);
  const conn = await Connection.open({ url: wsURL, token: undefined, webSocket: undefined, thread: id });
  const cur: Attached = { conn, terminal: null };
  attached = cur;
  const log = byId("chat-log");
  log.replaceChildren();
  byId("thread").hidden = false;
  byId("thread-title").textContent = conn.thread;
  byId("terminal").replaceChildren();
  const chat = new Chat(conn, log);
  const stop = byId<HTMLButtonElement>("stop");
  chat.onTurn = (running) => (stop.disabled = !running);
  stop.disabled = true;
  stop.onclick = () => chat.stop();
  byId<HTMLFormElement>("chat-form").onsubmit = (ev) => {
    ev.preventDefault();
    const input = byId<HTMLTextAreaElement>("chat-input");
    if (input.value.trim() === "") return;
    chat.send(input.value);
    input.value = "";
  };
  byId<HTMLButtonElement>("open-terminal").onclick = () => {
    if (cur.terminal) return;
    openTerminal(conn, byId("terminal"))
      .then((t) => (cur.terminal = t))
      .catch((err: unknown) => showStatus(`terminal: ${err instanceof Error ? err.message : String(err)}`));
  };
  showStatus("");
  await refresh();
  chat.run().catch((err: unknown) => {
    if (attached === cur) showStatus(`connection lost: ${err instanceof Error ? err.message : String(err)}`);
  });
}

start().catch((err: unknown) => showStatus(String(err)));
