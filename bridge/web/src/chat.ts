// The chat of one thread: renders events as they stream (assistant text
// as markdown while it arrives, each tool call folded with its output and
// exit status, truncation said, approvals as approve/deny with a reason)
// and sends messages, Stop and answers on the thread's current
// connection. The log outlives connections: a reconnect resumes after the
// last event shown (Live, live.ts), so nothing is shown twice or lost.

import type { Connection } from "../../../client/typescript/src/connection.js";
import type { Message } from "../../../client/typescript/src/wire/messages.js";
import type { ApprovalRequest, ToolResult } from "../../../client/typescript/src/wire/payloads.js";
import { button, h } from "./dom.js";
import { renderMarkdown } from "./md.js";

/** An answer streaming in: its element and its text so far. */
interface Answer {
  el: HTMLElement;
  text: string;
  pending: boolean; // a render is scheduled
}

/** Chat shows a thread's events in log. */
export class Chat {
  readonly #log: HTMLElement;
  #conn: Connection | null = null;
  #answer: Answer | null = null;
  readonly #calls = new Map<string, { details: HTMLElement; status: HTMLElement; out: HTMLElement }>();
  readonly #approvals = new Map<string, HTMLElement>();
  /** onTurn is told when a turn starts (true) and ends (false). */
  onTurn: (running: boolean) => void = () => {};
  /** onSandbox is told of sandbox_exited and sandbox_replaced, with the event's message and (replaced) the new sandbox. */
  onSandbox: (what: string, message: string, sandbox: string) => void = () => {};

  constructor(log: HTMLElement) {
    this.#log = log;
  }

  /** use sends from now on over conn (the thread's connection after a reconnect). */
  use(conn: Connection | null): void {
    this.#conn = conn;
  }

  #live(): Connection {
    if (!this.#conn) throw new Error("not connected: reconnecting…");
    return this.#conn;
  }

  send(text: string): void {
    const conn = this.#live();
    conn.send({ type: "user_message", id: conn.newID("m"), data: { text } });
    this.onTurn(true);
  }

  stop(): void {
    this.#live().interrupt();
  }

  #add(el: HTMLElement): HTMLElement {
    this.#log.append(el);
    this.#log.scrollTop = this.#log.scrollHeight;
    return el;
  }

  /** show renders one event. */
  show(msg: Message): void {
    switch (msg.type) {
      case "user_echo":
        this.#endAnswer();
        this.#add(h("div", { class: "msg user", "data-seq": String(msg.seq ?? "") }, msg.data.text));
        this.onTurn(true);
        break;
      case "assistant_delta":
        this.#stream(msg.data.text);
        break;
      case "assistant_message":
        this.#finish(msg.data.text);
        break;
      case "tool_call":
        this.#endAnswer();
        this.#toolCall(msg.data.call_id, msg.data.name, msg.data.arguments);
        break;
      case "tool_output":
        this.#calls.get(msg.data.call_id)?.out.append(msg.data.output);
        break;
      case "tool_result":
        this.#toolResult(msg.data);
        break;
      case "approval_request":
        this.#endAnswer();
        this.#approval(msg.data);
        break;
      case "approval_decision": {
        const card = this.#approvals.get(msg.data.approval_id ?? "");
        card?.setAttribute("data-verdict", msg.data.verdict);
        for (const b of card?.querySelectorAll("button, input") ?? []) (b as HTMLButtonElement).disabled = true;
        const text = `${msg.data.verdict} by ${msg.data.by}${msg.data.reason ? `: ${msg.data.reason}` : ""}`;
        (card ?? this.#add(h("div", { class: "notice" }))).append(h("div", { class: "decision" }, text));
        break;
      }
      case "turn_done":
        this.#endAnswer();
        this.#add(h("div", { class: "turn-done", "data-reason": msg.data.reason }, `turn ${msg.data.reason}`));
        this.onTurn(false);
        break;
      case "error":
        this.#add(h("div", { class: "error" }, `${msg.data.code}: ${msg.data.message}`));
        break;
      case "sandbox_exited":
        this.#add(h("div", { class: "notice sandbox", "data-event": msg.type }, "sandbox exited"));
        this.onSandbox(msg.type, msg.data.message, "");
        break;
      case "sandbox_replaced":
        this.#add(h("div", { class: "notice sandbox", "data-event": msg.type }, "sandbox replaced"));
        this.onSandbox(msg.type, msg.data.message, msg.data.sandbox_id);
        break;
      case "ports":
        this.#ports(msg.thread ?? "", msg.data.ports);
        break;
      default:
        break;
    }
  }

  /** stream adds streamed text to the answer, rendered at most once a frame. */
  #stream(text: string): void {
    const a = (this.#answer ??= { el: this.#add(h("div", { class: "msg assistant streaming" })), text: "", pending: false });
    a.text += text;
    if (a.pending) return;
    a.pending = true;
    requestAnimationFrame(() => {
      a.pending = false;
      a.el.replaceChildren(renderMarkdown(a.text));
      this.#log.scrollTop = this.#log.scrollHeight;
    });
  }

  /** finish shows the answer's whole text (it may differ from the deltas'). */
  #finish(text: string): void {
    const a = this.#answer ?? { el: this.#add(h("div", { class: "msg assistant" })), text: "", pending: false };
    a.text = text;
    a.el.replaceChildren(renderMarkdown(text));
    a.el.classList.remove("streaming");
    this.#answer = null;
  }

  #endAnswer(): void {
    if (this.#answer) this.#finish(this.#answer.text);
  }

  #toolCall(id: string, name: string, args: unknown): void {
    const cmd = typeof args === "object" && args !== null && "command" in args ? String((args as { command: unknown }).command) : JSON.stringify(args);
    const status = h("span", { class: "tool-status" }, "running…");
    const summary = h("summary", {}, h("span", { class: "tool-name" }, name), " ", h("code", {}, cmd), " ", status);
    const out = h("pre", { class: "tool-output" });
    const details = this.#add(h("details", { class: "tool", "data-call": id, "data-status": "running" }, summary, out));
    this.#calls.set(id, { details, status, out });
  }

  #toolResult(r: ToolResult): void {
    if (!this.#calls.has(r.call_id)) this.#toolCall(r.call_id, r.name, {});
    const call = this.#calls.get(r.call_id);
    if (!call) return;
    if (call.out.textContent === "") call.out.textContent = r.output;
    const ended = r.status === "exited" || r.status === undefined;
    const status = ended && r.error ? "error" : ended ? `exit ${r.exit_code ?? 0}` : (r.status ?? "ended");
    call.status.textContent = status;
    call.details.setAttribute("data-status", status);
    if (r.error) call.details.append(h("div", { class: "tool-error" }, r.error));
    if (r.truncated) {
      const note = `output truncated: ${r.total_bytes ?? "?"} bytes in all${r.output_path ? `, the whole output is in ${r.output_path}` : ""}`;
      call.details.setAttribute("data-truncated", "true");
      call.status.append(" ", h("span", { class: "truncated" }, "(truncated)"));
      call.details.append(h("div", { class: "truncated-note" }, note));
    }
  }

  /** ports offers the preview of each port that listens (the path form, which the session cookie reaches; docs/preview.md). */
  #ports(thread: string, ports: readonly { port: number; address: string }[]): void {
    const el = h("div", { class: "notice ports" }, ports.length === 0 ? "nothing listens in the sandbox" : "listening: ");
    for (const p of ports) {
      const href = `/v1/threads/${encodeURIComponent(thread)}/ports/${p.port}/`;
      el.append(h("a", { href, target: "_blank", rel: "noopener noreferrer", "data-port": String(p.port) }, String(p.port)), " ");
    }
    this.#add(el);
  }

  #approval(req: ApprovalRequest): void {
    const id = req.approval_id;
    const what = req.tool ?? req.host ?? req.kind;
    const args = req.arguments !== undefined ? JSON.stringify(req.arguments) : "";
    const reason = h("input", { class: "approval-reason", placeholder: "reason (optional)", "aria-label": "reason" });
    const card = h(
      "div",
      { class: "approval", "data-approval": id },
      h("div", {}, h("strong", {}, `approve ${what}?`), args ? h("code", {}, ` ${args}`) : ""),
      req.reason || req.rule ? h("div", { class: "approval-why" }, `asked because: ${req.reason ?? req.rule ?? ""}`) : "",
      reason,
    );
    const answer = (ok: boolean) => {
      const conn = this.#live();
      const why = reason.value.trim() || undefined;
      if (ok) conn.approve(id, why);
      else conn.deny(id, why ?? "denied in the web page");
      for (const b of card.querySelectorAll("button")) b.disabled = true;
    };
    card.append(button("Approve", { class: "approve" }, () => answer(true)), button("Deny", { class: "deny" }, () => answer(false)));
    this.#approvals.set(id, card);
    this.#add(card);
  }
}
