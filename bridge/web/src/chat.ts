// The chat of one thread: renders a Connection's events as they stream
// (assistant text as it arrives, each tool call folded with its output and
// exit status, approvals as approve/deny) and sends messages and Stop.

import type { Connection } from "../../../client/typescript/src/connection.js";
import type { Message } from "../../../client/typescript/src/wire/messages.js";
import type { ToolResult } from "../../../client/typescript/src/wire/payloads.js";
import { button, h } from "./dom.js";

/** Chat shows the events of conn in log; run() consumes them until the connection ends. */
export class Chat {
  readonly #conn: Connection;
  readonly #log: HTMLElement;
  #answer: HTMLElement | null = null;
  readonly #calls = new Map<string, { summary: HTMLElement; out: HTMLElement }>();
  /** onTurn is told when a turn starts (true) and ends (false). */
  onTurn: (running: boolean) => void = () => {};

  constructor(conn: Connection, log: HTMLElement) {
    this.#conn = conn;
    this.#log = log;
  }

  send(text: string): void {
    this.#conn.send({ type: "user_message", id: this.#conn.newID("m"), data: { text } });
    this.onTurn(true);
  }

  stop(): void {
    this.#conn.interrupt();
  }

  /** run renders every event; it resolves when the connection is closed by us, rejects when it drops. */
  async run(): Promise<void> {
    for await (const msg of this.#conn.events()) this.#show(msg);
  }

  #add(el: HTMLElement): HTMLElement {
    this.#log.append(el);
    el.scrollIntoView({ block: "end" });
    return el;
  }

  #show(msg: Message): void {
    switch (msg.type) {
      case "user_echo":
        this.#answer = null;
        this.#add(h("div", { class: "msg user" }, msg.data.text));
        this.onTurn(true);
        break;
      case "assistant_delta":
        (this.#answer ??= this.#add(h("div", { class: "msg assistant" }))).append(msg.data.text);
        this.#answer.scrollIntoView({ block: "end" });
        break;
      case "assistant_message":
        (this.#answer ??= this.#add(h("div", { class: "msg assistant" }))).textContent = msg.data.text;
        this.#answer = null;
        break;
      case "tool_call":
        this.#answer = null;
        this.#toolCall(msg.data.call_id, msg.data.name, msg.data.arguments);
        break;
      case "tool_output":
        this.#calls.get(msg.data.call_id)?.out.append(msg.data.output);
        break;
      case "tool_result":
        this.#toolResult(msg.data);
        break;
      case "approval_request":
        this.#approval(msg.data.approval_id, msg.data.tool ?? msg.data.host ?? msg.data.kind, msg.data.reason ?? msg.data.rule ?? "");
        break;
      case "approval_decision":
        this.#add(h("div", { class: "notice" }, `${msg.data.verdict} by ${msg.data.by}${msg.data.reason ? `: ${msg.data.reason}` : ""}`));
        break;
      case "turn_done":
        this.#answer = null;
        this.#add(h("div", { class: "turn-done", "data-reason": msg.data.reason }, `turn ${msg.data.reason}`));
        this.onTurn(false);
        break;
      case "error":
        this.#add(h("div", { class: "error" }, `${msg.data.code}: ${msg.data.message}`));
        break;
      case "sandbox_exited":
      case "sandbox_replaced":
        this.#add(h("div", { class: "notice" }, msg.type.replace("_", " ")));
        break;
      default:
        break;
    }
  }

  #toolCall(id: string, name: string, args: unknown): void {
    const cmd = typeof args === "object" && args !== null && "command" in args ? String((args as { command: unknown }).command) : JSON.stringify(args);
    const summary = h("summary", {}, h("span", { class: "tool-name" }, name), " ", h("code", {}, cmd), " ", h("span", { class: "tool-status" }, "running…"));
    const out = h("pre", { class: "tool-output" });
    this.#add(h("details", { class: "tool", "data-call": id }, summary, out));
    this.#calls.set(id, { summary, out });
  }

  #toolResult(r: ToolResult): void {
    let call = this.#calls.get(r.call_id);
    if (!call) {
      this.#toolCall(r.call_id, r.name, {});
      call = this.#calls.get(r.call_id);
      if (!call) return;
    }
    if (call.out.textContent === "") call.out.textContent = r.output;
    let status = r.error ? `error: ${r.error}` : r.status === "exited" || r.status === undefined ? `exit ${r.exit_code ?? 0}` : r.status;
    if (r.truncated) status += ` (output truncated: ${r.total_bytes ?? "?"} bytes${r.output_path ? `, full output in ${r.output_path}` : ""})`;
    const el = call.summary.querySelector(".tool-status");
    if (el) el.textContent = status;
    call.summary.parentElement?.setAttribute("data-status", status);
  }

  #approval(id: string, what: string, reason: string): void {
    const card = h("div", { class: "approval", "data-approval": id }, h("span", {}, `approve ${what}?${reason ? ` (${reason})` : ""} `));
    const answer = (ok: boolean) => {
      if (ok) this.#conn.approve(id);
      else this.#conn.deny(id, "denied in the web page");
      for (const b of card.querySelectorAll("button")) b.disabled = true;
    };
    card.append(button("Approve", { class: "approve" }, () => answer(true)), button("Deny", { class: "deny" }, () => answer(false)));
    this.#add(card);
  }
}
