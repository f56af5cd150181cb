// The README's TypeScript quick start is examples/quickstart.ts, which
// bridge.test.ts runs: this keeps the two the same.
import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { test } from "node:test";
import { repoRoot, sdkRoot } from "./paths.js";

test("the README quick start is examples/quickstart.ts", () => {
  const readme = readFileSync(join(repoRoot, "README.md"), "utf8");
  const m = /### From TypeScript[\s\S]*?```ts\n([\s\S]*?)```/.exec(readme);
  assert.ok(m?.[1], "no TypeScript quick start in README.md");
  const example = readFileSync(join(sdkRoot, "examples", "quickstart.ts"), "utf8").replace(/^(\/\/.*\n)+/, "");
  assert.equal(m[1], example);
});
