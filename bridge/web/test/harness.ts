// The test world, as client/typescript/test/harness.ts makes it: the
// scripted model server (build/llmscript) and a real bridge (build/bridge)
// on loopback with a data folder of their own; stop() ends both and removes
// the sandboxes the bridge made (bridge gc). BOXWIRE_IMAGE names the image.

import { spawn, spawnSync, type ChildProcess } from "node:child_process";
import { randomBytes } from "node:crypto";
import { existsSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";
import { fileURLToPath } from "node:url";

/** Tests run from bridge/web/.test-build. */
export const repoRoot = resolve(fileURLToPath(new URL(".", import.meta.url)), "..", "..", "..");
const bridgeBin = join(repoRoot, "build", "bridge");
const llmBin = join(repoRoot, "build", "llmscript");
const START_TIMEOUT = 30_000;

export interface Env {
  url: string;
  token: string;
  log(): string;
  stop(): Promise<void>;
}

export async function startEnv(script: unknown): Promise<Env> {
  for (const bin of [bridgeBin, llmBin]) {
    if (!existsSync(bin)) throw new Error(`${bin} is missing: run make build`);
  }
  const dataDir = mkdtempSync(join(tmpdir(), "bwweb"));
  const token = "tok-" + randomBytes(12).toString("hex");
  const apiKey = "sk-web-" + randomBytes(12).toString("hex");
  const id = "web-" + randomBytes(4).toString("hex");
  const scriptPath = join(dataDir, "script.json");
  writeFileSync(scriptPath, JSON.stringify(script));
  const llm = spawn(llmBin, ["--script", scriptPath, "--listen", "127.0.0.1:0", "--api-key", apiKey], { stdio: ["ignore", "pipe", "pipe"] });
  const llmURL = await waitLine(llm, "stdout", /listening on (http:\/\/[0-9.:]+\/v1)/, () => "");
  let bridgeLog = "";
  const bridge = spawn(bridgeBin, ["--listen", "127.0.0.1:0"], {
    stdio: ["ignore", "ignore", "pipe"],
    env: {
      ...process.env,
      BOXWIRE_TOKEN: token,
      BOXWIRE_IMAGE: process.env["BOXWIRE_IMAGE"] || "boxwire:latest",
      BOXWIRE_DATA_DIR: dataDir,
      BOXWIRE_BRIDGE_ID: id,
      BOXWIRE_MODEL: "scripted",
      OPENAI_BASE_URL: llmURL,
      OPENAI_API_KEY: apiKey,
    },
  });
  bridge.stderr?.on("data", (c: Buffer) => (bridgeLog += c.toString()));
  let url: string;
  try {
    url = await waitLine(bridge, "stderr", /listening on (http:\/\/[0-9.:]+)/, () => bridgeLog);
  } catch (err) {
    llm.kill("SIGKILL");
    throw err;
  }
  return {
    url,
    token,
    log: () => bridgeLog,
    async stop() {
      await stopProcess(bridge);
      await stopProcess(llm);
      const gc = spawnSync(bridgeBin, ["gc", "--id", id, "--data-dir", dataDir], { encoding: "utf8", timeout: 120_000 });
      rmSync(dataDir, { recursive: true, force: true });
      if (gc.status !== 0) throw new Error(`bridge gc: ${gc.status}: ${gc.stderr}`);
    },
  };
}

function waitLine(p: ChildProcess, stream: "stdout" | "stderr", re: RegExp, log: () => string): Promise<string> {
  return new Promise((resolve, reject) => {
    let seen = "";
    const timer = setTimeout(() => fail(new Error(`no ${re} within ${START_TIMEOUT} ms:\n${seen}${log()}`)), START_TIMEOUT);
    const onData = (c: Buffer) => {
      seen += c.toString();
      const m = re.exec(seen);
      if (m?.[1]) {
        clearTimeout(timer);
        p[stream]?.off("data", onData);
        p[stream]?.resume();
        resolve(m[1]);
      }
    };
    const fail = (err: Error) => {
      clearTimeout(timer);
      p.kill("SIGKILL");
      reject(err);
    };
    p[stream]?.on("data", onData);
    p.once("exit", (code) => fail(new Error(`exited (${code}) before listening:\n${seen}${log()}`)));
  });
}

function stopProcess(p: ChildProcess): Promise<void> {
  if (p.exitCode !== null || p.signalCode !== null) return Promise.resolve();
  return new Promise((resolve) => {
    const timer = setTimeout(() => p.kill("SIGKILL"), START_TIMEOUT);
    p.once("exit", () => {
      clearTimeout(timer);
      resolve();
    });
    p.kill("SIGTERM");
  });
}
