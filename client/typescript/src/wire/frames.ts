// Binary frames carry terminal bytes (docs/protocol.md, Terminals): byte 0
// is the frame version (1) in the high nibble and the kind in the low one,
// byte 1 the session id's length (1–255), then the session id, then at
// most 64 KiB of raw bytes.

/** The binary frame format version. */
export const FRAME_VERSION = 1;

/** The most terminal bytes one frame carries. */
export const MAX_FRAME_DATA = 64 << 10;

/** Frame kinds: output goes towards clients, input towards the agent. */
export const FrameKind = { Output: 1, Input: 2 } as const;
export type FrameKind = (typeof FrameKind)[keyof typeof FrameKind];

/** One decoded binary frame; data is a view into the frame. */
export interface Frame {
  kind: FrameKind;
  session: string;
  data: Uint8Array;
}

/** FrameError says a binary frame is malformed. */
export class FrameError extends Error {
  override name = "FrameError";
}

const utf8 = new TextEncoder();
const utf8Decoder = new TextDecoder();

/** encodeFrame builds the frame for kind, session and data. */
export function encodeFrame(kind: FrameKind, session: string, data: Uint8Array): Uint8Array {
  const id = utf8.encode(session);
  if (id.length === 0 || id.length > 255) throw new FrameError(`session id of ${id.length} bytes`);
  if (data.length > MAX_FRAME_DATA) throw new FrameError(`${data.length} bytes of data, more than ${MAX_FRAME_DATA}`);
  const out = new Uint8Array(2 + id.length + data.length);
  out[0] = (FRAME_VERSION << 4) | (kind & 0x0f);
  out[1] = id.length;
  out.set(id, 2);
  out.set(data, 2 + id.length);
  return out;
}

/** decodeFrame parses a binary frame; it throws FrameError for a malformed one. */
export function decodeFrame(b: Uint8Array): Frame {
  if (b.length < 2) throw new FrameError(`${b.length} bytes, shorter than a header`);
  const version = (b[0] ?? 0) >> 4;
  if (version !== FRAME_VERSION) throw new FrameError(`version ${version}, want ${FRAME_VERSION}`);
  const kind = (b[0] ?? 0) & 0x0f;
  if (kind !== FrameKind.Output && kind !== FrameKind.Input) throw new FrameError(`unknown kind ${kind}`);
  const n = b[1] ?? 0;
  if (n === 0 || b.length < 2 + n) throw new FrameError(`session id of ${n} bytes in ${b.length}`);
  const data = b.subarray(2 + n);
  if (data.length > MAX_FRAME_DATA) throw new FrameError(`${data.length} bytes of data, more than ${MAX_FRAME_DATA}`);
  return { kind, session: utf8Decoder.decode(b.subarray(2, 2 + n)), data };
}
