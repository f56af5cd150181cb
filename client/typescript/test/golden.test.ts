// Item 4 of issue 25: one protocol, one source of truth. Every golden
// example in bridge/wire/testdata is decoded with the SDK's message types
// and encoded back; the result must equal the file as JSON. A field, a type
// or a shape the SDK does not follow fails here.
import assert from "node:assert/strict";
import { readdirSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { test } from "node:test";
import { decodeMessage, encodeMessage, ImageList, isEventType, MESSAGE_TYPES, ThreadInfo, type Codec } from "boxwire";
import { repoRoot } from "./paths.js";

const dir = join(repoRoot, "bridge", "wire", "testdata");
const files = readdirSync(dir).filter((f) => f.endsWith(".json")).sort();

test("there are golden files", () => {
  assert.ok(files.length > 40, `only ${files.length} golden files in ${dir}`);
});

for (const name of files) {
  test(`golden ${name} round-trips`, () => {
    const want: unknown = JSON.parse(readFileSync(join(dir, name), "utf8"));
    const msg = decodeMessage(want);
    assert.deepStrictEqual(encodeMessage(msg), want);
    // The text form goes through the same path.
    assert.deepStrictEqual(encodeMessage(decodeMessage(JSON.stringify(want))), want);
    if (msg.type !== "error") {
      assert.equal(isEventType(msg.type), msg.seq !== undefined, `${msg.type}: event type and seq disagree`);
    }
  });
}

// The HTTP API's bodies (bridge/wire/testdata/http) round-trip through
// their codecs too.
const httpDir = join(dir, "http");
const bodies: Record<string, Codec<unknown>> = { thread_info: ThreadInfo, thread_info_suspended: ThreadInfo, image_list: ImageList };
const httpFiles = readdirSync(httpDir).filter((f) => f.endsWith(".json")).sort();

test("every HTTP body golden file has a codec", () => {
  assert.deepStrictEqual(httpFiles.map((f) => f.replace(/\.json$/, "")), Object.keys(bodies).sort());
});

for (const name of httpFiles) {
  test(`golden http/${name} round-trips`, () => {
    const want: unknown = JSON.parse(readFileSync(join(httpDir, name), "utf8"));
    const codec = bodies[name.replace(/\.json$/, "")];
    assert.ok(codec, `no codec for ${name}`);
    assert.deepStrictEqual(codec.encode(codec.decode(want, name)), want);
  });
}

test("every message type the SDK knows has a golden file", () => {
  const seen = new Set(files.map((f) => (JSON.parse(readFileSync(join(dir, f), "utf8")) as { type: string }).type));
  const missing = MESSAGE_TYPES.filter((t) => !seen.has(t));
  assert.deepStrictEqual(missing, [], "types without a golden file: the protocol dropped them, or a file is missing");
});

test("a field the SDK does not know fails the round trip", () => {
  const want = { type: "user_echo", seq: 1, data: { text: "x", brand_new: true } };
  assert.notDeepStrictEqual(encodeMessage(decodeMessage(want)), want);
});

test("a payload of the wrong shape is refused", () => {
  assert.throws(() => decodeMessage({ type: "user_message", data: { text: 5 } }), /user_message\.data\.text: want string/);
  assert.throws(() => decodeMessage({ type: "user_message" }), /missing data/);
  assert.throws(() => decodeMessage({ type: "bogus" }), { name: "UnknownMessageTypeError" });
  assert.throws(() => decodeMessage("not json"), { name: "DecodeError" });
});
