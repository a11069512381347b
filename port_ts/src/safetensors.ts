// Reading the safetensors format ourselves (twin: safetensors.py). docs/pretrained.md.
// The loader takes the file's bytes (a Uint8Array or an ArrayBuffer, as a browser's fetch or
// FileReader hands them); only cli.ts reads files.
//   bytes 0..7        N, the header's length, an unsigned 64-bit little-endian integer
//   bytes 8..8+N      the header: UTF-8 JSON {name: {"dtype", "shape", "data_offsets": [begin, end]}},
//                     plus an optional "__metadata__" {str: str}; may end in spaces
//   bytes 8+N..       the data: tensor `name` is bytes [begin, end) of it, row-major, little-endian
// Floating dtypes become float64 exactly (every F16, BF16 and F32 value is a double): F64, F32,
// F16 (IEEE half: subnormals, infinities, NaN), BF16 (the top 16 bits of a float32). Integer
// dtypes I64, I32, I16, I8, U8 and BOOL become Int32Array (I64 values must fit 32 bits). Only
// the tensors asked for are decoded; the header is checked whole, up front.

import type { IntTensor, Tensor } from "./ops.ts";

const DTYPE_SIZES: Record<string, number> = { F64: 8, F32: 4, F16: 2, BF16: 2, I64: 8, I32: 4, I16: 2, I8: 1, U8: 1, BOOL: 1 };

export interface SafetensorsEntry {
  dtype: string;
  shape: number[];
  data_offsets: [number, number];
}

export interface SafetensorsFile {
  header: Record<string, SafetensorsEntry>;
  metadata: Record<string, unknown>;
  data: DataView; // the data section
}

/** The bytes are not a safetensors file we can read; the message says what was found. */
export class SafetensorsError extends Error {}

/** Check the header of a safetensors buffer; nothing is decoded yet. */
export function parseSafetensors(buf: Uint8Array | ArrayBuffer): SafetensorsFile {
  const bytes = buf instanceof Uint8Array ? buf : new Uint8Array(buf);
  if (bytes.length < 8) throw new SafetensorsError(`safetensors: ${bytes.length} bytes is too short for the 8-byte header length`);
  const view = new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength);
  const n = view.getUint32(0, true) + view.getUint32(4, true) * 2 ** 32;
  if (n > bytes.length - 8) {
    throw new SafetensorsError(`safetensors: header length ${n} runs past the end of the ${bytes.length}-byte buffer`);
  }
  let header: unknown;
  try {
    header = JSON.parse(decodeUtf8(bytes.subarray(8, 8 + n)));
  } catch (err) {
    throw new SafetensorsError(`safetensors: the ${n}-byte header is not UTF-8 JSON: ${(err as Error).message}`);
  }
  if (header === null || typeof header !== "object" || Array.isArray(header)) {
    throw new SafetensorsError(`safetensors: the header must be a JSON object, got ${JSON.stringify(header)?.slice(0, 40)}`);
  }
  const entries = { ...(header as Record<string, unknown>) };
  const metadata = (entries.__metadata__ ?? {}) as Record<string, unknown>;
  delete entries.__metadata__;
  const data = new DataView(bytes.buffer, bytes.byteOffset + 8 + n, bytes.length - 8 - n);
  for (const [name, entry] of Object.entries(entries)) checkEntry(name, entry, data.byteLength);
  return { header: entries as Record<string, SafetensorsEntry>, metadata, data };
}

/** UTF-8 bytes to a string (the core has no TextDecoder in its declared library). */
function decodeUtf8(b: Uint8Array): string {
  let out = "";
  for (let i = 0; i < b.length;) {
    const c = b[i];
    const extra = c < 0x80 ? 0 : c >= 0xf0 ? 3 : c >= 0xe0 ? 2 : c >= 0xc0 ? 1 : -1;
    if (extra < 0 || i + extra >= b.length) {
      throw new SafetensorsError(`safetensors: invalid UTF-8 at header byte ${i}`);
    }
    let cp = extra === 0 ? c : c & (0x3f >> extra);
    for (let k = 1; k <= extra; k++) {
      const t = b[i + k];
      if ((t & 0xc0) !== 0x80) throw new SafetensorsError(`safetensors: invalid UTF-8 at header byte ${i + k}`);
      cp = (cp << 6) | (t & 0x3f);
    }
    out += String.fromCodePoint(cp);
    i += extra + 1;
  }
  return out;
}

function checkEntry(name: string, entry: unknown, dataLen: number): void {
  const e = entry as Partial<SafetensorsEntry> | null;
  if (e === null || typeof e !== "object" || typeof e.dtype !== "string" || !Array.isArray(e.shape)
      || !Array.isArray(e.data_offsets) || e.data_offsets.length !== 2) {
    throw new SafetensorsError(`safetensors: tensor '${name}' needs dtype, shape and data_offsets [begin, end], got ${JSON.stringify(entry)}`);
  }
  const [begin, end] = e.data_offsets;
  if (![...e.shape, begin, end].every((s) => Number.isInteger(s) && s >= 0)) {
    throw new SafetensorsError(`safetensors: tensor '${name}' has a shape or offsets that are not non-negative integers: ${JSON.stringify(entry)}`);
  }
  if (!(begin <= end && end <= dataLen)) {
    throw new SafetensorsError(`safetensors: tensor '${name}' spans bytes [${begin}, ${end}) of a ${dataLen}-byte data section`);
  }
  if (Object.hasOwn(DTYPE_SIZES, e.dtype)) {
    const count = e.shape.reduce((a, s) => a * s, 1);
    if (end - begin !== count * DTYPE_SIZES[e.dtype]) {
      throw new SafetensorsError(`safetensors: tensor '${name}' (${e.dtype} [${e.shape}]) needs ${count * DTYPE_SIZES[e.dtype]} bytes, ` +
        `its offsets give ${end - begin}`);
    }
  }
}

/** The tensor names of a parsed file, in header order. */
export function tensorNames(st: SafetensorsFile): string[] {
  return Object.keys(st.header);
}

/** IEEE half-precision bits to the double they encode (exact). */
function halfToNumber(h: number): number {
  const sign = h & 0x8000 ? -1 : 1, e = (h >> 10) & 0x1f, m = h & 0x3ff;
  if (e === 0) return sign * m * 2 ** -24; // zero and subnormals
  if (e === 31) return m === 0 ? sign * Infinity : NaN;
  return sign * (1024 + m) * 2 ** (e - 25);
}

/** Decode one tensor: Float64Array for the floating dtypes, Int32Array for the integer ones. */
export function loadTensor(st: SafetensorsFile, name: string): Tensor | IntTensor {
  const entry = Object.hasOwn(st.header, name) ? st.header[name] : undefined;
  if (entry === undefined) {
    throw new SafetensorsError(`safetensors: no tensor '${name}'; the file has ${tensorNames(st).length} tensors, ` +
      `e.g. ${tensorNames(st).slice(0, 3).join(", ")}`);
  }
  const { dtype, shape } = entry;
  if (!Object.hasOwn(DTYPE_SIZES, dtype)) {
    throw new SafetensorsError(`safetensors: tensor '${name}' has dtype ${dtype}; this reader knows ${Object.keys(DTYPE_SIZES).sort().join(", ")}`);
  }
  const begin = entry.data_offsets[0], size = DTYPE_SIZES[dtype];
  const count = (entry.data_offsets[1] - begin) / size, v = st.data;
  if (dtype === "F64" || dtype === "F32" || dtype === "F16" || dtype === "BF16") {
    const out = new Float64Array(count);
    if (dtype === "F64") for (let i = 0; i < count; i++) out[i] = v.getFloat64(begin + 8 * i, true);
    else if (dtype === "F32") for (let i = 0; i < count; i++) out[i] = v.getFloat32(begin + 4 * i, true);
    else if (dtype === "F16") for (let i = 0; i < count; i++) out[i] = halfToNumber(v.getUint16(begin + 2 * i, true));
    else {
      const scratch = new DataView(new ArrayBuffer(4));
      for (let i = 0; i < count; i++) {
        scratch.setUint32(0, v.getUint16(begin + 2 * i, true) << 16 >>> 0); // BF16: the top half of a float32
        out[i] = scratch.getFloat32(0);
      }
    }
    return { shape: [...shape], data: out };
  }
  const out = new Int32Array(count);
  for (let i = 0; i < count; i++) {
    const at = begin + size * i;
    let value: number;
    if (dtype === "I64") value = Number(v.getBigInt64(at, true));
    else if (dtype === "I32") value = v.getInt32(at, true);
    else if (dtype === "I16") value = v.getInt16(at, true);
    else if (dtype === "I8") value = v.getInt8(at);
    else value = v.getUint8(at);
    if (value < -(2 ** 31) || value > 2 ** 31 - 1) {
      throw new SafetensorsError(`safetensors: tensor '${name}' (I64) holds values outside the 32-bit range the port's integer tensors can hold`);
    }
    out[i] = value;
  }
  return { shape: [...shape], data: out };
}
