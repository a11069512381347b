// kernels/rows.ts: each row kernel's Wasm form gives the bits of its JavaScript form (its
// specification) on the same inputs, over many shapes: one row and many, odd and even row counts
// (an odd last row shares a lane pair with itself), widths 1, odd, even and large, masked rows of
// every kept count, and values with NaN, infinities, zeros of both signs and magnitudes where the
// order of a sum shows. Each case runs through toolkit.ts's sameBitsInKernels: once with the
// JavaScript forms forced (productEngine.mode "js"), once with every array in the kernels' memory
// (a workspace's second step), asserting that the Wasm form ran where it applies, then comparing
// every output's bits (BigUint64Array views: -0 is not +0), a NaN matching any NaN: Wasm's f64x2
// operations, like x86's scalar ones, may give a NaN of another sign or payload (IEEE 754 leaves
// them open), which no document keeps (a NaN is written as NaN).
import { test } from "node:test";
import assert from "node:assert/strict";
import { type Tensor, zeros } from "../../src/core/ops.ts";
import {
  biasReluRows, expAll, layerNormBackwardRows, layerNormRows, reluGateRows, rowEngine, softmaxBackwardRows, softmaxNormalizeRows,
  softmaxShiftRows,
} from "../../src/kernels/rows.ts";
import { makeRandom, sameBitsInKernels, wild } from "../toolkit.ts";

const SPECIAL = [NaN, Infinity, -Infinity, 0, -0, 5e-324, -1e308, 1e308];

/** wild data of n values, about one in `every` replaced by a special value. */
function values(rand: () => number, n: number, every = 13): Float64Array {
  const x = wild(rand, [n]).data;
  for (let i = 0; i < n; i++) if (rand() * every < 1) x[i] = SPECIAL[Math.floor(rand() * SPECIAL.length)];
  return x;
}

/** Normal-sized data (no specials): values that take every branch of a kernel's arithmetic. */
function normals(rand: () => number, n: number, scale = 3): Float64Array {
  return Float64Array.from({ length: n }, () => (rand() * 2 - 1) * scale);
}

const t = (data: Float64Array): Tensor => ({ shape: [data.length], data });
/** A copy in the active workspace (in the kernels' memory in sameBitsInKernels' second step). */
const within = (inWs: (x: Tensor) => Tensor, data: Float64Array) => inWs(t(data)).data;
/** n doubles of the active workspace, NaN until the kernel writes them (every output written). */
const dirty = (n: number) => zeros([n]).data.fill(NaN);

const ROWS = [1, 2, 3, 4, 5, 8];
const WIDTHS = [1, 2, 3, 4, 5, 6, 7, 8, 9, 16, 33, 64, 130];

test("the Wasm row kernels are there under Node 24, their module under 4 KB (so the tests below test them)", () => {
  assert.equal(rowEngine.simd, true);
  assert.ok(rowEngine.moduleBytes > 8 && rowEngine.moduleBytes < 4096, `${rowEngine.moduleBytes} bytes`);
});

test("biasReluRows: relu(H + b) row by row; in Wasm for even widths", () => {
  const rand = makeRandom(21);
  for (const rows of ROWS) {
    for (const F of [...WIDTHS, 1024]) {
      const H = values(rand, rows * F), b = values(rand, F);
      sameBitsInKernels(`biasRelu ${rows} x ${F}`, (inWs) => {
        const h = within(inWs, H);
        biasReluRows(h, b, F);
        return [h.slice()];
      }, F % 2 === 0 ? 1 : 0, true);
    }
  }
});

test("reluGateRows: D gated where X > 0 and DB the gated columns' sums over the rows; in Wasm for even widths", () => {
  const rand = makeRandom(22);
  for (const rows of [...ROWS, 37]) {
    for (const F of [...WIDTHS, 1024]) {
      const D = values(rand, rows * F), X = values(rand, rows * F, 4);
      sameBitsInKernels(`reluGate ${rows} x ${F}`, (inWs) => {
        const d = within(inWs, D), x = within(inWs, X), db = zeros([F]).data;
        reluGateRows(d, x, db, F);
        return [d.slice(), db.slice()];
      }, F % 2 === 0 ? 1 : 0, true);
    }
  }
});

test("layerNormRows: mean, rstd, xhat and out per row, with a residual or without; in Wasm for every width", () => {
  const rand = makeRandom(23);
  for (const rows of ROWS) {
    for (const d of [...WIDTHS, 768]) {
      for (const withResidual of [false, true]) {
        const X = normals(rand, rows * d), R = normals(rand, rows * d, 0.5), G = values(rand, d, 20), B = values(rand, d, 20);
        X.fill(2.5, 0, d); R.fill(0, 0, d); // a constant row: var 0, xhat 0
        if (rows > 1) { X[d] = 1e300; R[d] = -1e300; } // a row whose sum cancels (with the residual)
        if (rows > 2) { X.fill(-0, 2 * d, 3 * d); R.fill(-0, 2 * d, 3 * d); } // a row of -0
        if (rows > 3) X[3 * d] = NaN; // a NaN row
        if (rows > 4) X[4 * d] = Infinity;
        sameBitsInKernels(`layerNorm ${rows} x ${d}, residual ${withResidual}`, (inWs) => {
          const x = within(inWs, X), r = withResidual ? within(inWs, R) : null;
          const h = dirty(rows * d), o = dirty(rows * d), m = dirty(rows), s = dirty(rows);
          layerNormRows(x, r, G, B, h, o, m, s, d, 1e-5);
          return [h, o, m, s].map((a) => a.slice());
        }, 1, true);
      }
    }
  }
});

test("layerNormBackwardRows: dx per row, dgamma and dbeta over the rows; in Wasm for even widths", () => {
  const rand = makeRandom(24);
  for (const rows of [...ROWS, 37]) {
    for (const d of [...WIDTHS, 768]) {
      const D = values(rand, rows * d, 30), H = normals(rand, rows * d), G = values(rand, d, 20), S = normals(rand, rows, 40);
      for (let i = 0; i < D.length; i += 7) D[i] *= 1e12; // where the order of the sums shows
      sameBitsInKernels(`layerNormBackward ${rows} x ${d}`, (inWs) => {
        const dd = within(inWs, D), h = within(inWs, H), s = within(inWs, S);
        const dx = dirty(rows * d), dg = dirty(d), db = dirty(d);
        layerNormBackwardRows(dd, h, G, s, dx, dg, db, d);
        return [dx, dg, db].map((a) => a.slice());
      }, d % 2 === 0 ? 1 : 0, true);
    }
  }
});

/** Each row's kept count as masked softmax hands it (0 .. K, every count met), or null: all kept. */
function keptCounts(rand: () => number, rows: number, K: number, masked: boolean): Float64Array | null {
  return masked ? Float64Array.from({ length: rows }, (_, r) => (r < K + 1 ? r : Math.floor(rand() * (K + 1)))) : null;
}

const MASK_VALUE = -1e6;

test("softmaxShiftRows, softmaxNormalizeRows, expAll: the forward's three passes, masked and not; in Wasm for every width", () => {
  const rand = makeRandom(25);
  for (const rows of [...ROWS, 17]) {
    for (const K of WIDTHS) {
      for (const masked of [false, true]) {
        const X = values(rand, rows * K, 9).map((v) => (Math.abs(v) > 1e3 && Number.isFinite(v) ? v * 1e-300 : v));
        if (rows > 1) for (let k = 0; k < K; k++) X[K + k] = MASK_VALUE + (k - 2) * 0.75; // scores near the mask value
        if (rows > 2) X[2 * K] = 800; // an exp that overflows unshifted
        const kept = keptCounts(rand, rows, K, masked);
        sameBitsInKernels(`softmax forward ${rows} x ${K}, masked ${masked}`, (inWs) => {
          const x = within(inWs, X), o = dirty(rows * K), n = kept === null ? null : within(inWs, kept);
          softmaxShiftRows(x, o, n, K, MASK_VALUE);
          const shifted = o.slice();
          expAll(o);
          const e = o.slice();
          softmaxNormalizeRows(o, K);
          return [shifted, e, o.slice()];
        }, 3, true);
      }
    }
  }
});

test("softmaxBackwardRows: dx = y (dout - dot) where kept, +0 elsewhere; in Wasm for every width", () => {
  const rand = makeRandom(26);
  for (const rows of [...ROWS, 17]) {
    for (const K of WIDTHS) {
      for (const masked of [false, true]) {
        const G = values(rand, rows * K), Y = Float64Array.from({ length: rows * K }, () => rand());
        if (rows > 1) Y[K] = -0;
        const kept = keptCounts(rand, rows, K, masked);
        sameBitsInKernels(`softmax backward ${rows} x ${K}, masked ${masked}`, (inWs) => {
          const g = within(inWs, G), y = within(inWs, Y), dx = dirty(rows * K), n = kept === null ? null : within(inWs, kept);
          softmaxBackwardRows(g, y, dx, n, K);
          return [dx.slice()];
        }, 1, true);
      }
    }
  }
});

test("expAll: mathlib's exp element by element over any length, results near the overflow and subnormal included", () => {
  const rand = makeRandom(27);
  for (const n of [1, 2, 3, 4, 5, 6, 7, 8, 9, 33, 1000]) {
    const P = Float64Array.from({ length: n }, () => (rand() * 2 - 1) * 760);
    for (let i = 0; i < n; i += 5) P[i] = SPECIAL[Math.floor(rand() * SPECIAL.length)];
    for (let i = 2; i < n; i += 7) P[i] = -(700 + rand() * 46); // subnormal or near: the scalar exp's share
    sameBitsInKernels(`exp of ${n}`, (inWs) => {
      const p = within(inWs, P);
      expAll(p);
      return [p.slice()];
    }, 1, true);
  }
});
