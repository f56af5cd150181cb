// What the Chromium tests share: Debian's Chromium (never a downloaded
// browser) driven by playwright-core, the bounds of their waits, and
// screenshots into build/web-artifacts. The bridge, the scripted model and
// their clean-up come from the TypeScript SDK's harness
// (client/typescript/test/harness.ts).
import { mkdirSync } from "node:fs";
import { join } from "node:path";
import { chromium, type Browser, type Page } from "playwright-core";
import { repoRoot } from "../../../client/typescript/test/paths.js";

export const CHROMIUM = process.env["BOXWIRE_CHROMIUM"] || "/usr/bin/chromium";
/** A sandbox start on a loaded machine. */
export const SANDBOX = 120_000;
/** Any other step. */
export const STEP = 30_000;
export const artifacts = join(repoRoot, "build", "web-artifacts");

/** launch starts headless Chromium with extra flags. */
export async function launch(extra: string[] = []): Promise<Browser> {
  mkdirSync(artifacts, { recursive: true });
  return chromium.launch({
    executablePath: CHROMIUM,
    args: ["--no-sandbox", "--disable-background-networking", "--disable-component-update", "--disable-sync", "--no-first-run", "--headless=new", ...extra],
    timeout: STEP,
  });
}

/** shot keeps a screenshot of page as build/web-artifacts/NAME.png. */
export async function shot(page: Page, name: string): Promise<void> {
  await page.screenshot({ path: join(artifacts, `${name}.png`), fullPage: true });
}

/** logIn logs page in with key at url and waits for the thread list. */
export async function logIn(page: Page, url: string, key: string): Promise<void> {
  await page.goto(url + "/", { timeout: STEP });
  await page.fill("#key", key);
  await page.click("#login-button");
  await page.waitForSelector("#main:not([hidden])", { timeout: STEP });
}
