// The page in a real Chromium against a real bridge, sandbox and the
// scripted model (the SDK's harness): log in; a thread made with a
// policy; the chat (an answer streamed as markdown, a hostile answer that
// stays text, a tool call folded with its output and exit status,
// truncation, Stop, approve and deny with reasons); two terminals and the
// same screens after a reload; the file browser (a 20 MiB upload with
// progress, downloaded back byte-identical, a folder as a tar, a per-file
// error, a drop); export; a page of another origin that cannot use the
// cookie; the page reconnecting by itself after a cut connection and a
// bridge restart mid-turn, with nothing lost or shown twice; logout.
// Needs make build and make image (BOXWIRE_IMAGE). Screenshots go to
// build/web-artifacts.
import assert from "node:assert/strict";
import { createHash, randomBytes } from "node:crypto";
import { readFileSync } from "node:fs";
import { createServer, type Server } from "node:http";
import { after, before, test } from "node:test";
import type { Browser, BrowserContext, Download, Page } from "playwright-core";
import { startEnv, startProxy, type CutProxy, type Env } from "../../../client/typescript/test/harness.js";
import { launch, logIn, SANDBOX, shot, STEP } from "./browser.js";

const HOSTILE = [
  "**bold answer** with `inline code` <img src=x onerror=\"window.pwnedBy=1\"> <script>window.pwnedBy=2</script>",
  "[bad link](javascript:window.pwnedBy=3) and [good link](https://example.com/docs)",
  "",
  "```html",
  '<b onmouseover="window.pwnedBy=4">not bold</b>',
  "```",
  "",
  "- item one",
  "- item <i>two</i>",
].join("\n");

const script = {
  model: "scripted",
  turns: [
    { when: "hello", steps: [{ tool_calls: [{ name: "execute", arguments: { command: "echo tool-said-$((40+2))" } }] }, { content: HOSTILE, chunk_delay_ms: 40 }] },
    { when: "big output", steps: [{ tool_calls: [{ name: "execute", arguments: { command: "seq 1 400000" } }] }, { content: "that was long" }] },
    { when: "slow", steps: [{ tool_calls: [{ name: "execute", arguments: { command: "sleep 300" } }] }, { content: "not reached" }] },
    { when: "please approve", steps: [{ tool_calls: [{ name: "execute", arguments: { command: "echo needs-approval-one" } }] }, { content: "the approved command ran" }] },
    { when: "please deny", steps: [{ tool_calls: [{ name: "execute", arguments: { command: "echo needs-approval-two" } }] }, { content: "the denial is noted" }] },
    { when: "restart", steps: [{ tool_calls: [{ name: "execute", arguments: { command: "sleep 10; echo survived-$((1+1))-restarts" } }] }, { content: "done after the restart" }] },
    {
      when: "serve the site",
      steps: [
        {
          tool_calls: [
            { name: "execute", arguments: { command: "mkdir -p site && echo preview-from-the-page > site/index.html" } },
            { name: "execute", arguments: { command: "cd site && exec python3 -m http.server 8000 --bind 127.0.0.1", background: true } },
          ],
        },
        { content: "serving on 8000" },
      ],
    },
    { steps: [{ content: "plain ok" }] },
  ],
};
const policy = { rules: [{ tool: "execute", args: { command: "echo needs-approval*" }, action: "ask", reason: "a rule of the test" }] };

let env: Env;
let browser: Browser;
let context: BrowserContext;
let page: Page;
let thread = "";
const consoleErrors: string[] = [];
let other: Server;
let otherURL: string;
let proxy: CutProxy | undefined;

before(async () => {
  env = await startEnv(script);
  browser = await launch();
  context = await browser.newContext({ acceptDownloads: true });
  page = await context.newPage();
  page.on("console", (m) => {
    if (m.type() === "error") consoleErrors.push(m.text());
  });
  // A page of another origin (same host, another port: same-site, so only
  // the Origin check and the CSRF token stand in its way).
  other = createServer((_, res) => {
    res.setHeader("Content-Type", "text/html");
    res.end("<!doctype html><title>elsewhere</title>");
  });
  await new Promise<void>((r) => other.listen(0, "127.0.0.1", r));
  const addr = other.address();
  assert.ok(addr && typeof addr !== "string");
  otherURL = `http://127.0.0.1:${addr.port}`;
});

after(async () => {
  await proxy?.close();
  await browser?.close();
  await new Promise<void>((r) => (other ? other.close(() => r()) : r()));
  await env?.stop();
});

/** send types text into the chat and sends it. */
async function send(p: Page, text: string): Promise<void> {
  await p.fill("#chat-input", text);
  await p.click("#send");
}

/** turnsDone is how many turns the chat shows as ended. */
function turnsDone(p: Page): Promise<number> {
  return p.locator(".turn-done").count();
}

async function waitTurns(p: Page, n: number, timeout = SANDBOX): Promise<void> {
  await p.waitForFunction((want) => document.querySelectorAll(".turn-done").length >= want, n, { timeout });
}

/** chatSeqs are the seqs of the user messages shown: each once, in order. */
async function assertNoRepeats(p: Page): Promise<void> {
  const seqs = await p.locator(".msg.user").evaluateAll((els) => els.map((e) => e.getAttribute("data-seq") ?? ""));
  assert.deepEqual([...new Set(seqs)], seqs, `a message shown twice: ${seqs}`);
}

async function downloaded(d: Download): Promise<Buffer> {
  const path = await d.path();
  return readFileSync(path);
}

function sha(b: Buffer): string {
  return createHash("sha256").update(b).digest("hex");
}

test("log in: a wrong key is refused, the cookie is HttpOnly and Strict", { timeout: STEP * 3 }, async () => {
  const res = await page.goto(env.url + "/", { timeout: STEP });
  assert.match(res?.headers()["content-security-policy"] ?? "", /script-src 'self'/);
  await page.fill("#key", "wrong");
  await page.click("#login-button");
  await page.waitForSelector("#status:has-text('login:')", { timeout: STEP });
  await logIn(page, env.url, env.token);
  assert.equal(await page.textContent("#who"), "admin (admin)");
  assert.equal(await page.isHidden("#thread"), true, "no thread pane before a thread is attached");
  const session = (await context.cookies(env.url)).find((c) => c.name === "boxwire_session");
  assert.ok(session && session.httpOnly && session.sameSite === "Strict" && !session.secure, JSON.stringify(session));
  assert.equal(await page.evaluate(() => document.cookie), "", "the page cannot read the cookie");
  await shot(page, "login");
});

test("a new thread with a policy, its sandbox state in the list", { timeout: SANDBOX + STEP }, async () => {
  await page.fill("#new-policy", "{not json");
  await page.click("#new-thread");
  await page.waitForSelector("#status:has-text('the policy is not JSON')", { timeout: STEP });
  await page.fill("#new-policy", JSON.stringify(policy));
  await page.click("#new-thread");
  await page.waitForSelector("#thread:not([hidden])", { timeout: SANDBOX });
  await page.waitForSelector("#conn-state[data-state='connected']", { timeout: STEP });
  thread = (await page.textContent("#thread-title")) ?? "";
  assert.match(thread, /^t_/);
  assert.equal(new URL(page.url()).hash, `#thread=${thread}`);
  const li = page.locator(`#threads li[data-thread='${thread}']`);
  await li.locator(".thread-state:has-text('agent ')").waitFor({ timeout: STEP });
  const state = (await li.locator(".thread-state").textContent()) ?? "";
  assert.match(state, new RegExp(`^running · ${env.image.replace(/[.:]/g, "\\$&")} · [0-9a-f]{12} · agent \\S+ · default runtime`), state);
});

test("chat: streamed markdown, hostile output stays text, the tool call folded with output and exit status", { timeout: SANDBOX }, async () => {
  await send(page, "hello there");
  await page.waitForSelector(".msg.assistant.streaming", { timeout: SANDBOX }); // seen while it streams
  await waitTurns(page, 1);
  const tool = page.locator("details.tool").first();
  assert.equal(await tool.getAttribute("data-status"), "exit 0");
  assert.equal(await tool.getAttribute("open"), null, "folded");
  assert.match((await tool.locator(".tool-output").textContent()) ?? "", /tool-said-42/);
  const answer = page.locator(".msg.assistant").last();
  assert.equal(await answer.locator("strong").first().textContent(), "bold answer");
  assert.equal(await answer.locator("li").count(), 2);
  assert.equal(await answer.locator("img, script, b, i, iframe").count(), 0, "markup in the answer became elements");
  const text = (await answer.textContent()) ?? "";
  assert.ok(text.includes('<img src=x onerror="window.pwnedBy=1">') && text.includes("<script>"), text);
  assert.ok(text.includes("[bad link](javascript:window.pwnedBy=3)"), "a javascript: link is shown as text");
  const links = await answer.locator("a").evaluateAll((as) => as.map((a) => `${a.getAttribute("href")} ${a.getAttribute("rel")}`));
  assert.deepEqual(links, ["https://example.com/docs noopener noreferrer nofollow"]);
  assert.match((await answer.locator("pre code").textContent()) ?? "", /<b onmouseover=/);
  assert.equal(await page.evaluate(() => (window as unknown as { pwnedBy?: number }).pwnedBy), undefined);
  assert.equal(await page.isDisabled("#stop"), true, "Stop is off between turns");
  await tool.locator("summary").click();
  assert.notEqual(await tool.getAttribute("open"), null, "expanded");
  await shot(page, "chat");
});

test("chat: truncation is shown", { timeout: SANDBOX }, async () => {
  await send(page, "big output please");
  await waitTurns(page, 2);
  const tool = page.locator("details.tool").last();
  assert.equal(await tool.getAttribute("data-truncated"), "true");
  assert.match((await tool.locator(".truncated-note").textContent()) ?? "", /output truncated: \d+ bytes in all, the whole output is in \/tmp\/boxwire\/output\//);
});

test("Stop interrupts the running turn", { timeout: SANDBOX }, async () => {
  await send(page, "slow one");
  await page.waitForSelector("details.tool[data-status='running'] code:has-text('sleep 300')", { timeout: SANDBOX });
  await page.waitForSelector("#stop:not([disabled])", { timeout: STEP });
  await page.click("#stop");
  await page.waitForSelector(".turn-done[data-reason='interrupted']", { timeout: STEP });
  assert.equal(await page.locator("details.tool").last().getAttribute("data-status"), "interrupted");
});

test("approvals: approve and deny, each with a reason", { timeout: SANDBOX }, async () => {
  const n = await turnsDone(page);
  await send(page, "please approve this");
  const card = page.locator(".approval").last();
  await card.waitFor({ timeout: SANDBOX });
  assert.match((await card.textContent()) ?? "", /approve execute\?.*needs-approval-one.*asked because: a rule of the test/);
  await card.locator(".approval-reason").fill("looks fine");
  await card.locator("button.approve").click();
  await page.waitForSelector(".approval[data-verdict='approved'] .decision", { timeout: STEP });
  assert.match((await card.locator(".decision").textContent()) ?? "", /^approved by \S+: looks fine$/);
  await waitTurns(page, n + 1);
  assert.match((await page.locator("details.tool").last().locator(".tool-output").textContent()) ?? "", /needs-approval-one/);
  await shot(page, "approval");

  await send(page, "please deny this");
  const second = page.locator(".approval").last();
  await page.waitForFunction(() => document.querySelectorAll(".approval").length === 2, undefined, { timeout: SANDBOX });
  await second.locator(".approval-reason").fill("not today");
  await second.locator("button.deny").click();
  await page.waitForSelector(".approval[data-verdict='denied'] .decision", { timeout: STEP });
  assert.match((await second.locator(".decision").textContent()) ?? "", /^denied by \S+: not today$/);
  await waitTurns(page, n + 2);
  assert.doesNotMatch((await page.locator("details.tool").last().locator(".tool-output").textContent()) ?? "", /needs-approval-two\n/);
});

/** screenOf is the text an xterm pane shows. */
function screenOf(p: Page, index: number): Promise<string> {
  return p.locator(".term-pane").nth(index).evaluate((el) => el.querySelector(".xterm-rows")?.textContent ?? "");
}

test("terminals: two of them, typing, and the same screens after a reload", { timeout: SANDBOX }, async () => {
  await page.click("#open-terminal");
  await page.waitForSelector(".term-pane[data-attached='1']", { timeout: STEP });
  await page.click(".term-pane:not([hidden]) .xterm");
  await page.keyboard.type("echo first-$((6*7))\n");
  await page.waitForFunction(() => document.querySelector(".term-pane:not([hidden]) .xterm-rows")?.textContent?.includes("first-42"), undefined, { timeout: STEP });
  await page.click("#open-terminal");
  await page.waitForFunction(() => document.querySelectorAll(".term-pane[data-attached]").length === 2, undefined, { timeout: STEP });
  await page.click(".term-pane:not([hidden]) .xterm");
  await page.keyboard.type("echo second-$((7*7))\n");
  await page.waitForFunction(() => document.querySelector(".term-pane:not([hidden]) .xterm-rows")?.textContent?.includes("second-49"), undefined, { timeout: STEP });
  const sessions = await page.locator(".term-pane").evaluateAll((els) => els.map((e) => e.getAttribute("data-session")));
  assert.equal(new Set(sessions).size, 2, `two sessions: ${sessions}`);
  await shot(page, "terminal");
  const users = await page.locator(".msg.user").count();

  await page.reload({ timeout: STEP });
  await page.waitForSelector("#conn-state[data-state='connected']", { timeout: STEP });
  await page.waitForFunction(() => document.querySelectorAll(".term-pane[data-attached]").length === 2, undefined, { timeout: STEP });
  const again = await page.locator(".term-pane").evaluateAll((els) => els.map((e) => e.getAttribute("data-session")));
  assert.deepEqual(new Set(again), new Set(sessions), "the same sessions after a reload");
  const first = sessions.indexOf(again[0] ?? "") === 0 ? 0 : 1;
  await page.locator(".term-tab").nth(first).click();
  await page.waitForFunction((i) => document.querySelectorAll(".term-pane")[i]?.querySelector(".xterm-rows")?.textContent?.includes("first-42"), first, { timeout: STEP });
  await page.locator(".term-tab").nth(1 - first).click();
  await page.waitForFunction((i) => document.querySelectorAll(".term-pane")[i]?.querySelector(".xterm-rows")?.textContent?.includes("second-49"), 1 - first, { timeout: STEP });
  assert.match(await screenOf(page, 1 - first), /echo second-\$\(\(7\*7\)\)/, "the screen as it was, command line and all");
  // The chat came back too: every message once.
  await page.waitForFunction((n) => document.querySelectorAll(".msg.user").length === n, users, { timeout: STEP });
  await assertNoRepeats(page);
  await page.keyboard.type("echo still-typing\n");
  await page.waitForFunction(() => document.querySelector(".term-pane:not([hidden]) .xterm-rows")?.textContent?.includes("still-typing"), undefined, { timeout: STEP });
});

test("a terminal follows the window's size", { timeout: STEP * 3 }, async () => {
  const size = async (mark: string): Promise<[number, number]> => {
    await page.click(".term-pane:not([hidden]) .xterm");
    await page.keyboard.type(`echo ${mark}=$(stty size | tr ' ' x)\n`);
    const handle = await page.waitForFunction(
      (m) => new RegExp(`${m}=(\\d+)x(\\d+)`).exec(document.querySelector(".term-pane:not([hidden]) .xterm-rows")?.textContent ?? "")?.slice(1, 3).join("x"),
      mark, { timeout: STEP },
    );
    const [rows, cols] = String(await handle.jsonValue()).split("x").map(Number);
    return [rows ?? 0, cols ?? 0];
  };
  const before = await size("wide");
  await page.setViewportSize({ width: 900, height: 720 });
  await page.waitForFunction((c) => {
    const el = document.querySelector(".term-pane:not([hidden]) .xterm-screen");
    return el !== null && el.getBoundingClientRect().width < c;
  }, 1000, { timeout: STEP });
  const after = await size("narrow");
  assert.ok(after[1] < before[1] && after[1] > 20, `columns ${before[1]} -> ${after[1]}`);
  await page.setViewportSize({ width: 1280, height: 720 });
});

test("files: upload 20 MiB with progress, download it back, a folder as tar, a per-file error, a drop", { timeout: SANDBOX }, async () => {
  await page.waitForSelector("#files[data-listed]", { timeout: STEP });
  const big = randomBytes(20 << 20);
  await page.setInputFiles("#file-pick", { name: "big.bin", mimeType: "application/octet-stream", buffer: big });
  const row = page.locator(".upload[data-path='big.bin']");
  await row.waitFor({ timeout: STEP });
  await page.waitForSelector(".upload[data-path='big.bin'][data-state='done']", { timeout: SANDBOX });
  assert.ok(Number(await row.getAttribute("data-progress")) >= 1, "progress was shown");
  assert.equal(await row.locator("progress").evaluate((p) => (p as HTMLProgressElement).value), big.length);
  await page.waitForSelector("#files tr[data-name='big.bin']", { timeout: STEP });
  const size = await page.locator("#files tr[data-name='big.bin'] td").nth(1).textContent();
  assert.equal(size, String(big.length));
  const [dl] = await Promise.all([page.waitForEvent("download", { timeout: STEP }), page.click("#files tr[data-name='big.bin'] a.download")]);
  assert.equal(dl.suggestedFilename(), "big.bin");
  assert.equal(sha(await downloaded(dl)), sha(big), "downloaded byte-identical");

  // A folder (made over the API with the bearer key), downloaded as tar.
  const put = await fetch(`${env.url}/v1/threads/${thread}/files?path=sub/a.txt`, {
    method: "PUT", headers: { Authorization: `Bearer ${env.token}` }, body: "in-the-folder\n",
  });
  assert.equal(put.status, 200, await put.text());
  await page.click(".files-refresh");
  await page.waitForSelector("#files tr[data-name='sub'][data-kind='dir']", { timeout: STEP });
  const [tar] = await Promise.all([page.waitForEvent("download", { timeout: STEP }), page.click("#files tr[data-name='sub'] a.download")]);
  assert.equal(tar.suggestedFilename(), "sub.tar");
  const tarBytes = await downloaded(tar);
  assert.ok(tarBytes.includes(Buffer.from("sub/a.txt")) && tarBytes.includes(Buffer.from("in-the-folder\n")), "the folder's tar");

  // Two files at once: one lands, the other (a file where a folder is) fails on its own.
  await page.setInputFiles("#file-pick", [
    { name: "ok.txt", mimeType: "text/plain", buffer: Buffer.from("fine\n") },
    { name: "sub", mimeType: "text/plain", buffer: Buffer.from("not a folder\n") },
  ]);
  await page.waitForSelector(".upload[data-path='ok.txt'][data-state='done']", { timeout: STEP });
  await page.waitForSelector(".upload[data-path='sub'][data-state='failed']", { timeout: STEP });
  assert.match((await page.locator(".upload[data-path='sub'] .upload-status").textContent()) ?? "", /error: is_directory/);
  await page.waitForSelector("#files tr[data-name='ok.txt']", { timeout: STEP });

  // A drop into a folder.
  await page.click("#files tr[data-name='sub'] .files-dir");
  await page.waitForSelector("#files[data-dir='sub'] tr[data-name='a.txt']", { timeout: STEP });
  await page.evaluate(() => {
    const dt = new DataTransfer();
    dt.items.add(new File(["dropped bytes\n"], "dropped.txt", { type: "text/plain" }));
    const zone = document.getElementById("drop-zone");
    zone?.dispatchEvent(new DragEvent("dragover", { dataTransfer: dt, bubbles: true, cancelable: true }));
    zone?.dispatchEvent(new DragEvent("drop", { dataTransfer: dt, bubbles: true, cancelable: true }));
  });
  await page.waitForSelector(".upload[data-path='sub/dropped.txt'][data-state='done']", { timeout: STEP });
  await page.waitForSelector("#files[data-dir='sub'] tr[data-name='dropped.txt']", { timeout: STEP });
  const back = await fetch(`${env.url}/v1/threads/${thread}/files?path=sub/dropped.txt&format=raw`, { headers: { Authorization: `Bearer ${env.token}` } });
  assert.equal(await back.text(), "dropped bytes\n");
  await shot(page, "files");
  await page.click(".files-up");
  await page.waitForSelector("#files[data-dir=''] tr[data-name='big.bin']", { timeout: STEP });
});

test("export: the thread's events as JSON lines", { timeout: STEP * 2 }, async () => {
  const [dl] = await Promise.all([page.waitForEvent("download", { timeout: STEP }), page.click(`#threads li[data-thread='${thread}'] a.export`)]);
  assert.equal(dl.suggestedFilename(), `${thread}.jsonl`);
  const types = (await downloaded(dl)).toString().trim().split("\n").map((l) => (JSON.parse(l) as { type: string }).type);
  assert.ok(types.includes("user_echo") && types.includes("tool_result") && types.includes("approval_decision"), types.join(","));
});

test("another origin cannot use the cookie: no WebSocket, no change, no CSRF token", { timeout: STEP * 2 }, async () => {
  const before = await listThreads();
  const evil = await context.newPage();
  await evil.goto(otherURL, { timeout: STEP });
  const wsURL = env.url.replace("http:", "ws:") + "/v1/ws";
  const ws = await evil.evaluate(
    (u) =>
      new Promise<string>((resolve) => {
        const s = new WebSocket(u);
        s.onopen = () => resolve("open");
        s.onerror = () => resolve("refused");
        setTimeout(() => resolve("timeout"), 10_000);
      }),
    wsURL,
  );
  assert.equal(ws, "refused");
  const posted = await evil.evaluate(async (u) => {
    await fetch(u + "/v1/threads", { method: "POST", credentials: "include", mode: "no-cors", body: "{}" }).catch(() => null);
    try {
      const r = await fetch(u + "/v1/login", { credentials: "include" });
      return `read ${r.status}: ${await r.text()}`;
    } catch {
      return "unreadable";
    }
  }, env.url);
  assert.equal(posted, "unreadable", "another origin read the CSRF token");
  assert.deepEqual(await listThreads(), before, "another origin created a thread");
  await evil.close();
});

test("a server in the sandbox: the ports event offers its preview, which the session cookie opens", { timeout: SANDBOX }, async () => {
  await send(page, "serve the site");
  const link = page.locator(".ports a[data-port='8000']").first();
  await link.waitFor({ timeout: SANDBOX });
  const href = (await link.getAttribute("href")) ?? "";
  assert.equal(href, `/v1/threads/${thread}/ports/8000/`);
  const preview = await context.newPage();
  const got = await preview.goto(env.url + href, { timeout: STEP });
  assert.equal(got?.status(), 200);
  assert.match(got?.headers()["content-security-policy"] ?? "", /^sandbox /, "the sandbox's page runs in an opaque origin");
  assert.match((await preview.textContent("body")) ?? "", /preview-from-the-page/);
  await preview.close();
  await shot(page, "ports");
});

test("a cut connection: the page reconnects by itself, nothing lost or shown twice", { timeout: SANDBOX }, async () => {
  proxy = await startProxy(env.url);
  const p = await context.newPage(); // the cookie is the host's, whatever the port
  await p.goto(`${proxy.url}/#thread=${thread}`, { timeout: STEP });
  await p.waitForSelector("#conn-state[data-state='connected']", { timeout: STEP });
  const users = await page.locator(".msg.user").count();
  await p.waitForFunction((n) => document.querySelectorAll(".msg.user").length === n, users, { timeout: STEP });
  const done = await turnsDone(p);
  proxy.cut();
  await p.waitForSelector("#conn-state[data-state='reconnecting']", { timeout: STEP });
  await p.waitForSelector("#conn-state[data-state='connected']", { timeout: STEP });
  await send(p, "after the cut");
  await waitTurns(p, done + 1);
  await p.waitForSelector(".msg.assistant:has-text('plain ok')", { timeout: STEP });
  assert.equal(await p.locator(".msg.user").count(), users + 1);
  await assertNoRepeats(p);
  await p.close();
});

test("a bridge restart mid-turn: the page recovers, nothing lost or shown twice", { timeout: SANDBOX * 2 }, async () => {
  const done = await turnsDone(page);
  const users = await page.locator(".msg.user").count();
  await send(page, "restart now");
  await page.waitForSelector("details.tool[data-status='running'] code:has-text('survived')", { timeout: SANDBOX });
  await env.restart();
  await page.waitForSelector("#conn-state[data-state='connected']", { timeout: SANDBOX });
  await waitTurns(page, done + 1, SANDBOX);
  await page.waitForSelector(".msg.assistant:has-text('done after the restart')", { timeout: STEP });
  assert.equal(await page.locator(".msg.assistant:has-text('done after the restart')").count(), 1);
  assert.equal(await page.locator(".msg.user").count(), users + 1);
  assert.equal(await page.locator("details.tool code:has-text('survived')").count(), 1);
  assert.match((await page.locator("details.tool").last().locator(".tool-output").textContent()) ?? "", /survived-2-restarts/);
  await assertNoRepeats(page);
  assert.ok(await page.isVisible("#main"), "still logged in after the restart");
  await shot(page, "restart");
});

test("delete: the thread leaves the list and the API", { timeout: STEP * 3 }, async () => {
  await page.click(`#threads li[data-thread='${thread}'] button.delete`);
  await page.waitForSelector(`#threads li[data-thread='${thread}']`, { state: "detached", timeout: STEP * 2 });
  assert.equal(await page.isHidden("#thread"), true);
  assert.equal(new URL(page.url()).hash, "", "a reload does not try the deleted thread");
  assert.ok(!(await listThreads()).includes(thread), "the thread is still listed by the API");
});

test("logout ends the session", { timeout: STEP * 2 }, async () => {
  await Promise.all([page.waitForEvent("load", { timeout: STEP }), page.click("#logout")]);
  await page.waitForSelector("#login:not([hidden])", { timeout: STEP });
  assert.equal(await page.evaluate(async () => (await fetch("/v1/threads")).status), 401);
  // Expected: the 401s of a logged-out page, the connections the cut and the restart broke, the upload refused with 409.
  assert.deepEqual(consoleErrors.filter((e) => !/401|Unauthorized|WebSocket|ERR_CONNECTION|net::|409/.test(e)), []);
});

async function listThreads(): Promise<string[]> {
  const r = await fetch(env.url + "/v1/threads", { headers: { Authorization: `Bearer ${env.token}` } });
  const body = (await r.json()) as { threads: { id: string }[] };
  return body.threads.map((t) => t.id).sort();
}
