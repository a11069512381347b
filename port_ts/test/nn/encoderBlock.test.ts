// The post-norm encoder block: parameter names and shapes, AddNorm against a direct formula,
// post-norm rows (LN last), masked keys ignored exactly, and the generator draws in forward order.
import { test } from "node:test";
import assert from "node:assert/strict";
import { Generator } from "../../src/core/rng.ts";
import { intTensor, type Tensor } from "../../src/core/ops.ts";
import {
  addNormBackward, addNormForward, encoderBlockBackward, encoderBlockForward, initEncoderBlockParams,
} from "../../src/nn/encoderBlock.ts";
import { centralDifference, dot, pickCoordinates, tolerance } from "../toolkit.ts";

const DIRECT = tolerance("encoder_block", "direct").value;
const ROW_MEAN = tolerance("encoder_block", "row_mean").value;
// Fourth-order central differences at the declared step, at coordinates with |gradient| >= min_grad.
const FD = tolerance("encoder_block", "fd"), FD_STEP = FD.step!, FD_REL = FD.value, FD_MIN_GRAD = FD.minGrad!;

function setup(seed: number, B: number, T: number, d: number, F: number) {
  const rng = new Generator(seed);
  const params = initEncoderBlockParams(rng, d, F);
  const x = rng.normal([B, T, d]);
  return { rng, params, x };
}

test("parameters: documented names, in draw order, with their shapes", () => {
  const { params } = setup(1, 1, 1, 8, 16);
  const shapes = Object.fromEntries(Object.entries(params).map(([k, v]) => [k, v.shape]));
  assert.deepEqual(shapes, {
    "attn.W_q": [8, 8], "attn.W_k": [8, 8], "attn.W_v": [8, 8], "attn.W_o": [8, 8],
    "ln1.gamma": [8], "ln1.beta": [8],
    "ffn.W1": [16, 8], "ffn.b1": [16], "ffn.W2": [8, 16], "ffn.b2": [8],
    "ln2.gamma": [8], "ln2.beta": [8],
  });
  assert.deepEqual(Object.keys(params), Object.keys(shapes)); // insertion order = draw order
  const ffnBound = 1 / Math.sqrt(16);
  assert.ok(params["ffn.W2"].data.every((w) => Math.abs(w) <= ffnBound)); // fan_in of W2 is F
  assert.ok(params["ffn.W2"].data.some((w) => Math.abs(w) > 1 / Math.sqrt(8) * 0.5));
});

test("addNorm is LN(x + y) row by row, with gamma and beta applied", () => {
  const rng = new Generator(2);
  const x = rng.normal([3, 4]), y = rng.normal([3, 4]);
  const gamma = rng.normal([4]), beta = rng.normal([4]);
  const { out } = addNormForward(x, y, gamma, beta);
  for (let r = 0; r < 3; r++) {
    const s = [0, 1, 2, 3].map((k) => x.data[r * 4 + k] + y.data[r * 4 + k]);
    const m = s.reduce((a, c) => a + c, 0) / 4;
    const v = s.reduce((a, c) => a + (c - m) ** 2, 0) / 4; // biased variance
    for (let k = 0; k < 4; k++) {
      const want = ((s[k] - m) / Math.sqrt(v + 1e-5)) * gamma.data[k] + beta.data[k];
      assert.ok(Math.abs(out.data[r * 4 + k] - want) <= DIRECT, `row ${r} feature ${k}`);
    }
  }
});

test("shapes, and post-norm: with gamma = 1, beta = 0 every output row has mean 0", () => {
  const B = 2, T = 5, d = 8, H = 2;
  const { params, x } = setup(3, B, T, d, 16);
  const { out, cache } = encoderBlockForward(x, intTensor([B], [5, 2]), params, H);
  assert.deepEqual(out.shape, [B, T, d]);
  assert.deepEqual(cache.weights.shape, [B, H, T, T]);
  for (let r = 0; r < B * T; r++) {
    let m = 0;
    for (let k = 0; k < d; k++) m += out.data[r * d + k];
    assert.ok(Math.abs(m / d) <= ROW_MEAN, `row ${r} has mean ${m / d}: the last step is not a layer norm`);
  }
});

test("padded keys get weight 0 and changing them leaves the valid rows bit for bit unchanged", () => {
  const B = 2, T = 5, d = 8, H = 2, lens = intTensor([B], [5, 2]);
  const { params, x } = setup(4, B, T, d, 16);
  const before = encoderBlockForward(x, lens, params, H);
  for (let h = 0; h < H; h++)
    for (let q = 0; q < T; q++)
      for (let k = 2; k < T; k++) assert.equal(before.cache.weights.data[((1 * H + h) * T + q) * T + k], 0);
  const x2: Tensor = { shape: x.shape, data: x.data.slice() };
  for (let t = 2; t < T; t++) for (let k = 0; k < d; k++) x2.data[(1 * T + t) * d + k] += 3;
  const after = encoderBlockForward(x2, lens, params, H);
  const row = (o: Tensor, b: number, t: number) => Array.from(o.data.subarray((b * T + t) * d, (b * T + t + 1) * d));
  for (let t = 0; t < 2; t++) assert.deepEqual(row(after.out, 1, t), row(before.out, 1, t));
  assert.notDeepEqual(row(after.out, 1, 3), row(before.out, 1, 3));
  for (let t = 0; t < T; t++) assert.deepEqual(row(after.out, 0, t), row(before.out, 0, t));
});

test("dropout draws the weights' mask then AddNorm1's then AddNorm2's; p = 0 draws nothing", () => {
  const B = 2, T = 3, d = 4, H = 2;
  const { rng, params, x } = setup(5, B, T, d, 8);
  const start = rng.counter;
  encoderBlockForward(x, null, params, H, 0, rng);
  assert.equal(rng.counter, start);
  const dropped = encoderBlockForward(x, null, params, H, 0.5, rng);
  assert.equal(rng.counter - start, B * H * T * T + 2 * B * T * d);
  assert.deepEqual(dropped.cache.norm1.dropout.mask?.shape, [B, T, d]);
  assert.ok(dropped.cache.norm2.dropout.mask?.data.some((m) => m === 0));
});

test("addNormBackward: dx is the layer norm's input gradient, dy the same through the dropout mask", () => {
  const rng = new Generator(6);
  const x = rng.normal([3, 4]), y = rng.normal([3, 4]), gamma = rng.normal([4]), beta = rng.normal([4]);
  const { cache } = addNormForward(x, y, gamma, beta, 0.5, rng);
  const dout = rng.normal([3, 4]);
  const { dx, dy, dgamma, dbeta } = addNormBackward(dout, cache);
  assert.deepEqual(dgamma.shape, [4]);
  assert.deepEqual(dbeta.shape, [4]);
  const mask = cache.dropout.mask as Tensor;
  for (let i = 0; i < 12; i++) {
    assert.equal(dy.data[i], dx.data[i] * (mask.data[i] / 0.5), `element ${i}`); // the forward's expression
  }
  assert.ok(mask.data.some((m) => m === 0) && dx.data.every((v) => v !== 0));
});

test("encoderBlockBackward matches central differences of sum(out * dout), padded keys and dropout on", () => {
  const B = 2, T = 4, d = 8, H = 2, lens = intTensor([B], [4, 2]);
  const { params, x } = setup(7, B, T, d, 12);
  const gen = new Generator(8);
  for (const name of Object.keys(params)) { // perturb every parameter: gamma, beta leave 1 and 0
    const z = gen.normal(params[name].shape);
    for (let i = 0; i < z.data.length; i++) params[name].data[i] += 0.1 * z.data[i];
  }
  const dout = gen.normal([B, T, d]);
  const loss = () => dot(encoderBlockForward(x, lens, params, H, 0.2, new Generator(99)).out, dout);
  const { cache } = encoderBlockForward(x, lens, params, H, 0.2, new Generator(99));
  const { dx, grads } = encoderBlockBackward(dout, cache);
  assert.deepEqual(Object.keys(grads), Object.keys(params));
  const pick = new Generator(9);
  let checked = 0;
  for (const [name, t, g] of [["x", x, dx] as const, ...Object.keys(params).map((n) => [n, params[n], grads[n]] as const)]) {
    assert.deepEqual(g.shape, t.shape, name);
    for (const i of pickCoordinates(pick, g, 2, FD_MIN_GRAD)) {
      const numeric = centralDifference(loss, t.data, i, FD_STEP);
      const rel = Math.abs(numeric - g.data[i]) / Math.max(Math.abs(numeric), Math.abs(g.data[i]));
      assert.ok(rel <= FD_REL, `${name}[${i}]: analytic ${g.data[i]}, numeric ${numeric}, relative error ${rel}`);
      checked++;
    }
  }
  assert.ok(checked >= 2 * 12, `only ${checked} coordinates were checked`);
});
