// A small codec language for the wire protocol's JSON payloads. Each codec
// checks a decoded JSON value's shape, keeps only the fields the protocol
// defines, and encodes a typed value back the way the Go side does
// (bridge/wire): required fields always, optional ("omitempty") fields only
// when set. The golden-file test decodes and re-encodes every example in
// bridge/wire/testdata with these codecs, so a field the SDK does not know
// makes it fail.

/** Any JSON value. */
export type JSONValue = null | boolean | number | string | JSONValue[] | { [key: string]: JSONValue };

/** A JSON object, e.g. a tool's arguments. */
export type JSONObject = { [key: string]: JSONValue };

/** DecodeError says where a JSON value does not fit the protocol. */
export class DecodeError extends Error {
  override name = "DecodeError";
}

/** Codec decodes a JSON value to T and encodes T back to JSON. */
export interface Codec<T> {
  /** decode checks v at path (for messages) and returns the typed value. */
  decode(v: unknown, path: string): T;
  /** encode returns the JSON value for t. */
  encode(t: T): JSONValue;
  /** zero is the value of a required field a sender left out (Go's zero value). */
  zero(): T;
}

/** An optional ("omitempty") field: absent when undefined. */
export interface Optional<T> {
  readonly optional: Codec<T>;
}

type Field = Codec<unknown> | Optional<unknown>;
type Shape = Record<string, Field>;

type RequiredKeys<S extends Shape> = { [K in keyof S]: S[K] extends Optional<unknown> ? never : K }[keyof S];
type OptionalKeys<S extends Shape> = { [K in keyof S]: S[K] extends Optional<unknown> ? K : never }[keyof S];
type Simplify<T> = { [K in keyof T]: T[K] } & {};

/** Infer is the TypeScript type an object codec's shape describes. */
export type Infer<S extends Shape> = Simplify<
  { -readonly [K in RequiredKeys<S>]: S[K] extends Codec<infer T> ? T : never } & {
    -readonly [K in OptionalKeys<S>]?: S[K] extends Optional<infer T> ? T : never;
  }
>;

/** TypeOf is the type a codec decodes to. */
export type TypeOf<C> = C extends Codec<infer T> ? T : never;

function fail(path: string, want: string, v: unknown): never {
  const got = v === null ? "null" : Array.isArray(v) ? "array" : typeof v;
  throw new DecodeError(`${path}: want ${want}, got ${got}`);
}

function primitive<T extends string | number | boolean>(kind: "string" | "number" | "boolean", zero: T): Codec<T> {
  return {
    decode(v, path) {
      if (typeof v !== kind) fail(path, kind, v);
      return v as T;
    },
    encode: (t) => t,
    zero: () => zero,
  };
}

/** A JSON string. */
export const str: Codec<string> = primitive("string", "");
/** A JSON number. */
export const num: Codec<number> = primitive("number", 0);
/** A JSON boolean. */
export const bool: Codec<boolean> = primitive("boolean", false);

/** A string naming one of a set of values; other strings are kept (newer peers may add some). */
export function oneOf<T extends string>(..._values: T[]): Codec<T | (string & {})> {
  return str as Codec<T | (string & {})>;
}

/** Any JSON value, kept as it is (a tool's arguments, a policy). */
export const json: Codec<JSONValue> = {
  decode: (v) => v as JSONValue,
  encode: (t) => t,
  zero: () => null,
};

/** A JSON object kept as it is. */
export const object: Codec<JSONObject> = {
  decode(v, path) {
    if (v === null || typeof v !== "object" || Array.isArray(v)) fail(path, "object", v);
    return v as JSONObject;
  },
  encode: (t) => t,
  zero: () => ({}),
};

/** A JSON array of c; null decodes as empty (Go's nil slice). */
export function arr<T>(c: Codec<T>): Codec<T[]> {
  return {
    decode(v, path) {
      if (v === null) return [];
      if (!Array.isArray(v)) fail(path, "array", v);
      return v.map((x, i) => c.decode(x, `${path}[${i}]`));
    },
    encode: (t) => t.map((x) => c.encode(x)),
    zero: () => [],
  };
}

/** A JSON object of string keys to c values. */
export function record<T>(c: Codec<T>): Codec<Record<string, T>> {
  return {
    decode(v, path) {
      if (v === null) return {};
      if (typeof v !== "object" || Array.isArray(v)) fail(path, "object", v);
      const out: Record<string, T> = {};
      for (const [k, x] of Object.entries(v)) out[k] = c.decode(x, `${path}.${k}`);
      return out;
    },
    encode(t) {
      const out: Record<string, JSONValue> = {};
      for (const [k, x] of Object.entries(t)) out[k] = c.encode(x);
      return out;
    },
    zero: () => ({}),
  };
}

/** Marks a field optional: omitted when absent, as Go's omitempty. */
export function opt<T>(c: Codec<T>): Optional<T> {
  return { optional: c };
}

function isOptional(f: Field): f is Optional<unknown> {
  return "optional" in f;
}

/** An object with the fields of shape; other fields are dropped. */
export function obj<S extends Shape>(shape: S): Codec<Infer<S>> {
  const fields = Object.entries(shape);
  return {
    decode(v, path) {
      if (v === null || typeof v !== "object" || Array.isArray(v)) fail(path, "object", v);
      const src = v as Record<string, unknown>;
      const out: Record<string, unknown> = {};
      for (const [k, f] of fields) {
        const x = src[k];
        if (isOptional(f)) {
          if (x !== undefined && x !== null) out[k] = f.optional.decode(x, `${path}.${k}`);
        } else {
          out[k] = x === undefined ? f.zero() : f.decode(x, `${path}.${k}`);
        }
      }
      return out as Infer<S>;
    },
    encode(t) {
      const src = t as Record<string, unknown>;
      const out: Record<string, JSONValue> = {};
      for (const [k, f] of fields) {
        const x = src[k];
        if (isOptional(f)) {
          if (x !== undefined) out[k] = f.optional.encode(x);
        } else {
          out[k] = (f as Codec<unknown>).encode(x === undefined ? f.zero() : x);
        }
      }
      return out;
    },
    zero() {
      const out: Record<string, unknown> = {};
      for (const [k, f] of fields) if (!isOptional(f)) out[k] = f.zero();
      return out as Infer<S>;
    },
  };
}

/** The fields of several shapes in one (Go's embedded structs). */
export function merge<A extends Shape, B extends Shape>(a: A, b: B): A & B {
  return { ...a, ...b };
}
