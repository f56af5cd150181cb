// The page in a real Chromium (Debian's /usr/bin/chromium, driven by
// playwright-core) against a real bridge, sandbox and the scripted model:
// log in, create a thread, chat (streamed answer, the tool call folded with
// its output and exit status), a terminal that runs a typed command, and a
// page of another origin that cannot use the session cookie. Screenshots
// go to build/web-artifacts. Needs make build and make image (BOXWIRE_IMAGE).
import assert from "node:assert/strict";
import { mkdirSync } from "node:fs";
import { createServer, type Server } from "node:http";
import { join } from "node:path";
import { after, before, test } from "node:test";
import { chromium, type Browser, type Page } from "playwright-core";
import { repoRoot, startEnv, type Env } from "./harness.js";

const CHROMIUM = process.env["BOXWIRE_CHROMIUM"] || "/usr/bin/chromium";
const SANDBOX = 90_000; // a sandbox start on a loaded machine
const STEP = 30_000;
const artifacts = join(repoRoot, "build", "web-artifacts");

const script = {
  model: "scripted",
  turns: [
    {
      when: "hello",
      steps: [
        { tool_calls: [{ name: "execute", arguments: { command: "echo tool-said-$((40+2))" } }] },
        { content: "Hello from the sandbox: the tool said 42." },
      ],
    },
    { steps: [{ content: "ok" }] },
  ],
};

let env: Env;
let browser: Browser;
let other: Server;
let otherURL: string;

before(async () => {
  mkdirSync(artifacts, { recursive: true });
  env = await startEnv(script);
  browser = await chromium.launch({
    executablePath: CHROMIUM,
    args: ["--no-sandbox", "--disable-background-networking", "--disable-component-update", "--disable-sync", "--no-first-run", "--headless=new"],
    timeout: STEP,
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
  await browser?.close();
  await new Promise<void>((r) => (other ? other.close(() => r()) : r()));
  await env?.stop();
});

async function shot(page: Page, name: string): Promise<void> {
  await page.screenshot({ path: join(artifacts, `${name}.png`), fullPage: true });
}

test("log in, chat, terminal, and no use of the cookie from another origin", { timeout: 300_000 }, async () => {
  const context = await browser.newContext();
  const page = await context.newPage();
  const consoleErrors: string[] = [];
  page.on("console", (m) => {
    if (m.type() === "error") consoleErrors.push(m.text());
  });
  const res = await page.goto(env.url + "/", { timeout: STEP });
  assert.match(res?.headers()["content-security-policy"] ?? "", /script-src 'self'/);

  // A wrong key is refused; the right one logs in.
  await page.fill("#key", "wrong");
  await page.click("#login-button");
  await page.waitForSelector("#status:has-text('login:')", { timeout: STEP });
  await page.fill("#key", env.token);
  await page.click("#login-button");
  await page.waitForSelector("#main:not([hidden])", { timeout: STEP });
  assert.equal(await page.textContent("#who"), "admin (admin)");
  const cookies = await context.cookies(env.url);
  const session = cookies.find((c) => c.name === "boxwire_session");
  assert.ok(session && session.httpOnly && session.sameSite === "Strict", JSON.stringify(cookies));
  assert.equal(await page.evaluate(() => document.cookie), "", "the page cannot read the cookie");
  await shot(page, "login");

  // A thread, and the chat: the answer streams, the tool call shows its output and status.
  await page.click("#new-thread");
  await page.waitForSelector("#thread:not([hidden])", { timeout: SANDBOX });
  await page.waitForSelector("#threads li.current", { timeout: STEP });
  await page.fill("#chat-input", "hello there");
  await page.click("#send");
  await page.waitForSelector(".msg.assistant:has-text('Hello from the sandbox: the tool said 42.')", { timeout: SANDBOX });
  await page.waitForSelector(".turn-done[data-reason='stop']", { timeout: STEP });
  const tool = page.locator("details.tool").first();
  assert.equal(await tool.getAttribute("data-status"), "exit 0");
  assert.match((await tool.locator(".tool-output").textContent()) ?? "", /tool-said-42/);
  assert.equal(await page.isDisabled("#stop"), true, "Stop is off between turns");
  await tool.locator("summary").click();
  await shot(page, "chat");

  // The terminal: typed keys reach a shell in the sandbox, its output the screen.
  await page.click("#open-terminal");
  await page.waitForSelector("#terminal .xterm", { timeout: STEP });
  await page.waitForSelector("#terminal[data-session]", { timeout: STEP });
  await page.click("#terminal .xterm");
  await page.keyboard.type("echo term-$((6*7))\n");
  await page.waitForFunction(() => document.querySelector("#terminal .xterm-rows")?.textContent?.includes("term-42"), undefined, { timeout: STEP });
  await shot(page, "terminal");

  // Another origin, in the same browser with the cookie set: it cannot
  // open the WebSocket, and its state-changing requests are refused.
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

  // Logout ends the session.
  await Promise.all([page.waitForEvent("load", { timeout: STEP }), page.click("#logout")]);
  await page.waitForSelector("#login:not([hidden])", { timeout: STEP });
  const after = await page.evaluate(async () => (await fetch("/v1/threads")).status);
  assert.equal(after, 401);
  assert.deepEqual(consoleErrors.filter((e) => !/401|Unauthorized/.test(e)), []);
  await context.close();
});

async function listThreads(): Promise<string[]> {
  const r = await fetch(env.url + "/v1/threads", { headers: { Authorization: `Bearer ${env.token}` } });
  const body = (await r.json()) as { threads: { id: string }[] };
  return body.threads.map((t) => t.id).sort();
}
