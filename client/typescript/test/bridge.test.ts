// Every API call of the SDK on a real bridge with real sandboxes and the
// scripted model: threads, turns, interrupt, approvals, run_tool, files,
// terminals, resume across a dropped connection, and the documented error
// for each kind of bad input. Needs make build and make image (BOXWIRE_IMAGE).
import assert from "node:assert/strict";
import { spawn } from "node:child_process";
import { mkdtempSync, readFileSync, rmSync, writeFileSync, mkdirSync, symlinkSync, readlinkSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, before, describe, test } from "node:test";
import {
  BadMessageError,
  BusyError,
  Client,
  ConnectionClosedError,
  InvalidPathError,
  type Message,
  NotAllowedError,
  NotFoundError,
  SeqAheadError,
  TooLargeError,
  UnauthorizedError,
  FileNotFoundError,
  IsDirectoryError,
  errorFromCode,
} from "boxwire";
import { downloadTo, uploadPath } from "boxwire/node";
import { startEnv, startProxy, within, type Env } from "./harness.js";
import { sdkRoot } from "./paths.js";

const TURN = 60_000; // a turn, a sandbox start
const TEST = { timeout: 180_000 };
const MAX_UPLOAD = 1 << 20;

const script = {
  model: "scripted",
  turns: [
    {
      when: "hello",
      steps: [
        { tool_calls: [{ name: "execute", arguments: { command: "echo hello > /workspace/x && cat /workspace/x" } }] },
        { content: "Hello! I wrote /workspace/x and read it back." },
      ],
    },
    {
      when: "count",
      steps: [
        { tool_calls: [{ name: "execute", arguments: { command: "for i in $(seq 1 30); do echo line $i; sleep 0.1; done" } }] },
        { content: "counted to 30" },
      ],
    },
    {
      when: "sleep",
      steps: [{ tool_calls: [{ name: "execute", arguments: { command: "echo started; sleep 60" } }] }, { content: "slept" }],
    },
    {
      when: "approve me",
      steps: [{ tool_calls: [{ name: "execute", arguments: { command: "echo approved-run" } }] }, { content: "ran it" }],
    },
    { steps: [{ content: "ok" }] },
  ],
};

let env: Env;
let bw: Client;

before(async () => {
  env = await startEnv(script, {
    BOXWIRE_MAX_UPLOAD_BYTES: String(MAX_UPLOAD),
    BOXWIRE_EGRESS_THREAD_MAX: ".example.com",
    BOXWIRE_WORKSPACE_SIZE: "0",
  });
  bw = new Client({ url: env.url, token: env.token });
});

after(async () => {
  await env?.stop();
});

/** collect reads an async iterable to its end, bounded. */
async function collect(it: AsyncIterable<Message>, what: string): Promise<Message[]> {
  return within(TURN, what, (async () => {
    const out: Message[] = [];
    for await (const m of it) out.push(m);
    return out;
  })());
}

function assertContiguous(seqs: number[]): void {
  for (let i = 1; i < seqs.length; i++) assert.equal(seqs[i], (seqs[i - 1] ?? 0) + 1, `seqs not contiguous: ${seqs.join(",")}`);
}

describe("against a real bridge", () => {
  test("the README quick start runs", TEST, async () => {
    const out = await within(TURN * 2, "quickstart", new Promise<string>((resolve, reject) => {
      const p = spawn(process.execPath, [join(sdkRoot, ".test-build", "examples", "quickstart.js")], {
        env: { ...process.env, BOXWIRE_URL: env.url, BOXWIRE_TOKEN: env.token },
        stdio: ["ignore", "pipe", "pipe"],
      });
      let text = "";
      p.stdout.on("data", (c: Buffer) => (text += c.toString()));
      p.stderr.on("data", (c: Buffer) => (text += c.toString()));
      p.on("exit", (code) => (code === 0 ? resolve(text) : reject(new Error(`quickstart exited ${code}:\n${text}`))));
    }));
    assert.match(out, /\[stop\] Hello! I wrote \/workspace\/x/);
    assert.match(out, /x has 6 bytes/);
    assert.match(out, /^hello$/m);
  });

  test("threads: create with image, scope and egress; get, list, set egress, delete", TEST, async () => {
    const info = await bw.createThread({ image: env.image, scope: "thread", egress: ["api.example.com"] });
    assert.match(info.id, /^t_/);
    assert.equal(info.image, env.image);
    assert.equal(info.scope, "thread");
    assert.deepEqual(info.egress, ["api.example.com"]);
    assert.equal((await bw.getThread(info.id)).id, info.id);
    assert.ok((await bw.listThreads()).some((t) => t.id === info.id));
    assert.deepEqual((await bw.setEgress(info.id, [".example.com"])).egress, [".example.com"]);
    await assert.rejects(bw.createThread({ egress: ["evil.example.org"] }), NotAllowedError);
    await assert.rejects(bw.createThread({ image: "not-allowed:latest" }), NotAllowedError);
    // A thread's MCP servers (docs/tools.md) are checked before anything is made.
    await assert.rejects(
      bw.createThread({ mcp: { servers: [{ name: "docs", command: [] }] } }),
      (err: unknown) => err instanceof BadMessageError && /command: the program is missing/.test(err.message),
    );
    await bw.deleteThread(info.id);
    await assert.rejects(bw.getThread(info.id), NotFoundError);
    await assert.rejects(bw.deleteThread(info.id), NotFoundError);
  });

  test("a turn streams its events in order, and the transcript has them all", TEST, async () => {
    const conn = await bw.connect({ create: {} });
    try {
      assert.ok(await conn.ping() >= 0);
      const turn = conn.chat("hello there");
      const events = await collect(turn, "turn");
      const types: string[] = events.map((e) => e.type);
      assert.equal(types[0], "user_echo");
      assert.equal(types.at(-1), "turn_done");
      const order: string[] = ["user_echo", "tool_call", "tool_output", "tool_result", "assistant_message", "turn_done"];
      let at = -1;
      for (const t of order) {
        const i = types.indexOf(t, at + 1);
        assert.ok(i > at, `${t} out of order in ${types.join(",")}`);
        at = i;
      }
      assertContiguous(events.map((e) => e.seq ?? 0));
      const done = await turn.result();
      assert.equal(done.reason, "stop");
      assert.equal(done.text, "Hello! I wrote /workspace/x and read it back.");
      const log = await bw.transcript(conn.thread);
      assert.deepEqual(log.map((e) => e.seq), events.map((e) => e.seq));
      assert.equal(conn.lastSeq, events.at(-1)?.seq);
    } finally {
      await conn.close();
    }
  });

  test("interrupt ends a running turn; a second message meanwhile is busy", TEST, async () => {
    const conn = await bw.connect();
    try {
      const turn = conn.chat("please sleep");
      const it = turn[Symbol.asyncIterator]();
      for (;;) {
        const r = await within(TURN, "tool_call", it.next());
        assert.ok(!r.done);
        if (r.value.type === "tool_output") break; // the command runs
      }
      await assert.rejects(within(TURN, "busy", conn.chat("another").result()), BusyError);
      conn.interrupt();
      const rest: Message[] = [];
      for (;;) {
        const r = await within(TURN, "turn end", it.next());
        if (r.done) break;
        rest.push(r.value);
      }
      const result = rest.find((m) => m.type === "tool_result");
      assert.equal(result?.type === "tool_result" && result.data.status, "interrupted");
      assert.equal((await turn.result()).reason, "interrupted");
    } finally {
      await conn.close();
    }
  });

  test("approvals: a held tool call runs once approved", TEST, async () => {
    const policy = { rules: [{ tool: "execute", action: "ask", reason: "test" }] };
    const conn = await bw.connect({ create: { policy } });
    try {
      const turn = conn.chat("approve me");
      let output = "";
      let decision = "";
      await within(TURN, "approval turn", (async () => {
        for await (const ev of turn) {
          if (ev.type === "approval_request") conn.approve(ev.data.approval_id, "fine");
          if (ev.type === "approval_decision") decision = ev.data.verdict;
          if (ev.type === "tool_output") output += ev.data.output;
        }
      })());
      assert.equal(decision, "approved");
      assert.match(output, /approved-run/);
      assert.equal((await turn.result()).reason, "stop");
      conn.approve("ap_nonexistent");
      const err = await within(TURN, "approval error", (async () => {
        for await (const ev of conn.events()) if (ev.type === "error") return ev;
        return undefined;
      })());
      assert.equal(err?.type === "error" && err.data.code, "not_found");
    } finally {
      await conn.close();
    }
  });

  test("run_tool: execute and the file tools, directly", TEST, async () => {
    const conn = await bw.connect();
    try {
      const run = conn.runTool("execute", { command: "echo out; exit 3" });
      const events = await collect(run, "run_tool");
      assert.deepEqual([...new Set(events.map((e) => e.type))], ["tool_call", "tool_output", "tool_result"]);
      const res = await run.result();
      assert.equal(res.status, "exited");
      assert.equal(res.exit_code, 3);
      assert.match(run.output, /out/);
      assert.equal((await within(TURN, "write", conn.runTool("write_file", { path: "d/f.txt", content: "one\ntwo\n" }).result())).error, undefined);
      assert.match((await within(TURN, "read", conn.runTool("read_file", { path: "d/f.txt" }).result())).output, /two/);
      assert.match((await within(TURN, "ls", conn.runTool("ls", { path: "d" }).result())).output, /f\.txt/);
      assert.match((await within(TURN, "grep", conn.runTool("grep", { pattern: "two", mode: "content" }).result())).output, /d\/f\.txt:2/);
      const outside = await within(TURN, "outside", conn.runTool("read_file", { path: "/etc/passwd" }).result());
      assert.match(outside.error ?? "", /outside the workspace/);
      assert.ok((await within(TURN, "unknown", conn.runTool("no_such_tool").result())).error);
    } finally {
      await conn.close();
    }
  });

  test("files: raw and tar uploads and downloads, folders both ways", TEST, async () => {
    const conn = await bw.connect();
    const local = mkdtempSync(join(tmpdir(), "bwts-files"));
    try {
      const bin = new Uint8Array(256).map((_, i) => i);
      assert.equal((await bw.uploadFile(conn.thread, "bin/all.bytes", bin)).failed, 0);
      assert.deepEqual(await bw.downloadFile(conn.thread, "bin/all.bytes"), bin);

      const res = await bw.uploadFiles(conn.thread, "in", [
        { path: "a.txt", data: "alpha" },
        { path: "sub", directory: true },
        { path: "sub/b.txt", data: "beta" },
        { path: "link", linkname: "a.txt" },
        { path: "../escape", data: "x" },
      ]);
      assert.equal(res.count, 4);
      assert.equal(res.failed, 1);
      assert.equal(res.files.find((f) => f.path.endsWith("escape"))?.code, "invalid_path");

      const dl = await bw.download(conn.thread, "in");
      const got = new Map<string, string>();
      for await (const e of dl.entries()) got.set(e.path, e.type === "symlink" ? `-> ${e.linkname}` : new TextDecoder().decode(e.data));
      assert.equal(got.get("in/a.txt"), "alpha");
      assert.equal(got.get("in/sub/b.txt"), "beta");
      assert.equal(got.get("in/link"), "-> a.txt");
      assert.equal(dl.result()?.failed, 0);

      mkdirSync(join(local, "proj", "src"), { recursive: true });
      writeFileSync(join(local, "proj", "src", "main.ts"), "export {};\n");
      symlinkSync("src/main.ts", join(local, "proj", "entry"));
      assert.equal((await uploadPath(bw, conn.thread, join(local, "proj"), "copy")).failed, 0);
      const back = join(local, "back");
      assert.equal((await downloadTo(bw, conn.thread, "copy/proj", back)).failed, 0);
      assert.equal(readFileSync(join(back, "proj", "src", "main.ts"), "utf8"), "export {};\n");
      assert.equal(readlinkSync(join(back, "proj", "entry")), "src/main.ts");
    } finally {
      rmSync(local, { recursive: true, force: true });
      await conn.close();
    }
  });

  test("terminals: open, write, read, resize, list, attach from another connection, exit", TEST, async () => {
    const conn = await bw.connect();
    const other = await bw.connect({ thread: conn.thread });
    try {
      const term = await within(TURN, "open", conn.openTerminal({ command: ["/bin/bash", "--norc"], cols: 100, rows: 30 }));
      assert.equal(term.info.cols, 100);
      const reader = term.read()[Symbol.asyncIterator]();
      const readUntil = async (re: RegExp) => {
        let text = "";
        while (!re.test(text)) {
          const r = await within(TURN, `output ${re}`, reader.next());
          if (r.done) throw new Error(`terminal ended before ${re}: ${text}`);
          text += new TextDecoder().decode(r.value);
        }
        return text;
      };
      term.write("echo sum-$((40+2))\n");
      await readUntil(/sum-42/);
      term.resize(120, 40);
      term.write("stty size\n");
      await readUntil(/40 120/);
      const list = await within(TURN, "list", conn.listTerminals());
      assert.ok(list.some((s) => s.session === term.session && s.cols === 120));
      const watcher = await within(TURN, "attach", other.attachTerminal(term.session));
      assert.match(watcher.screen, /40 120/);
      const watched = watcher.readAll();
      term.write("exit 7\n");
      assert.equal(await within(TURN, "exit", term.exited), 7);
      assert.equal(await within(TURN, "watcher exit", watcher.exited), 7);
      await within(TURN, "watcher output", watched);
      await assert.rejects(within(TURN, "attach gone", conn.attachTerminal("term_none")), NotFoundError);
    } finally {
      await other.close();
      await conn.close();
    }
  });

  test("resume: events arrive in order with no gap across a dropped connection", TEST, async () => {
    const proxy = await startProxy(env.url);
    const via = new Client({ url: proxy.url, token: env.token });
    try {
      const first = await via.connect({ create: {} });
      const turn = first.chat("count please");
      const seen: Message[] = [];
      const it = turn[Symbol.asyncIterator]();
      while (seen.filter((m) => m.type === "tool_output").length < 3) {
        const r = await within(TURN, "first events", it.next());
        assert.ok(!r.done);
        seen.push(r.value);
      }
      proxy.cut(); // the network breaks mid-turn
      await assert.rejects(
        within(TURN, "the drop", (async () => {
          for (;;) {
            const r = await it.next();
            if (r.done) return;
            seen.push(r.value);
          }
        })()),
        ConnectionClosedError,
      );
      const second = await via.connect({ thread: first.thread, afterSeq: first.lastSeq });
      try {
        seen.push(...(await collect(second.turn(turn.id), "resumed turn")));
        const seqs = seen.map((m) => m.seq ?? 0);
        assert.equal(seqs[0], 1);
        assertContiguous(seqs);
        assert.equal(seen.at(-1)?.type, "turn_done");
        const out = seen.map((m) => (m.type === "tool_output" ? m.data.output : "")).join("");
        for (let i = 1; i <= 30; i++) assert.match(out, new RegExp(`line ${i}\\r?\\n`));
      } finally {
        await second.close();
      }
      await first.close();

      // A cursor ahead of the log: served from the log's end, told so.
      const ahead = await bw.connect({ thread: first.thread, afterSeq: 1_000_000 });
      try {
        assert.equal(ahead.lastSeq, seen.at(-1)?.seq);
        const ev = await within(TURN, "seq_ahead", ahead.events().next());
        assert.equal(ev.value?.type === "error" && ev.value.data.code, "seq_ahead");
        assert.ok(ev.value?.type === "error" && errorFromCode(ev.value.data.code, "") instanceof SeqAheadError);
      } finally {
        await ahead.close();
      }
    } finally {
      await proxy.close();
    }
  });

  test("bad input raises the documented error", TEST, async () => {
    const wrong = new Client({ url: env.url, token: "wrong" });
    await assert.rejects(wrong.listThreads(), (err: unknown) => err instanceof UnauthorizedError && err.status === 401);
    await assert.rejects(wrong.connect(), UnauthorizedError);

    await assert.rejects(bw.getThread("t_000000000000"), NotFoundError);
    await assert.rejects(bw.connect({ thread: "t_000000000000" }), NotFoundError);
    await assert.rejects(bw.uploadFile("t_000000000000", "x", "x"), NotFoundError);

    const conn = await bw.connect();
    try {
      await assert.rejects(bw.downloadFile(conn.thread, "../../etc/passwd"), InvalidPathError);
      await assert.rejects(bw.uploadFile(conn.thread, "/etc/evil", "x"), InvalidPathError);
      await assert.rejects(bw.download(conn.thread, "no/such/file"), FileNotFoundError);
      await assert.rejects(bw.downloadFile(conn.thread, ""), IsDirectoryError);
      await assert.rejects(bw.uploadFile(conn.thread, "big", new Uint8Array(MAX_UPLOAD + 1)), TooLargeError);
      await assert.rejects(bw.uploadFiles(conn.thread, "big", [{ path: "big.bin", data: new Uint8Array(MAX_UPLOAD + 1) }]), TooLargeError);
    } finally {
      await conn.close();
    }
  });
});

// The connection to a deleted thread ends with not_found and a close.
test("a deleted thread's connection ends", TEST, async () => {
  const conn = await bw.connect();
  const events = (async () => {
    const got: Message[] = [];
    try {
      for await (const ev of conn.events()) got.push(ev);
    } catch (err) {
      return { got, err };
    }
    return { got, err: undefined };
  })();
  await bw.deleteThread(conn.thread);
  const { got, err } = await within(TURN, "close after delete", events);
  assert.ok(err instanceof ConnectionClosedError, String(err));
  assert.equal(err.closeCode, 1000);
  assert.ok(got.some((m) => m.type === "error" && m.data.code === "not_found"));
});
