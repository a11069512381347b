// kernels/product.ts: the blocked product kernel and its WebAssembly SIMD twins give the naive
// loops' bits (docs/performance.md), through core/ops.ts's matmul, matmulNT and matmulTn and
// through products itself (head slices), outside a workspace and in one. The specification is the loop: acc = +0, then acc = acc + a*b
// for k = 0..K-1, one output at a time. Every result is compared bit for bit (BigUint64Array views:
// -0 and +0 differ) on data mixing signs, magnitudes 1e-20..1e20 and zeros of both signs, where
// another order gives other bits (shown below, so these tests can fail). Each product test runs
// twice on the same random shapes: with the JavaScript kernel forced (productEngine.mode "js") and
// with the Wasm kernel forced ("wasm", even for the smallest products).
import { test } from "node:test";
import assert from "node:assert/strict";
import { type Tensor, matmul, matmulNT, matmulTn, sizeOf, sumLast, tensor, zeros } from "../../src/core/ops.ts";
import { inWorkspace, newWorkspace } from "../../src/kernels/memory.ts";
import { productEngine, products } from "../../src/kernels/product.ts";
import { PRODUCT_T_MODULE, instantiateProduct, instantiateProductT } from "../../src/kernels/wasm.ts";
import { assertSameBits, makeRandom, wild } from "../toolkit.ts";

// ---- the specification: naive loops in index order from +0 ----
type SumRule = (term: (k: number) => number, K: number) => number;
const inOrder: SumRule = (term, K) => { let acc = 0; for (let k = 0; k < K; k++) acc = acc + term(k); return acc; };

/** a (..., M, K) @ b (..., K, N) or (K, N), each output's K terms summed by `sum` (the
 *  specification: in order from +0). */
function loopMatmul(a: Tensor, b: Tensor, sum: SumRule = inOrder): Tensor {
  const M = a.shape[a.shape.length - 2], K = a.shape[a.shape.length - 1], N = b.shape[b.shape.length - 1];
  const batch = sizeOf(a.shape.slice(0, -2)), bStride = b.shape.length === 2 ? 0 : K * N;
  const out = new Float64Array(batch * M * N);
  for (let p = 0; p < batch; p++) {
    for (let m = 0; m < M; m++) {
      for (let n = 0; n < N; n++) {
        out[p * M * N + m * N + n] = sum((k) => a.data[p * M * K + m * K + k] * b.data[p * bStride + k * N + n], K);
      }
    }
  }
  return { shape: [...a.shape.slice(0, -2), M, N], data: out };
}

function transposeLast(x: Tensor): Tensor {
  const R = x.shape[x.shape.length - 2], C = x.shape[x.shape.length - 1], batch = sizeOf(x.shape.slice(0, -2));
  const data = new Float64Array(x.data.length);
  for (let p = 0; p < batch; p++) for (let r = 0; r < R; r++) for (let c = 0; c < C; c++) data[p * R * C + c * R + r] = x.data[p * R * C + r * C + c];
  return { shape: [...x.shape.slice(0, -2), C, R], data };
}

const KS = [0, 1, 1, 2, 3, 4, 5, 7, 9, 16, 33, 130];

function randomCase(rand: () => number): { a: Tensor; b: Tensor } {
  const L = Math.floor(rand() * 4);
  const lead = Array.from({ length: L }, () => Math.floor(rand() * 4));
  const M = Math.floor(rand() * 10), N = Math.floor(rand() * 10), K = KS[Math.floor(rand() * KS.length)];
  const a = wild(rand, [...lead, M, K]);
  const b = wild(rand, rand() < 0.5 ? [K, N] : [...lead, K, N]);
  return { a, b };
}

test("the Wasm SIMD kernel is there under Node 24 (else the \"wasm\" runs below would test the fallback)", () => {
  assert.equal(productEngine.simd, true);
  // a synchronous new WebAssembly.Module on a browser's main thread is limited to 4 KB
  assert.ok(productEngine.moduleBytes > 8 && productEngine.moduleBytes < 4096, `${productEngine.moduleBytes} bytes`);
});

test("the gathering product kernel is there under Node 24, its module under 4 KB (the workspace tests below run it)", () => {
  assert.equal(productEngine.gather, true);
  assert.ok(PRODUCT_T_MODULE.length > 8 && PRODUCT_T_MODULE.length < 4096, `${PRODUCT_T_MODULE.length} bytes`);
});

test("productT's last pass reads no column past B's last: B ending at the last byte of memory, N mod 4 = 1, 2, 3", () => {
  // The columns n + j >= N of the last pass are read as column N - 1 (their lanes are never
  // stored); read as they stand they lie past B's end, here past the end of memory: a trap.
  const fresh = instantiateProduct();                       // a product module of its own: its memory, untouched
  assert.ok(fresh, "the product module compiles under Node 24");
  const memory = fresh.memory;
  const productT = instantiateProductT(memory);
  assert.ok(productT, "productT compiles under Node 24");
  const rand = makeRandom(11);
  for (const [M, K, N] of [[5, 3, 5], [3, 4, 6], [6, 2, 7], [4, 1, 1]]) {
    const f64 = new Float64Array(memory.buffer);
    const a = wild(rand, [M, K]), b = wild(rand, [K, N]);
    const bAt = f64.length - K * N;                        // B row-major (k, n), its last element the memory's last
    f64.set(a.data, 0);
    f64.set(b.data, bAt);
    const oAt = M * K;
    f64.fill(NaN, oAt, oAt + M * N + 1);                   // one element past O: must stay as it was
    productT(0, 8 * K, 8, 8 * bAt, 8 * N, 8, 8 * oAt, 8 * N, M, K, N, 1, 0, 0, 0);
    const got = tensor([M, N], f64.slice(oAt, oAt + M * N));
    assertSameBits(got, loopMatmul(a, b), `productT [${M}, ${K}] x [${K}, ${N}] at the end of memory`);
    assert.ok(Number.isNaN(f64[oAt + M * N]), "nothing is stored past O's last column");
  }
});

test("productEngine.counts: one count per product with work, for the kernel that ran it", () => {
  const rand = makeRandom(7);
  const small = { a: wild(rand, [3, 5]), b: wild(rand, [5, 2]) }; // 30 multiply-adds: "auto" runs it in JavaScript
  const large = { a: wild(rand, [32, 16]), b: wild(rand, [16, 16]) }; // 8192: "auto" runs it in Wasm
  const empty = { a: wild(rand, [0, 5]), b: wild(rand, [5, 2]) }; // no work: no kernel runs, nothing counted
  const run = (mode: "auto" | "js" | "wasm") => {
    productEngine.mode = mode;
    productEngine.counts.wasm = 0;
    productEngine.counts.js = 0;
    try {
      for (const { a, b } of [small, large, empty]) matmul(a, b);
      matmulNT(large.a, transposeLast(large.b));
      return { ...productEngine.counts };
    } finally { productEngine.mode = "auto"; }
  };
  assert.deepEqual(run("auto"), { wasm: 2, js: 1 });
  assert.deepEqual(run("js"), { wasm: 0, js: 3 });
  assert.deepEqual(run("wasm"), { wasm: 3, js: 0 });
});

for (const mode of ["js", "wasm"] as const) {
  const modeTest = (name: string, body: () => void) => test(`[${mode}] ${name}`, () => {
    productEngine.mode = mode;
    try { body(); } finally { productEngine.mode = "auto"; }
  });

  modeTest("matmul is the loop, bit for bit: batches, one shared b, 0-size axes, K = 1, odd M and N", () => {
    const rand = makeRandom(1);
    for (let i = 0; i < 1500; i++) {
      const { a, b } = randomCase(rand);
      assertSameBits(matmul(a, b), loopMatmul(a, b), `matmul [${a.shape}] @ [${b.shape}]`);
    }
  });

  modeTest("matmulNT and matmulTn are the loop on the transposed operand, bit for bit", () => {
    const rand = makeRandom(2);
    for (let i = 0; i < 1000; i++) {
      const { a, b } = randomCase(rand);
      const want = loopMatmul(a, b);
      assertSameBits(matmulNT(a, transposeLast(b)), want, `matmulNT [${a.shape}] @ [${b.shape}]^T`);
      assertSameBits(matmulTn(transposeLast(a), b), want, `matmulTn [${a.shape}]^T @ [${b.shape}]`);
    }
  });

  modeTest("the model's shapes: (448, 16) x (16, 64), (16, 448) x (448, 16), batched (128, 7, 7) x (128, 7, 8)", () => {
    const rand = makeRandom(3);
    const cases: [number[], number[]][] = [[[448, 16], [16, 64]], [[448, 64], [64, 16]], [[16, 448], [448, 16]],
      [[64, 7, 16], [16, 16]], [[128, 7, 7], [128, 7, 8]], [[128, 7, 8], [128, 8, 7]], [[448, 16], [16, 13]], [[1, 448], [448, 1]]];
    for (const [sa, sb] of cases) {
      const a = wild(rand, sa), b = wild(rand, sb);
      const want = loopMatmul(a, b);
      assertSameBits(matmul(a, b), want, `[${sa}] @ [${sb}]`);
      assertSameBits(matmulNT(a, transposeLast(b)), want, `NT [${sa}] @ [${sb}]`);
      assertSameBits(matmulTn(transposeLast(a), b), want, `Tn [${sa}] @ [${sb}]`);
    }
  });

  modeTest("a sum of -0 terms is +0 (the loop starts from +0)", () => {
    for (const K of [1, 2, 5, 9]) {
      for (const [M, N] of [[1, 1], [2, 4], [3, 5], [4, 8]]) {
        const a = tensor([M, K], new Float64Array(M * K).fill(-0)), b = tensor([K, N], new Float64Array(K * N).fill(1));
        for (const y of [matmul(a, b), matmulNT(a, transposeLast(b)), matmulTn(transposeLast(a), b)]) {
          for (const v of y.data) assert.ok(Object.is(v, 0), `K ${K}, ${M} x ${N}: got ${v}`);
        }
        for (const v of sumLast(a).data) assert.ok(Object.is(v, 0));
      }
    }
  });

  modeTest("infinities and NaN as in the loop; shape errors", () => {
    const a = tensor([3, 4], [1e308, 1e308, -Infinity, 1, Infinity, -Infinity, 1, 2, NaN, 1, 2, 3]);
    const b = tensor([4, 2], [10, 1, 10, -1, 0, 1, 1, 1]);
    const got = matmul(a, b), want = loopMatmul(a, b);
    for (let i = 0; i < want.data.length; i++) assert.ok(Object.is(got.data[i], want.data[i]), `element ${i}`);
    assert.throws(() => matmul(tensor([2, 3], [1, 2, 3, 4, 5, 6]), tensor([2, 2], [1, 2, 3, 4])), /do not fit/);
    assert.throws(() => matmulNT(tensor([2, 3], [1, 2, 3, 4, 5, 6]), tensor([2, 2], [1, 2, 3, 4])), /do not fit/);
    assert.throws(() => matmulTn(tensor([2, 3], [1, 2, 3, 4, 5, 6]), tensor([3, 2], [1, 2, 3, 4, 5, 6])), /do not fit/);
  });

  modeTest("batched operands must share their leading axes (rank and every size), named in the message", () => {
    const z = (shape: number[]) => tensor(shape, new Array(sizeOf(shape)).fill(1));
    // [lead of a, lead of b]: a different size at the first or a later axis, a different rank
    for (const [la, lb] of [[[2], [3]], [[2, 3], [2, 4]], [[2, 3], [3]], [[3], [1, 3]], [[3], [3, 4]]]) {
      assert.throws(() => matmul(z([...la, 2, 4]), z([...lb, 4, 5])),
        { message: `matmul: shapes [${[...la, 2, 4]}] @ [${[...lb, 4, 5]}] do not fit` });
      assert.throws(() => matmulNT(z([...la, 2, 4]), z([...lb, 5, 4])),
        { message: `matmulNT: shapes [${[...la, 2, 4]}] @ [${[...lb, 5, 4]}]^T do not fit` });
      assert.throws(() => matmulTn(z([...la, 4, 2]), z([...lb, 4, 5])),
        { message: `matmulTn: shapes [${[...la, 4, 2]}]^T @ [${[...lb, 4, 5]}] do not fit` });
    }
    // the same leading axes, or one shared 2-D b, fit
    assert.deepEqual(matmul(z([2, 3, 2, 4]), z([2, 3, 4, 5])).shape, [2, 3, 2, 5]);
    assert.deepEqual(matmulNT(z([2, 3, 2, 4]), z([5, 4])).shape, [2, 3, 2, 5]);
    assert.deepEqual(matmulTn(z([2, 3, 4, 2]), z([4, 5])).shape, [2, 3, 2, 5]);
  });
}

// What a wrong SIMD kernel would compute, through the same checks: the two f64x2 lanes across k
// (lane 0 sums the even terms, lane 1 the odd ones, then one horizontal add), and a kernel whose
// accumulators start from the first term instead of +0 (a -0 product then stays -0).
const WRONG_SUMS: Record<"lanes across k" | "no +0 start", SumRule> = {
  "lanes across k": (term, K) => {
    let lane0 = 0, lane1 = 0;
    for (let k = 0; k + 1 < K; k += 2) { lane0 = lane0 + term(k); lane1 = lane1 + term(k + 1); }
    if (K % 2 === 1) lane0 = lane0 + term(K - 1);
    return lane0 + lane1;
  },
  "no +0 start": (term, K) => {
    let acc = K === 0 ? 0 : term(0);
    for (let k = 1; k < K; k++) acc = acc + term(k);
    return acc;
  },
};

function wrongProduct(a: Tensor, b: Tensor, kind: "lanes across k" | "no +0 start"): Tensor {
  return loopMatmul(a, b, WRONG_SUMS[kind]);
}

test("the checks above reject a kernel with lanes across k, and one that does not start from +0", () => {
  for (const kind of ["lanes across k", "no +0 start"] as const) {
    const rand = makeRandom(1);
    let rejected = 0;
    for (let i = 0; i < 1500; i++) {
      const { a, b } = randomCase(rand);
      try { assertSameBits(wrongProduct(a, b, kind), loopMatmul(a, b), kind); } catch { rejected++; }
    }
    assert.ok(rejected > 50, `${kind}: only ${rejected} of 1500 random products rejected`);
  }
});

test("[wasm] infinities and NaN among many terms, every lane and pad position", () => {
  productEngine.mode = "wasm";
  try {
    const rand = makeRandom(6);
    for (let i = 0; i < 300; i++) {
      const { a, b } = randomCase(rand);
      for (const t of [a, b]) {
        for (let j = 0; j < t.data.length; j++) {
          const u = rand();
          if (u < 0.03) t.data[j] = Infinity; else if (u < 0.06) t.data[j] = -Infinity; else if (u < 0.08) t.data[j] = NaN;
        }
      }
      const want = loopMatmul(a, b);
      for (const [what, got] of [["matmul", matmul(a, b)], ["NT", matmulNT(a, transposeLast(b))], ["Tn", matmulTn(transposeLast(a), b)]] as const) {
        for (let j = 0; j < want.data.length; j++) assert.ok(Object.is(got.data[j], want.data[j]), `${what} [${a.shape}] @ [${b.shape}], element ${j}`);
      }
    }
  } finally { productEngine.mode = "auto"; }
});

// ---- a training step's workspace (newWorkspace, inWorkspace, empty) ----

/** x copied into a tensor of the active workspace (zeros draws from it). */
function inWs(x: Tensor): Tensor {
  const t = zeros(x.shape);
  t.data.set(x.data);
  return t;
}

test("[wasm] in a workspace (its tensors in the kernel's memory from the second step on) the products are the loop, bit for bit", () => {
  const ws = newWorkspace();
  productEngine.mode = "wasm";
  try {
    // the model's shapes (N a multiple of 4: B and O used in place; else copied), batched and shared b
    const shapes: [number[], number[]][] = [[[448, 16], [16, 64]], [[448, 64], [64, 16]], [[16, 448], [448, 16]],
      [[64, 7, 16], [16, 16]], [[128, 7, 7], [128, 7, 8]], [[128, 7, 8], [128, 8, 7]], [[448, 16], [16, 13]], [[3, 5, 9], [3, 9, 12]]];
    for (let step = 0; step < 3; step++) {
      const rand = makeRandom(11); // the same operands every step: the step's need is the previous one's
      inWorkspace(ws, () => {
        for (const [sa, sb] of shapes) {
          const a = wild(rand, sa), b = wild(rand, sb);
          const want = loopMatmul(a, b);
          const at = inWs(a), bt = inWs(b), aT = inWs(transposeLast(a)), bT = inWs(transposeLast(b));
          assertSameBits(matmul(at, bt), want, `step ${step}: [${sa}] @ [${sb}]`);
          assertSameBits(matmulNT(at, bT), want, `step ${step}: NT [${sa}] @ [${sb}]`);
          assertSameBits(matmulTn(aT, bt), want, `step ${step}: Tn [${sa}] @ [${sb}]`);
          assertSameBits(matmul(a, bt), want, `step ${step}: a outside, b inside`);
          assertSameBits(matmul(at, b), want, `step ${step}: a inside, b outside`);
        }
      });
    }
  } finally { productEngine.mode = "auto"; }
});

test("[wasm] a product whose copies do not fit below a pinned workspace runs in JavaScript, same bits; the next step reserves room", () => {
  const ws = newWorkspace();
  const rand = makeRandom(12);
  const a = wild(rand, [2000, 150]), b = wild(rand, [150, 7]); // outside the workspace; N = 7: B packed, O copied
  const want = loopMatmul(a, b);
  const small = wild(rand, [8, 8]);
  productEngine.mode = "wasm";
  try {
    const counts = () => ({ ...productEngine.counts });
    productEngine.counts.wasm = 0;
    productEngine.counts.js = 0;
    inWorkspace(ws, () => inWs(small)); // the first step: ordinary memory, so the second one is pinned
    inWorkspace(ws, () => { inWs(small); assertSameBits(matmul(a, b), want, "pinned, copies too large"); });
    assert.deepEqual(counts(), { wasm: 0, js: 1 });
    inWorkspace(ws, () => { inWs(small); assertSameBits(matmul(a, b), want, "pinned, room reserved"); });
    assert.deepEqual(counts(), { wasm: 1, js: 1 });
  } finally { productEngine.mode = "auto"; }
});

// products on head slices: A, B and O read and written through strides (a head h of a (B, T, d)
// tensor is offset h*D, rows d apart, batch T*d apart), as multiHeadAttention calls it. The
// specification is the loop over the same addresses; every element products does not own must
// keep its value (a kernel writing its pad columns in place would overwrite the next head's).
type Strides = [number, number, number, number]; // offset, row (m or k), column (k or n), batch
function loopProducts(A: Float64Array, a: Strides, B: Float64Array, b: Strides, O: Float64Array, o: [number, number, number],
  M: number, K: number, N: number, batch: number): void {
  for (let p = 0; p < batch; p++) {
    for (let m = 0; m < M; m++) {
      for (let n = 0; n < N; n++) {
        let acc = 0;
        for (let k = 0; k < K; k++) acc = acc + A[a[0] + p * a[3] + m * a[1] + k * a[2]] * B[b[0] + p * b[3] + k * b[1] + n * b[2]];
        O[o[0] + p * o[2] + m * o[1] + n] = acc;
      }
    }
  }
}

/** The six head-slice products of multi-head attention's forward and backward, for batch Bt,
 *  T queries, S keys, H heads of D features (d = H D), head h. */
function headCases(Bt: number, T: number, S: number, H: number, D: number, h: number) {
  const d = H * D;
  // [what, A's size, A strides, B's size, B strides, O's size, O strides, M, K, N]
  return [
    ["scores = q_h k_h^T", Bt * T * d, [h * D, d, 1, T * d], Bt * S * d, [h * D, 1, d, S * d], Bt * H * T * S, [h * T * S, S, H * T * S], T, D, S],
    ["out_h = w_h v_h", Bt * H * T * S, [h * T * S, S, 1, H * T * S], Bt * S * d, [h * D, d, 1, S * d], Bt * T * d, [h * D, d, T * d], T, S, D],
    ["dv_h = w_h^T dout_h", Bt * H * T * S, [h * T * S, 1, S, H * T * S], Bt * T * d, [h * D, d, 1, T * d], Bt * S * d, [h * D, d, S * d], S, T, D],
  ] as [string, number, Strides, number, Strides, number, [number, number, number], number, number, number][];
}

for (const mode of ["js", "wasm"] as const) {
  test(`[${mode}] products on head slices (strided A, B and O) are the loop, bit for bit, and touch nothing else, in a workspace and outside`, () => {
    const ws = newWorkspace();
    productEngine.mode = mode;
    try {
      // D = 8: B and O in place under Wasm (rows of the (B, T, d) tensor); D = 3, 6: packed, copied out
      const dims: [number, number, number, number, number][] = [[5, 7, 6, 2, 8], [3, 4, 9, 3, 3], [2, 5, 5, 2, 6], [4, 7, 7, 1, 8], [1, 9, 4, 4, 4]];
      for (let step = 0; step < 3; step++) {
        const rand = makeRandom(12);
        inWorkspace(ws, () => {
          for (const [Bt, T, S, H, D] of dims) {
            for (let h = 0; h < H; h++) {
              for (const [what, na, as, nb, bs, no, os, M, K, N] of headCases(Bt, T, S, H, D, h)) {
                for (const inside of [true, false]) {
                  const a = wild(rand, [na]).data, b = wild(rand, [nb]).data;
                  const A = inside ? zeros([na]).data : new Float64Array(na), B = inside ? zeros([nb]).data : new Float64Array(nb);
                  A.set(a); B.set(b);
                  const O = inside ? zeros([no]).data : new Float64Array(no);
                  for (let i = 0; i < no; i++) O[i] = 1000 + i; // sentinels
                  const want = Float64Array.from(O);
                  loopProducts(a, as, b, bs, want, os, M, K, N, Bt);
                  products(A, as[0], as[1], as[2], as[3], B, bs[0], bs[1], bs[2], bs[3], O, os[0], os[1], os[2], M, K, N, Bt);
                  assertSameBits({ shape: [no], data: O }, want, `step ${step}, ${what}, B ${Bt} T ${T} S ${S} H ${H} D ${D} h ${h}${inside ? ", in the workspace" : ""}`);
                }
              }
            }
          }
        });
      }
    } finally { productEngine.mode = "auto"; }
  });
}
