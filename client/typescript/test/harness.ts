// The test world: the scripted model server (build/llmscript) and a real
// bridge (build/bridge) on loopback, a data folder of their own, a random
// token and bridge id; restart() stops the bridge and starts it again on
// the same address and data; stop() ends both and removes every sandbox
// the bridge made (bridge gc). `make build` and `make image` come first
// (make sdk-typescript and make web see to it); BOXWIRE_IMAGE names the
// image. The web page's Chromium tests (bridge/web/test) use it too.

import { spawn, spawnSync, type ChildProcess } from "node:child_process";
import { randomBytes } from "node:crypto";
import { mkdtempSync, rmSync, writeFileSync, existsSync } from "node:fs";
import { createServer, Socket, type Server } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { repoRoot } from "./paths.js";

/** Bounds of the harness's own waits. */
export const START_TIMEOUT = 30_000;

const bridgeBin = join(repoRoot, "build", "bridge");
const llmBin = join(repoRoot, "build", "llmscript");

export interface Env {
  url: string;
  token: string;
  id: string;
  dataDir: string;
  image: string;
  /** The bridge's log so far (stderr). */
  log(): string;
  /** restart stops the bridge (SIGTERM: its sandboxes stay) and starts it again on the same address and data. */
  restart(): Promise<void>;
  stop(): Promise<void>;
}

/** startEnv starts llmscript with script and a bridge using it, with extra bridge environment and flags. */
export async function startEnv(script: unknown, extra: Record<string, string> = {}, flags: string[] = []): Promise<Env> {
  for (const bin of [bridgeBin, llmBin]) {
    if (!existsSync(bin)) throw new Error(`${bin} is missing: run make build`);
  }
  const dataDir = mkdtempSync(join(tmpdir(), "bwts")); // short: socket paths stay under 108 bytes
  const token = "tok-" + randomBytes(12).toString("hex");
  const apiKey = "sk-ts-" + randomBytes(12).toString("hex");
  const id = "ts-" + randomBytes(4).toString("hex");
  const image = process.env["BOXWIRE_IMAGE"] || "boxwire:latest";
  const scriptPath = join(dataDir, "script.json");
  writeFileSync(scriptPath, JSON.stringify(script));

  const llm = spawn(llmBin, ["--script", scriptPath, "--listen", "127.0.0.1:0", "--api-key", apiKey], { stdio: ["ignore", "pipe", "pipe"] });
  const llmURL = await waitLine(llm, "stdout", /listening on (http:\/\/[0-9.:]+\/v1)/, () => "");
  let bridgeLog = "";
  const env = {
    ...process.env,
    BOXWIRE_TOKEN: token,
    BOXWIRE_IMAGE: image,
    BOXWIRE_DATA_DIR: dataDir,
    BOXWIRE_BRIDGE_ID: id,
    BOXWIRE_MODEL: "scripted",
    OPENAI_BASE_URL: llmURL,
    OPENAI_API_KEY: apiKey,
    ...extra,
  };
  const launch = async (listen: string): Promise<{ bridge: ChildProcess; url: string }> => {
    const bridge = spawn(bridgeBin, ["--listen", listen, ...flags], { stdio: ["ignore", "ignore", "pipe"], env });
    bridge.stderr?.on("data", (c: Buffer) => (bridgeLog += c.toString()));
    return { bridge, url: await waitLine(bridge, "stderr", /listening on (https?:\/\/[0-9.:]+)/, () => bridgeLog) };
  };
  let bridge: ChildProcess;
  let url: string;
  try {
    ({ bridge, url } = await launch("127.0.0.1:0"));
  } catch (err) {
    llm.kill("SIGKILL");
    throw err;
  }
  return {
    url,
    token,
    id,
    dataDir,
    image,
    log: () => bridgeLog,
    async restart() {
      await stopProcess(bridge);
      ({ bridge } = await launch(new URL(url).host));
    },
    async stop() {
      await stopProcess(bridge);
      await stopProcess(llm);
      // A stopped bridge leaves its sandboxes for the next start to adopt:
      // this one does not come back, so remove all it made.
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

/** stopProcess sends SIGTERM and waits (bounded) for the exit, then kills. */
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

/** A TCP proxy in front of the bridge whose connections a test can cut, as a broken network would. */
export interface CutProxy {
  url: string;
  /** cut destroys every open connection at once (no close frame). */
  cut(): void;
  close(): Promise<void>;
}

export async function startProxy(target: string): Promise<CutProxy> {
  const t = new URL(target);
  const open = new Set<Socket>();
  const server: Server = createServer((down) => {
    const up = new Socket();
    open.add(down).add(up);
    up.connect(Number(t.port), t.hostname);
    down.pipe(up).pipe(down);
    const drop = () => {
      down.destroy();
      up.destroy();
      open.delete(down);
      open.delete(up);
    };
    down.on("error", drop).on("close", drop);
    up.on("error", drop).on("close", drop);
  });
  await new Promise<void>((r) => server.listen(0, "127.0.0.1", r));
  const addr = server.address();
  if (addr === null || typeof addr === "string") throw new Error("proxy: no address");
  const cut = () => {
    for (const s of open) s.destroy();
    open.clear();
  };
  return {
    url: `http://127.0.0.1:${addr.port}`,
    cut,
    close() {
      cut();
      return new Promise((r) => server.close(() => r()));
    },
  };
}

/** within rejects when p does not settle within ms: every wait in a test has a deadline. */
export async function within<T>(ms: number, what: string, p: Promise<T>): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  const deadline = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new Error(`${what}: not done within ${ms} ms`)), ms);
  });
  try {
    return await Promise.race([p, deadline]);
  } finally {
    clearTimeout(timer);
  }
}
