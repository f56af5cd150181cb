// Builds the page (src/) into a folder with esbuild: index.html, app.js,
// app.css. `node build.mjs dist` writes dist/ (committed, embedded by
// web.go); `node build.mjs --check dist` builds into a temporary folder and
// fails when dist/ differs (the committed bundle is out of date);
// `node build.mjs --test` bundles the Chromium tests (test/*.test.ts, with
// the TypeScript SDK's test harness they share) into .test-build/.
import * as esbuild from "esbuild";
import { copyFileSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";

const here = new URL(".", import.meta.url).pathname;
const args = process.argv.slice(2);

async function page(out) {
  mkdirSync(out, { recursive: true });
  await esbuild.build({
    absWorkingDir: here,
    entryPoints: { app: "src/main.ts" },
    outdir: out,
    bundle: true,
    format: "iife",
    platform: "browser",
    target: "es2022",
    minify: true,
    legalComments: "eof",
    external: ["ws"],
    logLevel: "warning",
  });
  copyFileSync(join(here, "src", "index.html"), join(out, "index.html"));
}

if (args[0] === "--test") {
  await esbuild.build({
    absWorkingDir: here,
    entryPoints: readdirSync(join(here, "test")).filter((n) => n.endsWith(".test.ts")).map((n) => `test/${n}`),
    outdir: ".test-build",
    outExtension: { ".js": ".mjs" },
    bundle: true,
    platform: "node",
    format: "esm",
    target: "node20",
    packages: "external",
    logLevel: "warning",
  });
} else if (args[0] === "--check") {
  const want = join(here, args[1] ?? "dist");
  const tmp = mkdtempSync(join(tmpdir(), "bwweb"));
  try {
    await page(tmp);
    const names = (d) => readdirSync(d).sort().join(",");
    let stale = names(tmp) !== names(want);
    for (const n of readdirSync(tmp)) {
      if (stale) break;
      stale = !readFileSync(join(tmp, n)).equals(readFileSync(join(want, n)));
    }
    if (stale) {
      console.error(`${want} is out of date: run make web (or npm run build in bridge/web) and commit it`);
      process.exit(1);
    }
  } finally {
    rmSync(tmp, { recursive: true, force: true });
  }
} else {
  await page(join(here, args[0] ?? "dist"));
}
