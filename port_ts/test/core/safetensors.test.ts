// safetensors: a buffer written here with every dtype decodes bit for bit (F64, F32, F16 with
// subnormals and infinities, BF16, integers), from a Uint8Array at an odd offset as well as an
// ArrayBuffer; damaged files are named. tests/test_pretrained.py checks the same file against
// the reference reader. safetensors-hostile.json: over a hundred hostile and edge-case files,
// each with the verdict and message both readers must give (tests/test_pretrained.py runs the
// reference on the same table).
import { test } from "node:test";
import assert from "node:assert/strict";
import { parseSafetensors, loadTensor, tensorNames, SafetensorsError } from "../../src/core/safetensors.ts";
import { fixture } from "../toolkit.ts";

interface Part { name: string; dtype: string; shape: number[]; bytes: Uint8Array }

function build(parts: Part[], metadata: Record<string, string> = {}): Uint8Array {
  const header: Record<string, unknown> = { __metadata__: metadata };
  let offset = 0;
  for (const p of parts) {
    header[p.name] = { dtype: p.dtype, shape: p.shape, data_offsets: [offset, offset + p.bytes.length] };
    offset += p.bytes.length;
  }
  const text = new TextEncoder().encode(JSON.stringify(header) + "  ");
  const out = new Uint8Array(8 + text.length + offset);
  new DataView(out.buffer).setUint32(0, text.length, true);
  out.set(text, 8);
  let at = 8 + text.length;
  for (const p of parts) { out.set(p.bytes, at); at += p.bytes.length; }
  return out;
}

function bytesOf(n: number, write: (v: DataView, i: number) => void, size: number): Uint8Array {
  const b = new Uint8Array(n * size);
  const v = new DataView(b.buffer);
  for (let i = 0; i < n; i++) write(v, i);
  return b;
}

const F64 = [1.5, -0, Math.PI, 1e-300, -Infinity, 2 ** -1074];
const F32 = [0.1, -3.25, 1e-40, 3.4e38]; // as float32: Math.fround of each
const F16_BITS = [0x0000, 0x8000, 0x3c00, 0xc100, 0x7bff, 0x0001, 0x03ff, 0x7c00, 0xfc00, 0x7e00];
const F16_VALUES = [0, -0, 1, -2.5, 65504, 2 ** -24, 1023 * 2 ** -24, Infinity, -Infinity, NaN];
const BF16_BITS = [0x3f80, 0xc049, 0x0001, 0x7f80, 0x8000];
const BF16_VALUES = [1, -3.140625, 2 ** -133, Infinity, -0];

function file(): Uint8Array {
  return build([
    { name: "f64", dtype: "F64", shape: [2, 3], bytes: bytesOf(6, (v, i) => v.setFloat64(8 * i, F64[i], true), 8) },
    { name: "f32", dtype: "F32", shape: [4], bytes: bytesOf(4, (v, i) => v.setFloat32(4 * i, F32[i], true), 4) },
    { name: "f16", dtype: "F16", shape: [10], bytes: bytesOf(10, (v, i) => v.setUint16(2 * i, F16_BITS[i], true), 2) },
    { name: "bf16", dtype: "BF16", shape: [5], bytes: bytesOf(5, (v, i) => v.setUint16(2 * i, BF16_BITS[i], true), 2) },
    { name: "i64", dtype: "I64", shape: [3], bytes: bytesOf(3, (v, i) => v.setBigInt64(8 * i, [-(2n ** 31n), 0n, 2n ** 31n - 1n][i], true), 8) },
    { name: "u8", dtype: "U8", shape: [2], bytes: Uint8Array.from([0, 255]) },
  ], { format: "pt", note: "caf\u00e9" });
}

function same(a: ArrayLike<number>, b: ArrayLike<number>): void {
  assert.equal(a.length, b.length);
  for (let i = 0; i < a.length; i++) assert.ok(Object.is(a[i], b[i]), `element ${i}: ${a[i]} vs ${b[i]}`);
}

test("every dtype decodes to the exact double (or integer), -0 and NaN included", () => {
  const st = parseSafetensors(file());
  assert.deepEqual(tensorNames(st), ["f64", "f32", "f16", "bf16", "i64", "u8"]);
  assert.equal(st.metadata.note, "caf\u00e9");
  same(loadTensor(st, "f64").data, F64);
  assert.deepEqual(loadTensor(st, "f64").shape, [2, 3]);
  same(loadTensor(st, "f32").data, F32.map(Math.fround));
  same(loadTensor(st, "f16").data, F16_VALUES);
  same(loadTensor(st, "bf16").data, BF16_VALUES);
  const i64 = loadTensor(st, "i64");
  assert.ok(i64.data instanceof Int32Array);
  same(i64.data, [-(2 ** 31), 0, 2 ** 31 - 1]);
  same(loadTensor(st, "u8").data, [0, 255]);
});

test("a Uint8Array view at an odd offset and a bare ArrayBuffer read the same", () => {
  const bytes = file();
  const shifted = new Uint8Array(bytes.length + 3);
  shifted.set(bytes, 3);
  const view = parseSafetensors(shifted.subarray(3));
  const buffer = parseSafetensors(bytes.slice().buffer);
  for (const name of ["f64", "f32", "f16", "bf16"]) same(loadTensor(view, name).data, loadTensor(buffer, name).data);
});

test("damage is named: short, header past the end, not JSON, offsets, unknown tensor", () => {
  const bytes = file();
  assert.throws(() => parseSafetensors(bytes.subarray(0, 5)), /too short/);
  const long = bytes.slice();
  new DataView(long.buffer).setUint32(0, 1e9, true);
  assert.throws(() => parseSafetensors(long), /runs past the end/);
  const notJson = bytes.slice();
  notJson[8] = "[".charCodeAt(0);
  assert.throws(() => parseSafetensors(notJson), /is not JSON: /);
  assert.throws(() => parseSafetensors(bytes.subarray(0, bytes.length - 1)), /spans bytes/);
  assert.throws(() => loadTensor(parseSafetensors(bytes), "nope"), SafetensorsError);
});

// ---- the shared table of hostile files ----
type HeaderPart = string | { hex: string };
interface Hostile {
  what: string; bytes_hex?: string; length?: string; header?: string; header_parts?: HeaderPart[]; data_hex?: string;
  error?: string; error_starts?: string; names?: string[]; metadata?: unknown;
  tensors?: Record<string, { shape?: number[]; values?: (number | string)[]; error?: string }>;
}

const hex = (h: string) => Uint8Array.from(h.match(/../g) ?? [], (b) => parseInt(b, 16));
const utf8 = (s: string) => new TextEncoder().encode(s);

/** The file's bytes, as the table's description says (twin: hostile_bytes in test_pretrained.py). */
function hostileBytes(f: Hostile): Uint8Array {
  if (f.bytes_hex !== undefined) return hex(f.bytes_hex);
  const parts = f.header_parts ?? [f.header ?? ""];
  const header = parts.map((p) => (typeof p === "string" ? utf8(p) : hex(p.hex)));
  const data = hex(f.data_hex ?? "");
  const size = header.reduce((a, p) => a + p.length, 0);
  const out = new Uint8Array(8 + size + data.length);
  new DataView(out.buffer).setBigUint64(0, BigInt(f.length ?? size), true);
  let at = 8;
  for (const p of [...header, data]) { out.set(p, at); at += p.length; }
  return out;
}

const special: Record<string, number> = { NaN: NaN, Infinity: Infinity, "-Infinity": -Infinity, "-0": -0 };
const table = fixture<{ files: Hostile[] }>("safetensors-hostile.json");

test("the hostile table is the table: over a hundred files, each expecting something", () => {
  assert.ok(table.files.length >= 100, `${table.files.length} files`);
  for (const f of table.files) assert.ok((f.error ?? f.error_starts ?? f.names) !== undefined, f.what);
});

for (const f of table.files) {
  test(`hostile file: ${f.what}`, () => {
    const bytes = hostileBytes(f);
    if (f.error !== undefined || f.error_starts !== undefined) {
      assert.throws(() => parseSafetensors(bytes), (err: Error) => {
        assert.ok(err instanceof SafetensorsError, `${err}`);
        if (f.error !== undefined) assert.equal(err.message, f.error);
        else assert.ok(err.message.startsWith(f.error_starts!) && err.message.length > f.error_starts!.length, err.message);
        return true;
      });
      return;
    }
    const st = parseSafetensors(bytes);
    assert.deepEqual(tensorNames(st), f.names);
    if (f.metadata !== undefined) assert.deepEqual(st.metadata, f.metadata);
    for (const [name, want] of Object.entries(f.tensors ?? {})) {
      if (want.error !== undefined) {
        assert.throws(() => loadTensor(st, name), (err: Error) => err instanceof SafetensorsError && err.message === want.error, name);
        continue;
      }
      const got = loadTensor(st, name);
      assert.deepEqual(got.shape, want.shape, name);
      assert.equal(got.data instanceof Float64Array, ["F64", "F32", "F16", "BF16"].includes(st.header[name].dtype), `${name}: array type`);
      same(got.data, want.values!.map((v) => (typeof v === "string" ? special[v] : v)));
    }
  });
}
