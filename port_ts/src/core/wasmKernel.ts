// The Wasm product kernel of core/ops.ts (port only: the reference's products are NumPy's loops
// in index order, reference/core/ops.py). ops.ts keeps the JavaScript kernel, which is the
// specification and the fallback, and chooses between the two (productEngine).
//
// The same products in WebAssembly SIMD (f64x2), every bit the same.
// Two lanes of an f64x2 hold two DIFFERENT outputs of one row (columns n and n+1), never two
// terms of one sum: lane j of an accumulator is exactly the scalar accumulator of output
// (m, n + j) of productKernel (ops.ts), acc = acc + a*b for k = 0..K-1 from +0, with f64x2.mul
// then f64x2.add (two roundings, IEEE binary64 per lane, as the JavaScript `s += x*y`; no fused
// multiply-add, no relaxed SIMD). So each output keeps its order and its bits; only the loads
// are shared.
//
// Layout in the module's memory (byte addresses; every block 16-byte aligned):
//   A    as the caller has it, read through byte strides sam (rows m) and sak (summed axis k);
//   B    (K, Np) rows at byte stride bRow, Np = N rounded up to a multiple of 4: a caller's
//        rows as they are (N a multiple of 4, columns adjacent), or packed with pad columns zero;
//   O    (M, Np) rows at byte stride oRow: in the caller's tensor (N a multiple of 4), or in a
//        scratch block whose pad columns are computed and never copied out.
// A batch of products repeats this at byte strides aBatch, bBatch (0: one shared B), oBatch.
// The kernel computes 4 rows x 4 columns per pass over k (eight f64x2 accumulators), then the
// last M mod 4 rows (3, 2 or 1) together in one more pass per four columns.
// The bytes are assembled below by a small encoder of the binary format (no external tool);
// the whole module is 1650 bytes (productEngine.moduleBytes), far under the 4 KB limit for a synchronous
// `new WebAssembly.Module` on a browser's main thread.

// The few WebAssembly types used here (the core is type-checked without DOM or Node types).
export interface WasmMemory { readonly buffer: ArrayBuffer; grow(pages: number): number }
interface WasmApi {
  validate(bytes: Uint8Array): boolean;
  Module: new (bytes: Uint8Array) => object;
  Instance: new (module: object) => { exports: Record<string, unknown> };
}
export type ProductFn = (aPtr: number, sam: number, sak: number, bPtr: number, bRow: number, oPtr: number, oRow: number,
  M: number, K: number, Np: number, batch: number, aBatch: number, bBatch: number, oBatch: number) => void;

/** Unsigned LEB128, the binary format's integers (sizes, counts, opcodes, offsets). */
function uleb(v: number): number[] {
  const out: number[] = [];
  do { let byte = v & 0x7f; v >>>= 7; if (v !== 0) byte |= 0x80; out.push(byte); } while (v !== 0);
  return out;
}
/** A section or a function body: its byte length, then its bytes. */
function sized(bytes: number[]): number[] { return [...uleb(bytes.length), ...bytes]; }
function name(s: string): number[] { return sized([...s].map((c) => c.charCodeAt(0))); }

const I32 = 0x7f, V128 = 0x7b;

/** The product kernel's bytes: one function `product` (14 i32 parameters, see ProductFn) and
 * one exported memory `mem`. */
function productModuleBytes(): number[] {
  // Locals: the 12 parameters, then i32 work locals, then v128 accumulators and operands.
  const P = ["aPtr", "sam", "sak", "bPtr", "bRow", "oPtr", "oRow", "M", "K", "Np", "batch", "aBatch", "bBatch", "oBatch"];
  const W = ["p", "m", "n", "k", "pa", "pb", "po", "sam2", "sam3", "oRow2", "oRow3", "a0", "o0", "M4"];
  const V = ["c00", "c01", "c10", "c11", "c20", "c21", "c30", "c31", "b0", "b1", "x"];
  const idx: Record<string, number> = {};
  [...P, ...W, ...V].forEach((s, i) => { idx[s] = i; });
  const get = (s: string) => [0x20, idx[s]], set = (s: string) => [0x21, idx[s]];
  const i32 = (v: number) => [0x41, v & 0x7f]; // i32.const of the few constants here (-64 <= v < 64: one signed LEB128 byte)
  const add = 0x6a, mul = 0x6c, ltU = 0x49, leU = 0x4d, geU = 0x4f, and = 0x71;
  const simd = (op: number, ...imm: number[]) => [0xfd, ...uleb(op), ...imm];
  const load = (offset: number) => simd(0x00, 3, ...uleb(offset));       // v128.load, align 8
  const splat = () => simd(0x0a, 3, 0);                                  // v128.load64_splat
  const store = (offset: number) => simd(0x0b, 3, ...uleb(offset));      // v128.store
  const f64x2Add = simd(0xf0), f64x2Mul = simd(0xf2);
  const zero = simd(0x0c, ...new Array(16).fill(0));                      // v128.const 0 (+0.0, +0.0)
  const loop = (body: number[]) => [0x03, 0x40, ...body, 0x0b];           // loop ... end (do-while with br_if 0)
  const block = (body: number[]) => [0x02, 0x40, ...body, 0x0b];
  const inc = (s: string, by: number[]) => [...get(s), ...by, add, ...set(s)];
  // acc = acc + x * b (the scalar kernel's s += x*y, per lane)
  const mulAdd = (acc: string, b: string) => [...get(acc), ...get("x"), ...get(b), ...f64x2Mul, ...f64x2Add, ...set(acc)];
  // x = both lanes A[row r of the block, k], at pa + r * sam
  const loadX = (r: number) => [...get("pa"), ...(r === 0 ? [] : [...get(["", "sam", "sam2", "sam3"][r]), add]), ...splat(), ...set("x")];
  const rows = (R: number) => {
    const accs = Array.from({ length: R }, (_, r) => [`c${r}0`, `c${r}1`]);
    const kBody = [
      ...get("pb"), ...load(0), ...set("b0"), ...get("pb"), ...load(16), ...set("b1"),
      ...accs.flatMap(([c0, c1], r) => [...loadX(r), ...mulAdd(c0, "b0"), ...mulAdd(c1, "b1")]),
      ...inc("pa", get("sak")), ...inc("pb", get("bRow")), ...inc("k", i32(1)),
      ...get("k"), ...get("K"), ltU, 0x0d, 0,                              // br_if k < K (K >= 1)
    ];
    const storeRow = (r: number) => {
      const addr = [...get("po"), ...(r === 0 ? [] : [...get(["", "oRow", "oRow2", "oRow3"][r]), add])];
      return [...addr, ...get(accs[r][0]), ...store(0), ...addr, ...get(accs[r][1]), ...store(16)];
    };
    // for n = 0, 4, .. < Np: the accumulators from +0, the pass over k, the stores
    return loop([
      ...accs.flat().flatMap((c) => [...zero, ...set(c)]),
      ...get("a0"), ...get("m"), ...get("sam"), mul, add, ...set("pa"),
      ...get("bPtr"), ...get("p"), ...get("bBatch"), mul, add, ...get("n"), ...i32(8), mul, add, ...set("pb"),
      ...get("o0"), ...get("m"), ...get("oRow"), mul, add, ...get("n"), ...i32(8), mul, add, ...set("po"),
      ...i32(0), ...set("k"), ...loop(kBody),
      ...Array.from({ length: R }, (_, r) => storeRow(r)).flat(),
      ...inc("n", i32(4)), ...get("n"), ...get("Np"), ltU, 0x0d, 0,
    ]);
  };
  const body = [
    ...get("oRow"), ...i32(2), mul, ...set("oRow2"), ...get("oRow2"), ...get("oRow"), add, ...set("oRow3"),
    ...get("sam"), ...i32(2), mul, ...set("sam2"), ...get("sam2"), ...get("sam"), add, ...set("sam3"),
    ...get("M"), ...i32(-4), and, ...set("M4"),                            // rows in blocks of 4
    ...loop([                                                               // for p = 0 .. batch-1 (batch >= 1)
      ...get("aPtr"), ...get("p"), ...get("aBatch"), mul, add, ...set("a0"),
      ...get("oPtr"), ...get("p"), ...get("oBatch"), mul, add, ...set("o0"),
      ...i32(0), ...set("m"),
      ...block(loop([                                                       // while m < M4: 4 rows
        ...get("m"), ...get("M4"), geU, 0x0d, 1,
        ...i32(0), ...set("n"), ...rows(4), ...inc("m", i32(4)), 0x0c, 0,
      ])),
      ...[3, 2, 1].flatMap((R) => [                                          // the last M mod 4 rows in one pass:
        ...get("m"), ...i32(R), add, ...get("M"), leU, 0x04, 0x40,           // if m + R <= M (3, 2 or 1 rows)
        ...i32(0), ...set("n"), ...rows(R), ...inc("m", i32(R)), 0x0b,
      ]),
      ...inc("p", i32(1)), ...get("p"), ...get("batch"), ltU, 0x0d, 0,
    ]),
  ];
  const code = sized([...uleb(2), ...uleb(W.length), I32, ...uleb(V.length), V128, ...body, 0x0b]);
  const section = (id: number, content: number[]) => [id, ...sized(content)];
  return [
    0x00, 0x61, 0x73, 0x6d, 0x01, 0x00, 0x00, 0x00,                        // "\0asm", version 1
    ...section(1, [1, 0x60, ...uleb(P.length), ...P.map(() => I32), 0]),   // type: (14 x i32) -> ()
    ...section(3, [1, 0]),                                                  // function 0 has type 0
    ...section(5, [1, 0x00, 1]),                                            // memory: 1 page at least
    ...section(7, [2, ...name("product"), 0x00, 0, ...name("mem"), 0x02, 0]),
    ...section(10, [1, ...code]),
  ];
}

/** The Wasm product kernel and its memory, or null where WebAssembly or its SIMD is missing
 * (then every product runs in productKernel). */
export const PRODUCT_MODULE = new Uint8Array(productModuleBytes());

export function instantiateProduct(): { product: ProductFn; memory: WasmMemory } | null {
  const wasm = (globalThis as { WebAssembly?: WasmApi }).WebAssembly;
  if (wasm === undefined) return null;
  try {
    const bytes = PRODUCT_MODULE;
    if (!wasm.validate(bytes)) return null;
    const { exports } = new wasm.Instance(new wasm.Module(bytes));
    return { product: exports.product as ProductFn, memory: exports.mem as WasmMemory };
  } catch {
    return null;
  }
}
