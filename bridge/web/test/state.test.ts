// The thread list's sandbox state in a real Chromium against a real
// bridge and sandboxes, logged in as a user who is not an admin: the image
// choice is a select of the bridge's allowed images (GET /v1/images) with
// the default chosen; each thread shows its sandbox's confinement posture
// (thread info's posture); and its state follows the sandbox by itself,
// without Refresh: replaced when the attached thread's sandbox is killed
// (sandbox_replaced), replaced again when a thread not attached is
// (the list's own polling sees another sandbox id), suspended once it
// idles past --idle-ttl. Needs make build and make image (BOXWIRE_IMAGE).
import assert from "node:assert/strict";
import { spawnSync } from "node:child_process";
import { after, before, test } from "node:test";
import type { Browser, Page } from "playwright-core";
import { startEnv, type Env } from "../../../client/typescript/test/harness.js";
import { launch, logIn, SANDBOX, shot, STEP } from "./browser.js";

const OTHER_IMAGE = "example.test/other-image:1";
/** The bridge's idle TTL: long enough to create a second thread before the first is suspended. */
const IDLE_TTL_S = 60;

let env: Env;
let browser: Browser;
let page: Page;
let first = "";
let second = "";

before(async () => {
  env = await startEnv({ model: "scripted", turns: [{ steps: [{ content: "ok" }] }] }, {}, ["--images", OTHER_IMAGE, "--idle-ttl", `${IDLE_TTL_S}s`]);
  browser = await launch();
  page = await (await browser.newContext()).newPage();
});

after(async () => {
  await browser?.close();
  await env?.stop();
});

/** admin calls the bridge's API with its token. */
async function admin(method: string, path: string, body?: unknown): Promise<unknown> {
  const r = await fetch(env.url + path, {
    method,
    headers: { Authorization: `Bearer ${env.token}`, ...(body ? { "Content-Type": "application/json" } : {}) },
    ...(body ? { body: JSON.stringify(body) } : {}),
  });
  if (!r.ok) assert.fail(`${method} ${path}: ${r.status} ${await r.text()}`);
  return r.status === 204 ? null : r.json();
}

async function sandboxOf(id: string): Promise<string> {
  assert.ok(id, "no thread: an earlier step failed");
  return ((await admin("GET", `/v1/threads/${id}`)) as { sandbox_id: string }).sandbox_id;
}

/** kill stops a sandbox's container from outside, as a crash would. */
function kill(sandbox: string): void {
  const r = spawnSync("docker", ["kill", sandbox], { encoding: "utf8", timeout: STEP });
  assert.equal(r.status, 0, r.stderr);
}

async function newThread(): Promise<string> {
  assert.ok(await page.isVisible("#main"), "not logged in: an earlier step failed");
  const before = await page.textContent("#thread-title").catch(() => "");
  await page.click("#new-thread");
  await page.waitForFunction((was) => {
    const t = document.querySelector("#thread-title")?.textContent ?? "";
    return t !== "" && t !== was && document.querySelector("#conn-state")?.getAttribute("data-state") === "connected";
  }, before, { timeout: SANDBOX });
  return (await page.textContent("#thread-title")) ?? "";
}

const row = (id: string) => `#threads li[data-thread='${id}']`;

test("a user's image choice is a select of the allowed images, the default chosen", { timeout: STEP * 3 }, async () => {
  await admin("POST", "/v1/users", { name: "ann" });
  const { key } = (await admin("POST", "/v1/users/ann/keys", { name: "web" })) as { key: string };
  await logIn(page, env.url, key);
  assert.equal(await page.textContent("#who"), "ann");
  await page.waitForSelector(`#new-image option[value="${OTHER_IMAGE}"]`, { state: "attached", timeout: STEP });
  const options = await page.locator("#new-image option").evaluateAll((os) => os.map((o) => [(o as HTMLOptionElement).value, o.textContent ?? ""]));
  assert.deepEqual(options, [[env.image, `${env.image} (default)`], [OTHER_IMAGE, OTHER_IMAGE]]);
  assert.equal(await page.inputValue("#new-image"), env.image);
});

test("a thread shows its sandbox's posture and its state, running", { timeout: SANDBOX + STEP }, async () => {
  first = await newThread();
  await page.waitForSelector(`${row(first)} .sandbox-state[data-state='running']`, { timeout: STEP });
  await page.waitForSelector(`${row(first)} .thread-posture[data-reported='yes']`, { timeout: STEP });
  const posture = (await page.textContent(`${row(first)} .thread-posture`)) ?? "";
  // What our image's sandbox reports under the bridge's hardening.
  assert.match(posture, /^posture: uid [1-9]\d* · no capabilities · no_new_privs · seccomp filter · read-only root · pids \d+ · memory \d+ (MiB|GiB)/, posture);
  const info = (await admin("GET", `/v1/threads/${first}`)) as { image: string; posture?: { seccomp: number } };
  assert.equal(info.image, env.image, "the select's default was used");
  assert.equal(info.posture?.seccomp, 2);
  await shot(page, "posture");
});

test("the attached thread's sandbox killed: the list shows it replaced, by itself", { timeout: SANDBOX + STEP }, async () => {
  const old = await sandboxOf(first);
  kill(old);
  await page.waitForSelector(`${row(first)}[data-state='replaced'] .sandbox-state[data-state='replaced']`, { timeout: SANDBOX });
  await page.waitForSelector(".notice.sandbox[data-event='sandbox_replaced']", { timeout: STEP });
  const now = await sandboxOf(first);
  assert.notEqual(now, old);
  await page.waitForSelector(`${row(first)}[data-sandbox='${now}']`, { timeout: STEP });
  assert.match((await page.getAttribute(`${row(first)} .sandbox-state`, "title")) ?? "", /sandbox replaced/);
  await page.waitForSelector(`${row(first)} .thread-posture[data-reported='yes']`, { timeout: STEP });
});

test("a thread not attached: its sandbox killed shows replaced from the list's own polling", { timeout: SANDBOX * 2 }, async () => {
  second = await newThread(); // the first is no longer attached
  await page.waitForSelector(`${row(second)} .sandbox-state[data-state='running']`, { timeout: STEP });
  const old = await sandboxOf(first);
  kill(old);
  await page.waitForSelector(`${row(first)}[data-state='replaced'] .sandbox-state[title*='${old.slice(0, 12)} replaced by']`, { timeout: SANDBOX });
  assert.equal(await page.locator(`${row(second)} .sandbox-state`).textContent(), "running");
  await shot(page, "replaced");
});

test("a thread idle past the idle TTL shows suspended, by itself", { timeout: SANDBOX * 2 + IDLE_TTL_S * 1000 }, async () => {
  assert.ok(first && second, "no threads: an earlier step failed");
  await page.waitForSelector(`${row(first)}[data-state='suspended'] .sandbox-state[data-state='suspended']`, { timeout: SANDBOX + IDLE_TTL_S * 1000 });
  assert.equal(await page.textContent(`${row(first)} .thread-posture`), "posture: not reported (no agent answered yet)");
  assert.equal(await page.locator(`${row(second)} .sandbox-state`).textContent(), "running", "the attached thread is in use");
});
