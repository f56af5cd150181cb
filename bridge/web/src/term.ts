// A terminal in the page: xterm.js on one of the bridge's terminal
// sessions (docs/terminal.md). Keys go in as typed, the window size
// follows the pane, output is written as it arrives.

import { Terminal as XTerm } from "@xterm/xterm";
import { FitAddon } from "@xterm/addon-fit";
import type { Connection } from "../../../client/typescript/src/connection.js";
import type { Terminal } from "../../../client/typescript/src/terminal.js";

/** openTerminal starts a shell in the thread's sandbox and shows it in pane. */
export async function openTerminal(conn: Connection, pane: HTMLElement): Promise<{ session: Terminal; dispose(): void }> {
  const xterm = new XTerm({ convertEol: false, cursorBlink: true, fontSize: 13, scrollback: 5000 });
  const fit = new FitAddon();
  xterm.loadAddon(fit);
  xterm.open(pane);
  fit.fit();
  const session = await conn.openTerminal({ cols: xterm.cols, rows: xterm.rows });
  pane.dataset["session"] = session.session;
  if (session.screen) xterm.write(session.screen);
  const input = xterm.onData((d) => session.write(d));
  const resized = xterm.onResize(({ cols, rows }) => session.resize(cols, rows));
  const observer = new ResizeObserver(() => fit.fit());
  observer.observe(pane);
  void (async () => {
    try {
      for await (const chunk of session.read()) xterm.write(chunk);
      xterm.write("\r\n[session ended]\r\n");
    } catch (err) {
      xterm.write(`\r\n[${err instanceof Error ? err.message : String(err)}]\r\n`);
    }
  })();
  return {
    session,
    dispose() {
      observer.disconnect();
      input.dispose();
      resized.dispose();
      xterm.dispose();
    },
  };
}
