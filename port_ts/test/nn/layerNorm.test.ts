// Layer norm: the shape checks, the backward on a constant row, the fused residual, the bits of
// the backward's sums in a dirty workspace, and the row kernels. Values (random affine, rows at
// 1e4, constant rows, d = 1) are the cases layer_norm.*, bit for bit against the reference; the
// backward is compared with the reference's in tests/test_backward_layers.py.
import { test } from "node:test";
import assert from "node:assert/strict";
import { empty, tensor } from "../../src/core/ops.ts";
import { inWorkspace, newWorkspace } from "../../src/kernels/memory.ts";
import { Generator } from "../../src/core/rng.ts";
import { layerNormBackward, layerNormForward, EPS } from "../../src/nn/layerNorm.ts";
import { sameBitsInKernels } from "../toolkit.ts";

test("gamma or beta of the wrong length is an error", () => {
  assert.throws(() => layerNormForward(tensor([1, 2], [1, 2]), tensor([3], [1, 1, 1]), tensor([2], [0, 0])), /shape \(2,\)/);
});

// ---- backward ----

// No case and no engine comparison (tests/test_backward_layers.py draws random rows) runs the
// port's backward on a constant row.
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
