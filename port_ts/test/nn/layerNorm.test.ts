// Layer norm: unit statistics with gamma = 1, beta = 0; constant rows and d = 1 give beta;
// the cache's mean and rstd; a row offset by 1e4 normalises like the same row without it.
// Backward: finite differences, the invariances of dx, and a constant row.
import { test } from "node:test";
import assert from "node:assert/strict";
import { empty, inWorkspace, newWorkspace, tensor } from "../../src/core/ops.ts";
import { Generator } from "../../src/core/rng.ts";
import { layerNormBackward, layerNormForward, EPS } from "../../src/nn/layerNorm.ts";
import { layerNormParams } from "../../src/nn/init.ts";
import { checkFd, dot, sameBitsInKernels, tolerance } from "../toolkit.ts";

// Tolerances, each with its reason.
const MEAN0 = tolerance("layer_norm", "mean").value;
const VAR = tolerance("layer_norm", "variance").value;
const OFFSET = tolerance("layer_norm", "offset").value;

function stats(row: ArrayLike<number>): { mean: number; v: number } {
  let s = 0;
  for (let i = 0; i < row.length; i++) s += row[i];
  const mean = s / row.length;
  let q = 0;
  for (let i = 0; i < row.length; i++) q += (row[i] - mean) ** 2;
  return { mean, v: q / row.length };
}

test("gamma = 1, beta = 0: every row has mean 0 and variance var / (var + eps) ~ 1", () => {
  const x = new Generator(7).normal([5, 16], 3, 2);
  const { gamma, beta } = layerNormParams(16);
  const { out, cache } = layerNormForward(x, gamma, beta);
  for (let r = 0; r < 5; r++) {
    const before = stats(x.data.subarray(r * 16, r * 16 + 16));
    const after = stats(out.data.subarray(r * 16, r * 16 + 16));
    assert.ok(Math.abs(after.mean) <= MEAN0, `row ${r}: mean ${after.mean}`);
    assert.ok(Math.abs(after.v - before.v / (before.v + EPS)) <= VAR, `row ${r}: variance ${after.v}`);
    assert.ok(Math.abs(cache.mean.data[r] - before.mean) <= 1e-15 * Math.abs(before.mean) * 4);
    assert.ok(Math.abs(cache.rstd.data[r] - 1 / Math.sqrt(before.v + EPS)) <= 1e-15);
  }
});

test("gamma and beta apply per feature after normalising", () => {
  const x = tensor([1, 2], [1, 3]); // mean 2, var 1: xhat = -+1 / sqrt(1 + eps)
  const { out } = layerNormForward(x, tensor([2], [2, 3]), tensor([2], [10, -10]));
  const s = 1 / Math.sqrt(1 + EPS);
  assert.equal(out.data[0], -s * 2 + 10);
  assert.equal(out.data[1], s * 3 - 10);
});

test("a constant row (variance 0) and d = 1 both give beta exactly", () => {
  const beta = tensor([3], [0.5, -2, 7]);
  const { out } = layerNormForward(tensor([2, 3], [4, 4, 4, -1e4, -1e4, -1e4]), tensor([3], [3, 3, 3]), beta);
  assert.deepEqual(Array.from(out.data), [0.5, -2, 7, 0.5, -2, 7]);
  const one = layerNormForward(tensor([3, 1], [5, -6, 0]), tensor([1], [9]), tensor([1], [0.25]));
  assert.deepEqual(Array.from(one.out.data), [0.25, 0.25, 0.25]);
});

test("a row offset by 1e4 normalises like the row itself (shift invariance, to cancellation)", () => {
  const base = new Generator(8).normal([1, 16]);
  const shifted = tensor([1, 16], Array.from(base.data, (v) => v + 1e4));
  const { gamma, beta } = layerNormParams(16);
  const a = layerNormForward(base, gamma, beta).out.data, b = layerNormForward(shifted, gamma, beta).out.data;
  for (let k = 0; k < 16; k++) assert.ok(Math.abs(a[k] - b[k]) <= OFFSET, `feature ${k}: ${a[k]} vs ${b[k]}`);
});

test("gamma or beta of the wrong length is an error", () => {
  assert.throws(() => layerNormForward(tensor([1, 2], [1, 2]), tensor([3], [1, 1, 1]), tensor([2], [0, 0])), /shape \(2,\)/);
});

// ---- backward ----

test("backward matches finite differences for x, gamma and beta", () => {
  const g = new Generator(33);
  const x = g.normal([2, 3, 5]), gamma = g.normal([5]), beta = g.normal([5]), dout = g.normal([2, 3, 5]);
  const { dx, dgamma, dbeta } = layerNormBackward(dout, layerNormForward(x, gamma, beta).cache);
  const f = () => dot(layerNormForward(x, gamma, beta).out, dout);
  checkFd("dx", f, x, dx, tolerance("layer_norm", "fd_in_order"));
  checkFd("dgamma", f, gamma, dgamma, tolerance("layer_norm", "fd_in_order"));
  checkFd("dbeta", f, beta, dbeta, tolerance("layer_norm", "fd_in_order"));
});

test("dbeta is the column sum of dout; each row of dx sums to 0; dx . xhat is eps's share", () => {
  const g = new Generator(34);
  const x = g.normal([4, 6]), dout = g.normal([4, 6]);
  const { cache } = layerNormForward(x, g.normal([6]), g.normal([6]));
  const { dx, dbeta } = layerNormBackward(dout, cache);
  for (let k = 0; k < 6; k++) {
    let s = 0;
    for (let r = 0; r < 4; r++) s += dout.data[r * 6 + k];
    assert.equal(dbeta.data[k], s);
  }
  for (let r = 0; r < 4; r++) {
    let s = 0, p = 0, q = 0, scale = 0;
    for (let k = 0; k < 6; k++) {
      s += dx.data[r * 6 + k];
      p += dx.data[r * 6 + k] * cache.xhat.data[r * 6 + k];
      q += dout.data[r * 6 + k] * cache.gamma.data[k] * cache.xhat.data[r * 6 + k];
      scale = Math.max(scale, Math.abs(dx.data[r * 6 + k]));
    }
    // shifting x leaves xhat unchanged, so each row of dx sums to 0; scaling the centred part
    // changes xhat only through eps: sum(dx * xhat) = rstd^3 * eps * sum(dout * gamma * xhat)
    const rs = cache.rstd.data[r];
    const want = rs * rs * rs * EPS * q;
    assert.ok(Math.abs(s) <= 1e-14 * scale, `row ${r}: sum ${s}`);
    assert.ok(Math.abs(p - want) <= 1e-14 * scale && Math.abs(want) > 1e-7, `row ${r}: dot ${p}, want ${want}`);
  }
});

test("a constant row passes dout * gamma * rstd minus its mean, rstd = 1 / sqrt(eps)", () => {
  const { cache } = layerNormForward(tensor([1, 3], [2, 2, 2]), tensor([3], [1, 2, 3]), tensor([3], [0, 0, 0]));
  const { dx, dgamma } = layerNormBackward(tensor([1, 3], [1, 1, 1]), cache);
  const rstd = 1 / Math.sqrt(EPS); // dxhat = [1, 2, 3], mean 2
  assert.deepEqual(Array.from(dx.data), [-1 * rstd, 0, 1 * rstd]);
  assert.deepEqual(Array.from(dgamma.data), [0, 0, 0]); // xhat = 0
});

test("a residual is added first: layerNormForward(x, ..., residual) gives the bits of LN(x + residual), in a workspace too", () => {
  const g = new Generator(77);
  const x = g.normal([3, 5, 16], 0, 3), y = g.normal([3, 5, 16], 0, 0.5), gamma = g.normal([16]), beta = g.normal([16]);
  x.data[0] = 1e300; y.data[0] = -1e300; // a row whose sum cancels: the sum is formed before the mean
  const summed = tensor(x.shape, x.data.map((v, i) => v + y.data[i]));
  const want = layerNormForward(summed, gamma, beta);
  const ws = newWorkspace();
  inWorkspace(ws, () => { for (let i = 0; i < 6; i++) empty([x.data.length]).data.fill(NaN); }); // memory left dirty
  const got = inWorkspace(ws, () => {
    const { out, cache } = layerNormForward(x, gamma, beta, EPS, y);
    return [out, cache.xhat, cache.mean, cache.rstd].map((t) => Array.from(t.data));
  });
  const wanted = [want.out, want.cache.xhat, want.cache.mean, want.cache.rstd].map((t) => Array.from(t.data));
  ["out", "xhat", "mean", "rstd"].forEach((name, i) => assert.deepEqual(got[i], wanted[i], name));
  assert.throws(() => layerNormForward(x, gamma, beta, EPS, g.normal([3, 16])), /residual must have x's shape \[3,5,16\]/);
});

test("backward gives the bits of its rule: dx row by row, dbeta and dgamma running sums over the rows in order from +0", () => {
  const g = new Generator(78);
  const x = g.normal([4, 9, 16], 0, 2), gamma = g.normal([16]), beta = g.normal([16]);
  const dout = g.normal([4, 9, 16]);
  for (let i = 0; i < dout.data.length; i += 7) dout.data[i] *= 1e12; // magnitudes where the order of the sums shows
  const { cache } = layerNormForward(x, gamma, beta);
  const D = dout.data, H = cache.xhat.data, G = gamma.data, d = 16, rows = D.length / d;
  const wantDx = new Float64Array(D.length), wantDg = new Float64Array(d), wantDb = new Float64Array(d);
  for (let r = 0; r < rows; r++) {
    const o = r * d;
    let s1 = 0, s2 = 0;
    for (let k = 0; k < d; k++) {
      wantDb[k] += D[o + k];
      wantDg[k] += D[o + k] * H[o + k];
      s1 += D[o + k] * G[k];
      s2 += D[o + k] * G[k] * H[o + k];
    }
    for (let k = 0; k < d; k++) wantDx[o + k] = ((D[o + k] * G[k] - s1 / d) - H[o + k] * (s2 / d)) * cache.rstd.data[r];
  }
  const ws = newWorkspace();
  inWorkspace(ws, () => { for (let i = 0; i < 6; i++) empty([D.length]).data.fill(NaN); }); // memory left dirty
  const got = inWorkspace(ws, () => {
    const { dx, dgamma, dbeta } = layerNormBackward(dout, cache);
    return [dx, dgamma, dbeta].map((t) => Array.from(t.data));
  });
  assert.deepEqual(got[0], Array.from(wantDx), "dx");
  assert.deepEqual(got[1], Array.from(wantDg), "dgamma");
  assert.deepEqual(got[2], Array.from(wantDb), "dbeta");
});

test("[wasm] forward and backward in the row kernels (two rows a lane pair, then two columns) give the loops' bits", () => {
  const g = new Generator(79);
  // odd and even row counts (an odd last row shares a pass with itself), residual or not,
  // d even (both kernels), odd (the backward's column sums stay in the loops) and 1
  for (const [shape, withResidual] of [[[5, 16], true], [[6, 16], false], [[1, 16], true], [[3, 7, 4], false], [[4, 3], true], [[5, 1], false], [[2, 2], true]] as [number[], boolean][]) {
    const d = shape[shape.length - 1];
    const x = g.normal(shape, 0, 3), y = g.normal(shape, 0, 0.5), gamma = g.normal([d]), beta = g.normal([d]), dout = g.normal(shape);
    x.data.fill(2.5, 0, d); y.data.fill(0, 0, d); // a constant row: var 0, xhat 0
    x.data[d] = 1e300; y.data[d] = -1e300; // a row whose sum cancels
    if (x.data.length > 3 * d) { x.data.fill(-0, 2 * d, 3 * d); y.data.fill(-0, 2 * d, 3 * d); } // -0 + -0: a row of -0
    for (let i = 0; i < dout.data.length; i += 5) dout.data[i] *= 1e12; // where the order of the sums shows
    dout.data[1] = -0;
    sameBitsInKernels(`shape (${shape}), residual ${withResidual}`, (inWs) => {
      const { out, cache } = layerNormForward(inWs(x), gamma, beta, EPS, withResidual ? inWs(y) : null);
      const { dx, dgamma, dbeta } = layerNormBackward(inWs(dout), cache);
      return [out, cache.xhat, cache.mean, cache.rstd, dx, dgamma, dbeta].map((t) => t.data.slice());
    }, d % 2 === 0 ? 2 : 1);
  }
});
