// The README's TypeScript quick start; test/bridge.test.ts runs it against
// a real bridge. Run: BOXWIRE_URL=http://127.0.0.1:7420 BOXWIRE_TOKEN=… node quickstart.js
import { Client } from "boxwire";

const bw = Client.fromEnv(); // BOXWIRE_URL, BOXWIRE_TOKEN
const conn = await bw.connect(); // a new thread, in its own sandbox
try {
  const turn = conn.chat("hello! please write hello into /workspace/x and show me the file");
  for await (const ev of turn) {
    if (ev.type === "tool_call") console.log(`$ ${JSON.stringify(ev.data.arguments)}`);
    if (ev.type === "tool_output") process.stdout.write(ev.data.output);
  }
  const done = await turn.result();
  console.log(`[${done.reason}] ${done.text}`);

  const run = await conn.execute("wc -c < /workspace/x"); // a tool, run directly
  console.log(`x has ${run.output.trim()} bytes`);
  console.log(new TextDecoder().decode(await bw.downloadFile(conn.thread, "x")));
} finally {
  await conn.close();
  await bw.deleteThread(conn.thread);
}
