// The page over TLS with OIDC sign-in, in a real Chromium: the bridge
// serves HTTPS (--tls-cert/--tls-key, a self-signed certificate made here
// with openssl) and signs users in through an OpenID Connect provider the
// test serves on loopback (discovery, JWKS, authorize, token; RS256 keys
// made here). Sign in with OIDC goes to the provider and back; the
// session cookie is Secure, HttpOnly and Strict; the user the ID token
// names is created on first use; a thread is attached over wss:; the
// session ends with the ID token, and the page says so. A callback this
// browser did not start is refused.
import assert from "node:assert/strict";
import { spawnSync } from "node:child_process";
import { createHash, generateKeyPairSync, randomBytes, sign, type KeyObject } from "node:crypto";
import { mkdtempSync, rmSync } from "node:fs";
import { createServer, type Server } from "node:http";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, before, test } from "node:test";
import type { Browser } from "playwright-core";
import { startEnv, type Env } from "../../../client/typescript/test/harness.js";
import { launch, SANDBOX, shot, STEP } from "./browser.js";

const CLIENT = "boxwire-web";
const SECRET = "client-secret-" + randomBytes(8).toString("hex");

let env: Env;
let browser: Browser;
let idp: Server;
let certDir: string;
/** How long the provider's ID tokens last, in seconds. */
let tokenLife = 300;

/** A provider that signs in "alice" at once (as if she had a session there). */
function startProvider(): Promise<string> {
  const { publicKey, privateKey } = generateKeyPairSync("rsa", { modulusLength: 2048 });
  const kid = "k1";
  const codes = new Map<string, { nonce: string; challenge: string; redirect: string }>();
  let base = "";
  idp = createServer((req, res) => {
    const u = new URL(req.url ?? "/", base);
    const json = (status: number, body: unknown) => {
      res.writeHead(status, { "Content-Type": "application/json" });
      res.end(JSON.stringify(body));
    };
    if (u.pathname === "/.well-known/openid-configuration") {
      return json(200, {
        issuer: base, authorization_endpoint: `${base}/authorize`, token_endpoint: `${base}/token`, jwks_uri: `${base}/jwks`,
        response_types_supported: ["code"], subject_types_supported: ["public"], id_token_signing_alg_values_supported: ["RS256"],
      });
    }
    if (u.pathname === "/jwks") return json(200, { keys: [{ ...(publicKey.export({ format: "jwk" }) as object), kid, alg: "RS256", use: "sig" }] });
    if (u.pathname === "/authorize") {
      const q = u.searchParams;
      if (q.get("client_id") !== CLIENT || q.get("response_type") !== "code" || q.get("code_challenge_method") !== "S256" || !q.get("scope")?.includes("openid")) {
        return json(400, { error: "invalid_request" });
      }
      const code = randomBytes(12).toString("hex");
      codes.set(code, { nonce: q.get("nonce") ?? "", challenge: q.get("code_challenge") ?? "", redirect: q.get("redirect_uri") ?? "" });
      const back = new URL(q.get("redirect_uri") ?? "");
      back.searchParams.set("code", code);
      back.searchParams.set("state", q.get("state") ?? "");
      res.writeHead(302, { Location: back.toString() });
      return res.end();
    }
    if (u.pathname === "/token" && req.method === "POST") {
      let body = "";
      req.on("data", (c: Buffer) => (body += c.toString()));
      req.on("end", () => {
        const f = new URLSearchParams(body);
        const c = codes.get(f.get("code") ?? "");
        codes.delete(f.get("code") ?? "");
        const verifier = createHash("sha256").update(f.get("code_verifier") ?? "").digest("base64url");
        if (!c || f.get("client_secret") !== SECRET || f.get("redirect_uri") !== c.redirect || verifier !== c.challenge) {
          return json(400, { error: "invalid_grant" });
        }
        const now = Math.floor(Date.now() / 1000);
        json(200, { access_token: "at", token_type: "Bearer", id_token: jwt(privateKey, kid, { iss: base, aud: CLIENT, sub: "alice", iat: now, exp: now + tokenLife, nonce: c.nonce }) });
      });
      return;
    }
    json(404, { error: "not_found" });
  });
  return new Promise((r) =>
    idp.listen(0, "127.0.0.1", () => {
      const a = idp.address();
      base = a && typeof a !== "string" ? `http://127.0.0.1:${a.port}` : "";
      r(base);
    }),
  );
}

function jwt(key: KeyObject, kid: string, claims: object): string {
  const part = (o: object) => Buffer.from(JSON.stringify(o)).toString("base64url");
  const data = `${part({ alg: "RS256", typ: "JWT", kid })}.${part(claims)}`;
  return `${data}.${sign("RSA-SHA256", Buffer.from(data), key).toString("base64url")}`;
}

before(async () => {
  certDir = mkdtempSync(join(tmpdir(), "bwtls"));
  const cert = join(certDir, "cert.pem");
  const key = join(certDir, "key.pem");
  const made = spawnSync("openssl", ["req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", key, "-out", cert, "-days", "1",
    "-subj", "/CN=127.0.0.1", "-addext", "subjectAltName=IP:127.0.0.1"], { encoding: "utf8" });
  assert.equal(made.status, 0, made.stderr);
  const issuer = await startProvider();
  env = await startEnv({ model: "scripted", turns: [{ steps: [{ content: "ok" }] }] }, { BOXWIRE_OIDC_CLIENT_SECRET: SECRET },
    ["--tls-cert", cert, "--tls-key", key, "--oidc-issuer", issuer, "--oidc-client-id", CLIENT, "--oidc-create-users"]);
  assert.match(env.url, /^https:/);
  browser = await launch(["--ignore-certificate-errors"]);
});

after(async () => {
  await browser?.close();
  await env?.stop();
  await new Promise<void>((r) => (idp ? idp.close(() => r()) : r()));
  if (certDir) rmSync(certDir, { recursive: true, force: true });
});

test("over TLS: Sign in with OIDC, a Secure cookie, a thread over wss:", { timeout: SANDBOX + STEP * 2 }, async () => {
  const context = await browser.newContext({ ignoreHTTPSErrors: true });
  const page = await context.newPage();
  await page.goto(env.url + "/", { timeout: STEP });
  await page.waitForSelector("#oidc-login:not([hidden])", { timeout: STEP });
  assert.match((await page.textContent("#oidc-login")) ?? "", /^Sign in with 127\.0\.0\.1:\d+$/);
  await Promise.all([page.waitForURL(env.url + "/", { timeout: STEP }), page.click("#oidc-login")]);
  await page.waitForSelector("#main:not([hidden])", { timeout: STEP });
  assert.equal(await page.textContent("#who"), "alice");
  const cookies = await context.cookies(env.url);
  const session = cookies.find((c) => c.name === "boxwire_session");
  assert.ok(session && session.secure && session.httpOnly && session.sameSite === "Strict", JSON.stringify(cookies));
  assert.equal(cookies.find((c) => c.name === "boxwire_oidc"), undefined, "the flow's cookie is cleared");

  await page.click("#new-thread");
  await page.waitForSelector("#conn-state[data-state='connected']", { timeout: SANDBOX });
  const thread = (await page.textContent("#thread-title")) ?? "";
  await page.waitForSelector(`#threads li[data-thread='${thread}'] .thread-state:has-text('owner alice')`, { timeout: STEP });
  await page.fill("#chat-input", "hi");
  await page.click("#send");
  await page.waitForSelector(".msg.assistant:has-text('ok')", { timeout: SANDBOX });
  await shot(page, "oidc");
  await context.close();
});

test("an OIDC session ends when its ID token expires: the cookie, the bridge and the page", { timeout: STEP * 2 }, async () => {
  tokenLife = 8;
  const context = await browser.newContext({ ignoreHTTPSErrors: true });
  const page = await context.newPage();
  try {
    await page.goto(env.url + "/", { timeout: STEP });
    await page.waitForSelector("#oidc-login:not([hidden])", { timeout: STEP });
    const before = Date.now() / 1000;
    await Promise.all([page.waitForURL(env.url + "/", { timeout: STEP }), page.click("#oidc-login")]);
    await page.waitForSelector("#main:not([hidden])", { timeout: STEP });
    const session = (await context.cookies(env.url)).find((c) => c.name === "boxwire_session");
    assert.ok(session && session.expires > before && session.expires <= Date.now() / 1000 + tokenLife + 1, `cookie expires ${session?.expires}, token lasts ${tokenLife} s`);
    const expires = await page.evaluate(async () => ((await (await fetch("/v1/login")).json()) as { expires: string }).expires);
    assert.ok(Date.parse(expires) / 1000 <= Date.now() / 1000 + tokenLife + 1, `GET /v1/login expires ${expires}`);
    // The page logs itself out when the session ends, and the bridge agrees.
    await page.waitForSelector("#login:not([hidden])", { timeout: STEP });
    await page.waitForSelector("#status:has-text('the session expired')", { timeout: STEP });
    assert.equal(await page.evaluate(async () => (await fetch("/v1/threads")).status), 401);
  } finally {
    tokenLife = 300;
    await context.close();
  }
});

test("a sign-in callback this browser did not start is refused", { timeout: STEP * 2 }, async () => {
  const context = await browser.newContext({ ignoreHTTPSErrors: true });
  const page = await context.newPage();
  await page.goto(`${env.url}/v1/login/oidc/callback?code=stolen&state=forged`, { timeout: STEP });
  await page.waitForSelector("#status:has-text('sign-in: this sign-in was not started by this browser')", { timeout: STEP });
  assert.ok(await page.isVisible("#login"));
  assert.equal((await context.cookies(env.url)).find((c) => c.name === "boxwire_session"), undefined);
  await context.close();
});
