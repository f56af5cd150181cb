import { fileURLToPath } from "node:url";
import { resolve } from "node:path";

// Tests run from .test-build/test; the repository root is four levels up
// from there (client/typescript/.test-build/test).
export const repoRoot = resolve(fileURLToPath(new URL(".", import.meta.url)), "..", "..", "..", "..");
export const sdkRoot = resolve(repoRoot, "client", "typescript");
