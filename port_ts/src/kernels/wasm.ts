// The kernels' three WebAssembly modules, assembled here byte by byte (port only: the
// reference's products and rows are NumPy's loops in index order). Each function is the Wasm form
// of a JavaScript kernel that is its specification and fallback: the products' productKernel
// (kernels/product.ts) and the row kernels' loops (kernels/rows.ts), which choose between the two.
// kernels/memory.ts instantiates the modules on one memory.
//
// The same products in WebAssembly SIMD (f64x2), every bit the same.
// Two lanes of an f64x2 hold two DIFFERENT outputs of one row (columns n and n+1), never two
// terms of one sum: lane j of an accumulator is exactly the scalar accumulator of output
// (m, n + j) of productKernel (kernels/product.ts), acc = acc + a*b for k = 0..K-1 from +0, with f64x2.mul
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

import { EXP_CONSTANTS } from "../core/mathlib.ts";

// The few WebAssembly types used here (the core is type-checked without DOM or Node types).
export interface WasmMemory { readonly buffer: ArrayBuffer; grow(pages: number): number }
interface WasmApi {
  validate(bytes: Uint8Array): boolean;
  Module: new (bytes: Uint8Array) => object;
  Instance: new (module: object, imports?: Record<string, Record<string, unknown>>) => { exports: Record<string, unknown> };
}
export type ProductFn = (aPtr: number, sam: number, sak: number, bPtr: number, bRow: number, oPtr: number, oRow: number,
  M: number, K: number, Np: number, batch: number, aBatch: number, bBatch: number, oBatch: number) => void;

/** Unsigned LEB128, the binary format's integers (sizes, counts, opcodes, offsets). */
function uleb(v: number): number[] {
  const out: number[] = [];
  do { let byte = v & 0x7f; v >>>= 7; if (v !== 0) byte |= 0x80; out.push(byte); } while (v !== 0);
  return out;
}
/** Signed LEB128 (i32.const immediates). */
function sleb(v: number): number[] {
  const out: number[] = [];
  for (;;) {
    const byte = v & 0x7f;
    v >>= 7;
    if ((v === 0 && (byte & 0x40) === 0) || (v === -1 && (byte & 0x40) !== 0)) { out.push(byte); return out; }
    out.push(byte | 0x80);
  }
}
/** A section or a function body: its byte length, then its bytes. */
function sized(bytes: number[]): number[] { return [...uleb(bytes.length), ...bytes]; }
function name(s: string): number[] { return sized([...s].map((c) => c.charCodeAt(0))); }

const I32 = 0x7f, V128 = 0x7b;

// ---- the encoder the three modules are written with: the binary format's frame, then the
// instructions (assembler), then what the two product kernels share (productAssembler) ----

const HEADER = [0x00, 0x61, 0x73, 0x6d, 0x01, 0x00, 0x00, 0x00];          // "\0asm", version 1
function section(id: number, content: number[]): number[] { return [id, ...sized(content)]; }
/** A function type: `params` i32 parameters, `results` i32 results. */
function fnType(params: number, results: number): number[] {
  return [0x60, ...uleb(params), ...new Array(params).fill(I32), ...uleb(results), ...new Array(results).fill(I32)];
}
/** A function's code: its locals after the parameters (`i32s` i32, then `v128s` v128), its
 * instructions, end. */
function funcCode(i32s: number, v128s: number, body: number[]): number[] {
  return sized([...uleb(2), ...uleb(i32s), I32, ...uleb(v128s), V128, ...body, 0x0b]);
}
/** The import section of the modules that run on the product module's memory: k.mem, a memory
 * of 1 page at least. */
const IMPORT_MEMORY = section(2, [1, ...name("k"), ...name("mem"), 0x02, 0x00, 1]);

/** The instructions the kernels are written in, for a function whose local l is local(l) (a
 * builder's name for it, or its index itself). Lower case: i32 instructions; upper case: v128
 * ones. Memory accesses are aligned to 8 bytes (the immediate 3: 2^3), at a byte offset. */
function assembler<L>(local: (l: L) => number) {
  const get = (l: L) => [0x20, local(l)], set = (l: L) => [0x21, local(l)], tee = (l: L) => [0x22, local(l)];
  const i32 = (v: number) => [0x41, ...sleb(v)];                          // i32.const
  const add = 0x6a, mul = 0x6c, and = 0x71, ltU = 0x49, leU = 0x4d, geU = 0x4f, select = 0x1b;
  const inc = (l: L, by: number[]) => [...get(l), ...by, add, ...set(l)]; // l = l + by
  const loop = (body: number[]) => [0x03, 0x40, ...body, 0x0b];           // loop ... end (do-while with br_if 0)
  const block = (body: number[]) => [0x02, 0x40, ...body, 0x0b];          // block ... end (br_if 1 in a loop inside: break)
  const simd = (op: number, ...imm: number[]) => [0xfd, ...uleb(op), ...imm];
  const load = (offset = 0) => simd(0x00, 3, ...uleb(offset));           // v128.load
  const store = (offset = 0) => simd(0x0b, 3, ...uleb(offset));          // v128.store
  const loadSplat = () => simd(0x0a, 3, 0);                               // v128.load64_splat: one double in both lanes
  const loadZero = (offset = 0) => simd(0x5d, 3, ...uleb(offset));       // v128.load64_zero: lane 0, and +0 in lane 1
  const loadLane = (lane: number) => simd(0x57, 3, 0, lane);             // v128.load64_lane: one lane replaced
  const storeLane = (lane: number, offset = 0) => simd(0x5b, 3, ...uleb(offset), lane); // v128.store64_lane
  const f64x2 = (v: number) => simd(0x0c, ...new Uint8Array(new Float64Array([v, v]).buffer)); // v128.const (v, v)
  const [ADD, SUB, MUL, DIV] = [0xf0, 0xf1, 0xf2, 0xf3].map((op) => simd(op)); // f64x2 arithmetic, IEEE per lane
  return { get, set, tee, i32, add, mul, and, ltU, leU, geU, select, inc, loop, block, simd, load, store, loadSplat, loadZero,
    loadLane, storeLane, f64x2, ADD, SUB, MUL, DIV };
}

/** Where a product kernel's pass reads B and writes O, and what it sets up for them: all that
 * product and productT do differently. */
interface ProductSides {
  setup: number[];                         // after the row strides, before the loop over the batch
  perBatch: number[];                      // product p's pointers, after a0
  pointB: number[];                        // B's pointers for the pass (k = 0, columns n ..)
  loadB: number[];                         // b0 = B's columns (n, n + 1) at k, b1 = (n + 2, n + 3)
  stepB: number[];                         // B's pointers to k + 1
  storeO: (accs: string[][]) => number[];  // each row's accumulators [c_r0, c_r1] to O's columns n .. n + 3
  columns: string;                         // the passes run while n < columns, n += 4
}

/** The part the two product kernels share, over their named locals: the parameters P, then the
 * i32 work locals W, then the v128 locals V (the accumulators c00 .. c31, the operands b0, b1, x).
 * kernel(sides) is the function's code: per product p the rows in blocks of 4, then the last
 * M mod 4 rows (3, 2 or 1) together; each block a pass per four columns, over k. */
function productAssembler(P: string[], W: string[], V: string[]) {
  const index = new Map([...P, ...W, ...V].map((s, i) => [s, i]));
  const asm = assembler((s: string) => {
    const i = index.get(s);
    if (i === undefined) throw new Error(`wasmKernel: a product kernel reads a local "${s}" it does not declare (it declares ${[...index.keys()].join(", ")}); add it to P, W or V or fix the name`);
    return i;
  });
  const { get, set, i32, add, mul, and, ltU, leU, geU, inc, loop, block, loadSplat, f64x2, ADD, MUL } = asm;
  // acc = acc + x * b (the scalar kernel's s += x*y, per lane)
  const mulAdd = (acc: string, b: string) => [...get(acc), ...get("x"), ...get(b), ...MUL, ...ADD, ...set(acc)];
  // x = both lanes A[row r of the block, k], at pa + r * sam
  const loadX = (r: number) => [...get("pa"), ...(r === 0 ? [] : [...get(["", "sam", "sam2", "sam3"][r]), add]), ...loadSplat(), ...set("x")];
  // row r of the block in O, at po + r * oRow
  const rowAddr = (r: number) => [...get("po"), ...(r === 0 ? [] : [...get(["", "oRow", "oRow2", "oRow3"][r]), add])];
  const rows = (R: number, io: ProductSides) => {
    const accs = Array.from({ length: R }, (_, r) => [`c${r}0`, `c${r}1`]);
    const kBody = [
      ...io.loadB,
      ...accs.flatMap(([c0, c1], r) => [...loadX(r), ...mulAdd(c0, "b0"), ...mulAdd(c1, "b1")]),
      ...inc("pa", get("sak")), ...io.stepB, ...inc("k", i32(1)),
      ...get("k"), ...get("K"), ltU, 0x0d, 0,                              // br_if k < K (K >= 1)
    ];
    // for n = 0, 4, .. < columns: the accumulators from +0, the pass over k, the stores
    return loop([
      ...accs.flat().flatMap((c) => [...f64x2(0), ...set(c)]),
      ...get("a0"), ...get("m"), ...get("sam"), mul, add, ...set("pa"),
      ...io.pointB,
      ...get("o0"), ...get("m"), ...get("oRow"), mul, add, ...get("n"), ...i32(8), mul, add, ...set("po"),
      ...i32(0), ...set("k"), ...loop(kBody),
      ...io.storeO(accs),
      ...inc("n", i32(4)), ...get("n"), ...get(io.columns), ltU, 0x0d, 0,
    ]);
  };
  const kernel = (io: ProductSides) => funcCode(W.length, V.length, [
    ...get("oRow"), ...i32(2), mul, ...set("oRow2"), ...get("oRow2"), ...get("oRow"), add, ...set("oRow3"),
    ...get("sam"), ...i32(2), mul, ...set("sam2"), ...get("sam2"), ...get("sam"), add, ...set("sam3"),
    ...get("M"), ...i32(-4), and, ...set("M4"),                            // rows in blocks of 4
    ...io.setup,
    ...loop([                                                               // for p = 0 .. batch-1 (batch >= 1)
      ...get("aPtr"), ...get("p"), ...get("aBatch"), mul, add, ...set("a0"),
      ...io.perBatch,
      ...get("oPtr"), ...get("p"), ...get("oBatch"), mul, add, ...set("o0"),
      ...i32(0), ...set("m"),
      ...block(loop([                                                       // while m < M4: 4 rows
        ...get("m"), ...get("M4"), geU, 0x0d, 1,
        ...i32(0), ...set("n"), ...rows(4, io), ...inc("m", i32(4)), 0x0c, 0,
      ])),
      ...[3, 2, 1].flatMap((R) => [                                          // the last M mod 4 rows in one pass:
        ...get("m"), ...i32(R), add, ...get("M"), leU, 0x04, 0x40,           // if m + R <= M (3, 2 or 1 rows)
        ...i32(0), ...set("n"), ...rows(R, io), ...inc("m", i32(R)), 0x0b,
      ]),
      ...inc("p", i32(1)), ...get("p"), ...get("batch"), ltU, 0x0d, 0,
    ]),
  ]);
  const type = section(1, [1, ...fnType(P.length, 0)]);                    // type: (P.length x i32) -> ()
  return { ...asm, rowAddr, kernel, type };
}

/** The product kernel's bytes: one function `product` (14 i32 parameters, see ProductFn) and
 * one exported memory `mem`. */
function productModuleBytes(): number[] {
  // Locals: the 14 parameters, then i32 work locals, then v128 accumulators and operands.
  const P = ["aPtr", "sam", "sak", "bPtr", "bRow", "oPtr", "oRow", "M", "K", "Np", "batch", "aBatch", "bBatch", "oBatch"];
  const W = ["p", "m", "n", "k", "pa", "pb", "po", "sam2", "sam3", "oRow2", "oRow3", "a0", "o0", "M4"];
  const V = ["c00", "c01", "c10", "c11", "c20", "c21", "c30", "c31", "b0", "b1", "x"];
  const { get, set, i32, add, mul, inc, load, store, rowAddr, kernel, type } = productAssembler(P, W, V);
  const code = kernel({
    setup: [],
    perBatch: [],
    pointB: [...get("bPtr"), ...get("p"), ...get("bBatch"), mul, add, ...get("n"), ...i32(8), mul, add, ...set("pb")],
    loadB: [...get("pb"), ...load(0), ...set("b0"), ...get("pb"), ...load(16), ...set("b1")],
    stepB: inc("pb", get("bRow")),
    storeO: (accs) => accs.flatMap(([c0, c1], r) => [...rowAddr(r), ...get(c0), ...store(0), ...rowAddr(r), ...get(c1), ...store(16)]),
    columns: "Np",
  });
  return [
    ...HEADER,
    ...type,                                                                // type: (14 x i32) -> ()
    ...section(3, [1, 0]),                                                  // function 0 has type 0
    ...section(5, [1, 0x00, 1]),                                            // memory: 1 page at least
    ...section(7, [2, ...name("product"), 0x00, 0, ...name("mem"), 0x02, 0]),
    ...section(10, [1, ...code]),
  ];
}

export const PRODUCT_MODULE = new Uint8Array(productModuleBytes());

/** The exports of the module `bytes`, instantiated with `imports`, or null where WebAssembly, its
 * SIMD or this module cannot be compiled (then its kernels run their JavaScript forms). */
function instantiate(bytes: Uint8Array, imports?: Record<string, Record<string, unknown>>): Record<string, unknown> | null {
  const wasm = (globalThis as { WebAssembly?: WasmApi }).WebAssembly;
  if (wasm === undefined) return null;
  try {
    if (!wasm.validate(bytes)) return null;
    return new wasm.Instance(new wasm.Module(bytes), imports).exports;
  } catch {
    return null;
  }
}

/** The Wasm product kernel and its memory (the one the other two modules import), or null. */
export function instantiateProduct(): { product: ProductFn; memory: WasmMemory } | null {
  const exports = instantiate(PRODUCT_MODULE);
  return exports === null ? null : { product: exports.product as ProductFn, memory: exports.mem as WasmMemory };
}

// ---- the row kernels: elementwise passes of a training step, on the product module's memory ----
//
// A second module (it imports the product module's memory, so a step's tensors are its operands
// as they stand) with eight functions, each lane of an f64x2 a DIFFERENT element or output:
//   biasRelu(h, b, rows, F)         h[r, o] = relu(h[r, o] + b[o]) over (rows, F), F even: the
//                                   rounded add, then v where v > 0 else +0 (NaN gives +0), as
//                                   biasReluJs (kernels/rows.ts); the select is a bit mask
//   reluGate(d, x, db, rows, F)     d[r, o] = x[r, o] > 0 ? d[r, o] : +0, and db[o] = the sum of
//                                   the gated column over r in row order from +0 (F even)
//   expRange(p, i, n) -> i32        p[j] = exp(p[j]) for j = i, i+1, .. four at a time (two f64x2),
//                                   mathlib's expPair (lo = 0) as it reads, lane by lane (the same
//                                   +, -, *, /, floor and scaling by 2^k, every one IEEE binary64;
//                                   no FMA); returns the first j not done: the start of four with a
//                                   lane whose k is outside [-1022, 1023] (results near the overflow
//                                   or subnormal: ldexp's steps, left to the scalar exp), or of the
//                                   last n - j < 4 elements, or n.
//   lnForward(x, res, hasRes, g, b, h, out, mean, rstd, rows, d, eps)
//                                   layerNormJs's loops (kernels/rows.ts), lane 0 row r and lane 1 row
//                                   r + 1 (the last row, when rows is odd, in both lanes: the same
//                                   values stored twice to the same places): v = x (+ res), the
//                                   in-order sum, m = sum / d, c = h - m, the in-order sum of c c,
//                                   s = 1 / sqrt(sq / d + eps) (f64x2.sqrt: correctly rounded, as
//                                   Math.sqrt), h = c s, out = h g[k] + b[k]
//   lnBackward(dout, h, g, rstd, dx, db, dg, rows, d)
//                                   its backward: per row pair the two in-order sums of dxhat =
//                                   dout g[k] and dxhat h, then dx = ((dxhat - m1) - h m2) s;
//                                   then db, dg: running sums from +0 over the rows in turn, two
//                                   columns a lane pair (d even)
//   smShift, smNorm, smBack         softmaxShiftJs, softmaxNormalizeJs, softmaxBackwardJs, two rows a pass as above, each
//                                   lane with its row's kept count n (key k kept where k < n):
//                                   the max over kept keys (x > max), the mask value if a key is
//                                   masked and above it, o = x - max or mask - max; then (after
//                                   expRange) each row's in-order sum and o / sum; backward the
//                                   in-order dot of dout and y, dx = y (dout - dot) or +0
// Addresses are bytes; every pointer 8-byte aligned (the loads assume nothing more).

export interface RowFns {
  biasRelu(h: number, b: number, rows: number, F: number): void;
  reluGate(d: number, x: number, db: number, rows: number, F: number): void;
  expRange(p: number, i: number, n: number): number;
  lnForward(x: number, res: number, hasRes: number, g: number, b: number, h: number, out: number, mean: number, rstd: number,
    rows: number, d: number, eps: number): void;
  lnBackward(dout: number, h: number, g: number, rstd: number, dx: number, db: number, dg: number, rows: number, d: number): void;
  smShift(x: number, o: number, kept: number, hasKept: number, rows: number, K: number, mask: number): void;
  smNorm(o: number, rows: number, K: number): void;
  smBack(g: number, y: number, dx: number, kept: number, hasKept: number, rows: number, K: number): void;
}

function rowModuleBytes(constants: { LN2_HI: number; LN2_LO: number; INV_LN2: number; EXP_OVER: number; EXP_UNDER: number; EXP_P: readonly number[] }): number[] {
  const { get, set, tee, i32, add, mul, ltU, select, inc, loop, simd, load, store, loadSplat, loadZero, loadLane, storeLane, f64x2,
    ADD, SUB, MUL, DIV } = assembler((i: number) => i);                  // locals by their indices
  const [LT, GT, LE, GE] = [0x49, 0x4a, 0x4b, 0x4c].map((op) => simd(op)); // f64x2 comparisons: all-ones lanes
  const AND = simd(0x4e), ANDNOT = simd(0x4f), BITSELECT = simd(0x52), ANY = simd(0x53), FLOOR = simd(0x75);
  const TRUNC_I32 = simd(0xfc), EXTEND_I64 = simd(0xc7), SHL_I64 = simd(0xcb), ADD_I64 = simd(0xce);

  // biasRelu(h 0, b 1, rows 2, F 3); locals: end 4, rowEnd 5, q 6; v 7 (v128)
  const biasRelu = [
    ...get(0), ...get(2), ...get(3), mul, ...i32(8), mul, add, ...set(4),  // end = h + rows F 8
    ...loop([
      ...get(1), ...set(6), ...get(0), ...get(3), ...i32(8), mul, add, ...set(5),
      ...loop([
        ...get(0), ...get(0), ...load(), ...get(6), ...load(), ...ADD, ...tee(7), // v = h + b
        ...get(7), ...f64x2(0), ...GT, ...AND, ...store(),                // h = v & (v > 0)
        ...inc(0, i32(16)), ...inc(6, i32(16)),
        ...get(0), ...get(5), ltU, 0x0d, 0,
      ]),
      ...get(0), ...get(4), ltU, 0x0d, 0,
    ]),
  ];
  // reluGate(d 0, x 1, db 2, rows 3, F 4); locals: r 5, pdb 6, dbEnd 7; g 8 (v128)
  // rows in turn, the columns' running sums in db (which starts at +0): db[o] = db[o] + g
  const reluGate = [
    ...get(2), ...get(4), ...i32(8), mul, add, ...set(7),
    ...get(2), ...set(6), ...loop([                                          // db = +0
      ...get(6), ...f64x2(0), ...store(), ...inc(6, i32(16)), ...get(6), ...get(7), ltU, 0x0d, 0,
    ]),
    ...i32(0), ...set(5),
    ...loop([                                                               // for r = 0 .. rows-1
      ...get(2), ...set(6),
      ...loop([                                                             // for o = 0, 2, .. < F
        ...get(0), ...get(0), ...load(), ...get(1), ...load(), ...f64x2(0), ...GT, ...AND, ...tee(8), ...store(),
        ...get(6), ...get(6), ...load(), ...get(8), ...ADD, ...store(),      // db = db + g, row order
        ...inc(0, i32(16)), ...inc(1, i32(16)), ...inc(6, i32(16)),
        ...get(6), ...get(7), ltU, 0x0d, 0,
      ]),
      ...inc(5, i32(1)), ...get(5), ...get(3), ltU, 0x0d, 0,
    ]),
  ];
  // expRange(p 0, i 1, n 2) -> i32; i32 local a 3; v128 locals: the constants, then per pair
  // x, k, rHi, rLo, r, t, c, y, inR. Two pairs a pass (four elements, their chains side by
  // side); a pass with a lane left to the scalar exp returns i, its first element.
  const { LN2_HI, LN2_LO, INV_LN2, EXP_OVER, EXP_UNDER, EXP_P } = constants;
  const [P1, P2, P3, P4, P5] = EXP_P;
  const PAIRS = 2;
  const C = [LN2_HI, LN2_LO, INV_LN2, EXP_OVER, EXP_UNDER, P1, P2, P3, P4, P5, 0.5, 1, 2, -1022, 1023, Infinity, 0];
  const cLocal = (v: number) => 4 + C.findIndex((c) => Object.is(c, v));
  const cst = (v: number) => get(cLocal(v));
  const bias = 4 + C.length, V0 = bias + 1;                               // i64x2 1023 (the exponent bias), then the pairs' locals
  const L = (j: number, name: string) => V0 + 9 * j + ["x", "k", "rHi", "rLo", "r", "t", "c", "y", "inR"].indexOf(name);
  const pairs = Array.from({ length: PAIRS }, (_, j) => j);
  const expRange = [
    ...C.flatMap((v, j) => [...f64x2(v), ...set(4 + j)]),                // the constants, once
    ...simd(0x0c, ...new Uint8Array(new BigInt64Array([1023n, 1023n]).buffer)), ...set(bias),
    0x02, 0x40, 0x03, 0x40,                                                 // block { loop {
    ...get(1), ...i32(2 * PAIRS), add, ...get(2), 0x4b /* i32.gt_u */, 0x0d, 1, // if i + 2 PAIRS > n: break
    ...get(0), ...get(1), ...i32(8), mul, add, ...set(3),
    ...pairs.flatMap((j) => {
      const g = (n: string) => get(L(j, n)), st = (n: string) => set(L(j, n));
      return [
        ...get(3), ...load(16 * j), ...st("x"),
        ...g("x"), ...cst(EXP_UNDER), ...GE, ...g("x"), ...cst(EXP_OVER), ...LE, ...AND, ...st("inR"),
        ...g("x"), ...cst(INV_LN2), ...MUL, ...cst(0.5), ...ADD, ...FLOOR, ...st("k"), // k = floor(x / ln2 + 1/2)
      ];
    }),
    // a lane in range whose k is outside [-1022, 1023]: the scalar exp (ldexp's steps)
    ...pairs.flatMap((j) => [...get(L(j, "inR")), ...get(L(j, "k")), ...cst(-1022), ...GE, ...get(L(j, "k")), ...cst(1023), ...LE, ...AND, ...ANDNOT,
      ...(j > 0 ? simd(0x50) : [])]),                                      // v128.or over the pairs
    ...ANY, 0x04, 0x40, ...get(1), 0x0f, 0x0b,                              // if any: return i
    ...pairs.flatMap((j) => {
      const g = (n: string) => get(L(j, n)), st = (n: string) => set(L(j, n)), te = (n: string) => tee(L(j, n));
      return [
        ...g("x"), ...g("k"), ...cst(LN2_HI), ...MUL, ...SUB, ...st("rHi"),   // rHi = x - k LN2_HI
        ...g("k"), ...cst(LN2_LO), ...MUL, ...st("rLo"),                     // rLo = k LN2_LO (- 0)
        ...g("rHi"), ...g("rLo"), ...SUB, ...te("r"), ...g("r"), ...MUL, ...st("t"), // r = rHi - rLo; t = r r
      ];
    }),
    ...pairs.flatMap((j) => {
      const g = (n: string) => get(L(j, n)), st = (n: string) => set(L(j, n));
      return [
        ...g("r"), ...g("t"),                                               // c = r - t (((((P5 t + P4) t + P3) t + P2) t + P1)
        ...cst(P5), ...g("t"), ...MUL, ...cst(P4), ...ADD, ...g("t"), ...MUL, ...cst(P3), ...ADD,
        ...g("t"), ...MUL, ...cst(P2), ...ADD, ...g("t"), ...MUL, ...cst(P1), ...ADD, ...MUL, ...SUB, ...st("c"),
      ];
    }),
    ...pairs.flatMap((j) => {
      const g = (n: string) => get(L(j, n)), st = (n: string) => set(L(j, n));
      return [
        ...cst(1), ...g("rLo"), ...g("r"), ...g("c"), ...MUL, ...cst(2), ...g("c"), ...SUB, ...DIV, ...SUB,
        ...g("rHi"), ...SUB, ...SUB,                                        // y = 1 - ((rLo - (r c) / (2 - c)) - rHi)
        ...g("k"), ...TRUNC_I32, ...EXTEND_I64, ...get(bias), ...ADD_I64,
        ...i32(52), ...SHL_I64, ...MUL, ...st("y"),                         // y 2^k, 2^k from its bits
      ];
    }),
    // lanes out of range: +inf above, +0 below, x itself (NaN)
    ...pairs.flatMap((j) => {
      const g = (n: string) => get(L(j, n));
      return [
        ...get(3), ...g("y"),
        ...cst(Infinity), ...cst(0), ...g("x"), ...g("x"), ...cst(EXP_UNDER), ...LT, ...BITSELECT,
        ...g("x"), ...cst(EXP_OVER), ...GT, ...BITSELECT,
        ...g("inR"), ...BITSELECT, ...store(16 * j),
      ];
    }),
    ...inc(1, i32(2 * PAIRS)), 0x0c, 0,                                     //   i += 2 PAIRS; continue
    0x0b, 0x0b,                                                             // } }
    ...get(1),
  ];
  const expLocals = V0 + 9 * PAIRS - 4;
  // ---- layer norm, two rows a pass: lane 0 row r, lane 1 row r + 1 (row r again when r is
  // the last: both lanes then compute the same values and store them to the same places)
  const SPLAT = simd(0x14), SQRT = simd(0xef);
  // the two rows' element k: base pointers b0, b1 (locals) plus the byte offset k8
  const gather = (b0: number, b1: number, k8: number) =>                  // (b1 + k8 address, [b0 + k8 element, 0]) -> both
    [...get(b1), ...get(k8), add, ...get(b0), ...get(k8), add, ...loadZero(), ...loadLane(1)];
  const scatter = (b0: number, b1: number, k8: number, v: number) => [
    ...get(b0), ...get(k8), add, ...get(v), ...storeLane(0),
    ...get(b1), ...get(k8), add, ...get(v), ...storeLane(1),
  ];
  // lnForward(x 0, res 1, hasRes 2, g 3, b 4, h 5, out 6, mean 7, rstd 8, rows 9, d 10, eps 11 f64)
  // i32 locals: r 12, r1 13, d8 14, k8 15, x0 16, x1 17, q0 18, q1 19, h0 20, h1 21, o0 22, o1 23
  // v128 locals: v 24, sum 25, m 26, s 27, dd 28, epsv 29
  const rowPtrs = (base: number, p0: number, p1: number) => [              // p0 = base + r d8, p1 = base + r1 d8
    ...get(base), ...get(12), ...get(14), mul, add, ...set(p0),
    ...get(base), ...get(13), ...get(14), mul, add, ...set(p1),
  ];
  const statStore = (base: number, v: number) => [
    ...get(base), ...get(12), ...i32(8), mul, add, ...get(v), ...storeLane(0),
    ...get(base), ...get(13), ...i32(8), mul, add, ...get(v), ...storeLane(1),
  ];
  const kLoop = (body: number[]) => [...i32(0), ...set(15), ...loop([...body, ...inc(15, i32(8)), ...get(15), ...get(14), ltU, 0x0d, 0])];
  const pairLoop = (body: number[]) => [                                   // for r = 0, 2, .. < rows; r1 = min(r + 1, rows - 1)
    ...i32(0), ...set(12),
    ...loop([
      ...get(12), ...i32(1), add, ...get(12), ...get(12), ...i32(1), add, ...get(9), ltU, select, ...set(13),
      ...body,
      ...inc(12, i32(2)), ...get(12), ...get(9), ltU, 0x0d, 0,
    ]),
  ];
  const lnForward = [
    ...get(10), ...i32(8), mul, ...set(14),
    ...get(10), 0xb8 /* f64.convert_i32_u */, ...SPLAT, ...set(28),
    ...get(11), ...SPLAT, ...set(29),
    ...pairLoop([
      ...rowPtrs(0, 16, 17), ...rowPtrs(1, 18, 19), ...rowPtrs(5, 20, 21), ...rowPtrs(6, 22, 23),
      ...f64x2(0), ...set(25),
      ...kLoop([                                                            // v = x (+ res); h = v; sum = sum + v
        ...gather(16, 17, 15), ...set(24),
        ...get(2), 0x04, 0x40, ...get(24), ...gather(18, 19, 15), ...ADD, ...set(24), 0x0b,
        ...scatter(20, 21, 15, 24),
        ...get(25), ...get(24), ...ADD, ...set(25),
      ]),
      ...get(25), ...get(28), ...DIV, ...set(26), ...statStore(7, 26),      // m = sum / d
      ...f64x2(0), ...set(25),
      ...kLoop([                                                            // c = h - m; h = c; sq = sq + c c
        ...gather(20, 21, 15), ...get(26), ...SUB, ...set(24),
        ...scatter(20, 21, 15, 24),
        ...get(25), ...get(24), ...get(24), ...MUL, ...ADD, ...set(25),
      ]),
      ...f64x2(1), ...get(25), ...get(28), ...DIV, ...get(29), ...ADD, ...SQRT, ...DIV, ...set(27), // s = 1 / sqrt(sq / d + eps)
      ...statStore(8, 27),
      ...kLoop([                                                            // h = h s; out = h g[k] + b[k]
        ...gather(20, 21, 15), ...get(27), ...MUL, ...set(24),
        ...scatter(20, 21, 15, 24),
        ...get(24), ...get(3), ...get(15), add, ...loadSplat(), ...MUL, ...get(4), ...get(15), add, ...loadSplat(), ...ADD, ...set(24),
        ...scatter(22, 23, 15, 24),
      ]),
    ]),
  ];
  // lnBackward(dout 0, h 1, g 2, rstd 3, dx 4, db 5, dg 6, rows 7, d 8) (rows at 9 as pairLoop
  // reads it: copied); i32 locals: rowsCopy 9, d8 14 as above, r 12, r1 13, k8 15, d0 16, d1 17,
  // h0 18, h1 19, x0 20, x1 21, pc 22, end 23; v128: v 24, sum1 25, sum2 26, s 27, dd 28, m1 29, m2 30, hv 31
  const lnBackward = [
    ...get(7), ...set(9),
    ...get(8), ...i32(8), mul, ...set(14),
    ...get(8), 0xb8, ...SPLAT, ...set(28),
    ...pairLoop([
      ...rowPtrs(0, 16, 17), ...rowPtrs(1, 18, 19), ...rowPtrs(4, 20, 21),
      ...f64x2(0), ...set(25), ...f64x2(0), ...set(26),
      ...kLoop([                                                            // dxhat = dout g[k]; sum1 = sum1 + dxhat; sum2 = sum2 + dxhat h
        ...gather(16, 17, 15), ...get(2), ...get(15), add, ...loadSplat(), ...MUL, ...set(24),
        ...get(25), ...get(24), ...ADD, ...set(25),
        ...get(26), ...get(24), ...gather(18, 19, 15), ...MUL, ...ADD, ...set(26),
      ]),
      ...get(25), ...get(28), ...DIV, ...set(29), ...get(26), ...get(28), ...DIV, ...set(30),
      ...get(3), ...get(13), ...i32(8), mul, add, ...get(3), ...get(12), ...i32(8), mul, add, ...loadZero(), ...loadLane(1), ...set(27),
      ...kLoop([                                                            // dx = ((dxhat - m1) - h m2) s
        ...gather(16, 17, 15), ...get(2), ...get(15), add, ...loadSplat(), ...MUL, ...get(29), ...SUB,
        ...gather(18, 19, 15), ...get(30), ...MUL, ...SUB, ...get(27), ...MUL, ...set(24),
        ...scatter(20, 21, 15, 24),
      ]),
    ]),
    // db[k] = sum over rows of dout[r, k], dg[k] = of dout[r, k] h[r, k]: rows in turn, two
    // columns a lane pair, the running sums in db and dg from +0 (d even)
    ...i32(0), ...set(15), ...loop([
      ...get(5), ...get(15), add, ...f64x2(0), ...store(), ...get(6), ...get(15), add, ...f64x2(0), ...store(),
      ...inc(15, i32(16)), ...get(15), ...get(14), ltU, 0x0d, 0,
    ]),
    ...get(0), ...set(16), ...get(1), ...set(18),
    ...get(0), ...get(7), ...get(14), mul, add, ...set(23),
    ...loop([
      ...i32(0), ...set(15),
      ...loop([
        ...get(16), ...load(), ...set(24),
        ...get(5), ...get(15), add, ...get(5), ...get(15), add, ...load(), ...get(24), ...ADD, ...store(),
        ...get(6), ...get(15), add, ...get(6), ...get(15), add, ...load(), ...get(24), ...get(18), ...load(), ...MUL, ...ADD, ...store(),
        ...inc(16, i32(16)), ...inc(18, i32(16)), ...inc(15, i32(16)),
        ...get(15), ...get(14), ltU, 0x0d, 0,
      ]),
      ...get(16), ...get(23), ltU, 0x0d, 0,
    ]),
  ];
  // a function of `params` i32 parameters whose i32 locals end at index i32Locals, then vLocals v128
  // (lnForward has an f64 parameter: funcCode(12, 6, ..), its 12 i32 locals after its 12 parameters)
  const code = (params: number, i32Locals: number, vLocals: number, body: number[]) => funcCode(i32Locals - params, vLocals, body);
  // ---- masked softmax, two rows a pass (the same odd-row rule), per lane its kept count n
  // (kept[r] as a double, or K unmasked): key k is kept where k < n
  const shrU = 0x76, f64FromI32 = 0xb8;
  const kSplat = [...get(15), ...i32(3), shrU, f64FromI32, ...SPLAT];    // (k, k) from the byte offset k8
  const keptPair = (kept: number, has: number, nv: number, K: number) => [ // nv = (kept[r], kept[r1]), or (K, K)
    ...get(kept), ...get(13), ...i32(8), mul, add, ...get(kept), ...get(12), ...i32(8), mul, add, ...loadZero(), ...loadLane(1),
    ...get(K), f64FromI32, ...SPLAT, ...get(has), select, ...set(nv),
  ];
  // smShift(x 0, o 1, kept 2, hasKept 3, rows 4, K 5, mask 6 f64: the mask value, nn/maskedSoftmax.ts's MASK_VALUE);
  // i32: rows 9, r 12, r1 13, d8 14, k8 15, x0 16, x1 17, o0 18, o1 19; v128: nv 20, max 21, v 22,
  // keep 23, mk 24, maskv 25
  // max over the kept keys (if x > max: max = x), MASK_VALUE if a key is masked and above it;
  // then o = x - max where kept, MASK_VALUE - max elsewhere
  const smShift = [
    ...get(4), ...set(9), ...get(5), ...i32(8), mul, ...set(14), ...get(6), ...SPLAT, ...set(25),
    ...pairLoop([
      ...rowPtrs(0, 16, 17), ...rowPtrs(1, 18, 19), ...keptPair(2, 3, 20, 5),
      ...f64x2(-Infinity), ...set(21),
      ...kLoop([
        ...gather(16, 17, 15), ...set(22),
        ...get(22), ...get(21), ...get(22), ...get(21), ...GT, ...kSplat, ...get(20), ...LT, ...AND, ...BITSELECT, ...set(21),
      ]),
      ...get(20), ...get(5), f64FromI32, ...SPLAT, ...LT, ...get(25), ...get(21), ...GT, ...AND, ...set(24),
      ...get(25), ...get(21), ...get(24), ...BITSELECT, ...set(21),
      ...kLoop([
        ...gather(16, 17, 15), ...get(21), ...SUB, ...get(25), ...get(21), ...SUB, ...kSplat, ...get(20), ...LT, ...BITSELECT, ...set(22),
        ...scatter(18, 19, 15, 22),
      ]),
    ]),
  ];
  // smNorm(o 0, rows 1, K 2); i32: rows 9, r 12, r1 13, d8 14, k8 15, o0 16, o1 17; v128: sum 18, v 19
  // per row the in-order sum from +0, then o = o / sum
  const smNorm = [
    ...get(1), ...set(9), ...get(2), ...i32(8), mul, ...set(14),
    ...pairLoop([
      ...rowPtrs(0, 16, 17), ...f64x2(0), ...set(18),
      ...kLoop([...get(18), ...gather(16, 17, 15), ...ADD, ...set(18)]),
      ...kLoop([...gather(16, 17, 15), ...get(18), ...DIV, ...set(19), ...scatter(16, 17, 15, 19)]),
    ]),
  ];
  // smBack(g 0, y 1, dx 2, kept 3, hasKept 4, rows 5, K 6); i32: rows 9, r 12, r1 13, d8 14, k8 15,
  // g0 16, g1 17, y0 18, y1 19, x0 20, x1 21; v128: nv 22, dot 23, v 24
  // dot = in-order sum of g y from +0; dx = y (g - dot) where kept, +0 elsewhere (a bit mask)
  const smBack = [
    ...get(5), ...set(9), ...get(6), ...i32(8), mul, ...set(14),
    ...pairLoop([
      ...rowPtrs(0, 16, 17), ...rowPtrs(1, 18, 19), ...rowPtrs(2, 20, 21), ...keptPair(3, 4, 22, 6),
      ...f64x2(0), ...set(23),
      ...kLoop([...get(23), ...gather(16, 17, 15), ...gather(18, 19, 15), ...MUL, ...ADD, ...set(23)]),
      ...kLoop([
        ...gather(18, 19, 15), ...gather(16, 17, 15), ...get(23), ...SUB, ...MUL, ...kSplat, ...get(22), ...LT, ...AND, ...set(24),
        ...scatter(20, 21, 15, 24),
      ]),
    ]),
  ];
  const F64 = 0x7c;
  const lnType = [0x60, 12, ...new Array(11).fill(I32), F64, 0], smType = [0x60, 7, ...new Array(6).fill(I32), F64, 0];
  return [
    ...HEADER,
    ...section(1, [8, ...fnType(4, 0), ...fnType(5, 0), ...fnType(3, 1), ...lnType, ...fnType(9, 0), ...smType, ...fnType(3, 0), ...fnType(7, 0)]),
    ...IMPORT_MEMORY,                                                       // k.mem: the product module's memory
    ...section(3, [8, 0, 1, 2, 3, 4, 5, 6, 7]),
    ...section(7, [8, ...name("biasRelu"), 0x00, 0, ...name("reluGate"), 0x00, 1, ...name("expRange"), 0x00, 2,
      ...name("lnForward"), 0x00, 3, ...name("lnBackward"), 0x00, 4, ...name("smShift"), 0x00, 5, ...name("smNorm"), 0x00, 6,
      ...name("smBack"), 0x00, 7]),
    ...section(10, [8, ...code(4, 7, 1, biasRelu), ...code(5, 8, 1, reluGate), ...code(3, 4, expLocals, expRange),
      ...funcCode(12, 6, lnForward), ...code(9, 24, 8, lnBackward), ...code(7, 20, 6, smShift), ...code(3, 18, 2, smNorm),
      ...code(7, 22, 3, smBack)]),
  ];
}

/** The row kernels' module, with mathlib's exp constants (read from it: this file keeps no copy). */
export const ROW_MODULE = new Uint8Array(rowModuleBytes(EXP_CONSTANTS));

/** The row kernels on `memory` (the product module's), or null where they cannot be compiled. */
export function instantiateRows(memory: WasmMemory): RowFns | null {
  return instantiate(ROW_MODULE, { k: { mem: memory } }) as RowFns | null;
}

// ---- the gathering product: B read in place at any strides, O written in place for any N ----
//
// A third module (importing the same memory) with one function, productT: the products of the
// product module above, every output its own in-order accumulator from +0 (f64x2.mul then
// f64x2.add per lane, lanes = outputs (m, n) and (m, n + 1)), 4 rows x 4 columns a pass, then the
// last M mod 4 rows. What differs is where B and O are: B's element (k, n) is read at
// bPtr + k bK + n bCol (bytes), two columns gathered into one f64x2 (v128.load64_zero, then
// v128.load64_lane), so a transposed operand (a head's keys, k_h^T) is read as it stands; a
// column past N - 1 in the last pass reads column N - 1 again (its lanes are never stored); and
// O's last N mod 4 columns are stored lane by lane (v128.store64_lane), so O needs no pad
// columns. multi-head attention's scores q_h k_h^T and their backward's dout_h v_h^T (N = 7
// keys) run here on the projections as they stand, without a packed copy of B or a copy of O.
// Both product kernels are written with productAssembler (above); ProductSides is what differs.
export type ProductTFn = (aPtr: number, sam: number, sak: number, bPtr: number, bK: number, bCol: number, oPtr: number, oRow: number,
  M: number, K: number, N: number, batch: number, aBatch: number, bBatch: number, oBatch: number) => void;

function productTModuleBytes(): number[] {
  const P = ["aPtr", "sam", "sak", "bPtr", "bK", "bCol", "oPtr", "oRow", "M", "K", "N", "batch", "aBatch", "bBatch", "oBatch"];
  const W = ["p", "m", "n", "k", "pa", "pb0", "pb1", "pb2", "pb3", "po", "sam2", "sam3", "oRow2", "oRow3", "a0", "o0", "b0p", "M4", "last"];
  const V = ["c00", "c01", "c10", "c11", "c20", "c21", "c30", "c31", "b0", "b1", "x"];
  const { get, set, i32, add, mul, ltU, leU, select, inc, store, loadZero, loadLane, storeLane, rowAddr, kernel, type } = productAssembler(P, W, V);
  // column n + j's pointer, column N - 1's past the end
  const colPtr = (j: number) => [
    ...get("b0p"), ...get("n"), ...i32(j), add, ...get("last"), ...get("n"), ...i32(j), add, ...get("N"), ltU, select,
    ...get("bCol"), mul, add, ...set(`pb${j}`),
  ];
  const storeFull = ([c0, c1]: string[], r: number) => [...rowAddr(r), ...get(c0), ...store(0), ...rowAddr(r), ...get(c1), ...store(16)];
  const storePart = ([c0, c1]: string[], r: number) => [                   // columns n .. N - 1 < n + 3
    ...rowAddr(r), ...get(c0), ...storeLane(0, 0),
    ...get("n"), ...i32(1), add, ...get("N"), ltU, 0x04, 0x40, ...rowAddr(r), ...get(c0), ...storeLane(1, 8), 0x0b,
    ...get("n"), ...i32(2), add, ...get("N"), ltU, 0x04, 0x40, ...rowAddr(r), ...get(c1), ...storeLane(0, 16), 0x0b,
  ];
  const code = kernel({
    setup: [...get("N"), ...i32(1), 0x6b /* i32.sub */, ...set("last")],
    perBatch: [...get("bPtr"), ...get("p"), ...get("bBatch"), mul, add, ...set("b0p")],
    pointB: [0, 1, 2, 3].flatMap(colPtr),
    loadB: [
      ...get("pb1"), ...get("pb0"), ...loadZero(), ...loadLane(1), ...set("b0"),  // columns n, n + 1 at step k
      ...get("pb3"), ...get("pb2"), ...loadZero(), ...loadLane(1), ...set("b1"),  // columns n + 2, n + 3
    ],
    stepB: ["pb0", "pb1", "pb2", "pb3"].flatMap((pb) => inc(pb, get("bK"))),
    storeO: (accs) => [
      ...get("n"), ...i32(4), add, ...get("N"), leU, 0x04, 0x40,           // if n + 4 <= N: all four columns
      ...accs.flatMap(storeFull), 0x05, ...accs.flatMap(storePart), 0x0b,
    ],
    columns: "N",
  });
  return [
    ...HEADER,
    ...type,
    ...IMPORT_MEMORY,                                                       // k.mem: the product module's memory
    ...section(3, [1, 0]),
    ...section(7, [1, ...name("productT"), 0x00, 0]),
    ...section(10, [1, ...code]),
  ];
}

export const PRODUCT_T_MODULE = new Uint8Array(productTModuleBytes());

/** productT on `memory` (the product module's), or null where it cannot be compiled. */
export function instantiateProductT(memory: WasmMemory): ProductTFn | null {
  const exports = instantiate(PRODUCT_T_MODULE, { k: { mem: memory } });
  return exports === null ? null : exports.productT as ProductTFn;
}
