import { existsSync } from "node:fs";
import { dirname, join, resolve } from "node:path";
import { fileURLToPath } from "node:url";

// The repository root is the nearest folder above this module with the
// Go module's go.mod: the SDK's tests run from
// client/typescript/.test-build/test, the web page's (which share this
// harness, bundled) from bridge/web/.test-build.
function findRoot(from: string): string {
  for (let dir = from; ; dir = dirname(dir)) {
    if (existsSync(join(dir, "go.mod"))) return dir;
    if (dirname(dir) === dir) throw new Error(`no go.mod above ${from}`);
  }
}

export const repoRoot = findRoot(resolve(fileURLToPath(new URL(".", import.meta.url))));
export const sdkRoot = resolve(repoRoot, "client", "typescript");
