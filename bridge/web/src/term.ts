// Terminals in the page: xterm.js on the bridge's terminal sessions
// (docs/terminal.md), a tab each. Keys go in as typed, the window size
// follows the pane, output is written as it arrives. The sessions live in
// the sandbox, not the page: after a reload or a reconnect, attach()
// lists the thread's sessions and attaches to each, and the bridge's
// screen redraw puts back the screen as it was.

import { Terminal as XTerm } from "@xterm/xterm";
import { FitAddon } from "@xterm/addon-fit";
import type { Connection } from "../../../client/typescript/src/connection.js";
import type { Terminal } from "../../../client/typescript/src/terminal.js";
import { button, h, showStatus } from "./dom.js";

/** One tab: an xterm and the session it shows. */
interface Tab {
  session: string;
  xterm: XTerm;
  fit: FitAddon;
  pane: HTMLElement;
  tab: HTMLElement;
  term: Terminal | null;
  dispose(): void;
}

/** Terminals are the thread's terminal tabs in tabs (the tab bar) and panes. */
export class Terminals {
  readonly #tabs: HTMLElement;
  readonly #panes: HTMLElement;
  readonly #open = new Map<string, Tab>();
  #conn: Connection | null = null;
  #current = "";
  readonly #observer: ResizeObserver;

  constructor(tabs: HTMLElement, panes: HTMLElement) {
    this.#tabs = tabs;
    this.#panes = panes;
    this.#observer = new ResizeObserver(() => this.#fitCurrent());
    this.#observer.observe(panes);
  }

  /** attach shows every live session of conn's thread (after a reload or a reconnect). */
  async attach(conn: Connection): Promise<void> {
    this.#conn = conn;
    const sessions = await conn.listTerminals();
    for (const s of sessions) {
      if (s.exited) continue;
      const tab = this.#open.get(s.session) ?? this.#make(s.session);
      await this.#bind(tab, await conn.attachTerminal(s.session));
    }
    if (!this.#current && this.#open.size > 0) this.select([...this.#open.keys()][0] ?? "");
  }

  /** openNew starts a shell in the sandbox in a new tab. */
  async openNew(): Promise<void> {
    const conn = this.#conn;
    if (!conn) throw new Error("not connected");
    const probe = this.#make("");
    const term = await conn.openTerminal({ cols: probe.xterm.cols, rows: probe.xterm.rows });
    probe.session = term.session;
    probe.pane.dataset["session"] = term.session;
    probe.tab.dataset["session"] = term.session;
    this.#open.delete("");
    this.#open.set(term.session, probe);
    await this.#bind(probe, term);
    this.select(term.session);
  }

  #make(session: string): Tab {
    const pane = h("div", { class: "term-pane", "data-session": session });
    this.#panes.append(pane);
    const xterm = new XTerm({ convertEol: false, cursorBlink: true, fontSize: 13, scrollback: 5000 });
    const fit = new FitAddon();
    xterm.loadAddon(fit);
    xterm.open(pane);
    const tab = button(`shell ${this.#open.size + 1}`, { class: "term-tab", "data-session": session }, () => this.select(t.session));
    this.#tabs.append(tab);
    const input = xterm.onData((d) => t.term?.write(d));
    const resized = xterm.onResize(({ cols, rows }) => t.term?.resize(cols, rows));
    const t: Tab = {
      session, xterm, fit, pane, tab, term: null,
      dispose() {
        input.dispose();
        resized.dispose();
        xterm.dispose();
        pane.remove();
        tab.remove();
      },
    };
    this.#open.set(session, t);
    this.select(session);
    return t;
  }

  /** bind shows term in tab: its screen as it was, then its output. */
  async #bind(t: Tab, term: Terminal): Promise<void> {
    t.term = term;
    t.xterm.reset();
    if (term.screen) t.xterm.write(term.screen);
    t.pane.dataset["attached"] = String(Number(t.pane.dataset["attached"] ?? "0") + 1);
    if (t.session === this.#current) this.#fitCurrent();
    void (async () => {
      try {
        for await (const chunk of term.read()) t.xterm.write(chunk);
        if (t.term !== term) return;
        const code = await term.exited;
        if (code !== null) {
          t.xterm.write(`\r\n[exited ${code}]\r\n`);
          t.tab.classList.add("exited");
        }
      } catch {
        // the connection dropped: Live reconnects and attach() binds again
      }
    })();
  }

  /** select shows the tab of session. */
  select(session: string): void {
    this.#current = session;
    for (const [s, t] of this.#open) {
      t.pane.hidden = s !== session;
      t.tab.classList.toggle("current", s === session);
    }
    this.#fitCurrent();
    this.#open.get(session)?.xterm.focus();
  }

  #fitCurrent(): void {
    const t = this.#open.get(this.#current);
    if (!t || t.pane.hidden) return;
    try {
      t.fit.fit();
    } catch (err) {
      showStatus(`terminal: ${err instanceof Error ? err.message : String(err)}`);
    }
  }

  /** dispose removes every tab (the sessions go on in the sandbox). */
  dispose(): void {
    this.#observer.disconnect();
    for (const t of this.#open.values()) t.dispose();
    this.#open.clear();
  }
}
