// The post-norm encoder block: parameter names and shapes, AddNorm against a direct formula,
// post-norm rows (LN last), masked keys ignored exactly, and the generator draws in forward order.
import { test } from "node:test";
import assert from "node:assert/strict";
import { Generator } from "../src/rng.ts";
import { intTensor, type Tensor } from "../src/ops.ts";
import { addNormForward, encoderBlockForward, initEncoderBlockParams, subParams } from "../src/encoderBlock.ts";

const DIRECT = 1e-14; // against a direct formula summed in another order, values of size ~1
const ROW_MEAN = 1e-15; // the mean of a layer-normed row of 8 values near 1 in size

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

test("subParams keeps one prefix and strips it", () => {
  const t = (v: number): Tensor => ({ shape: [1], data: Float64Array.of(v) });
  const got = subParams({ "a.x": t(1), "a.y.z": t(2), "ab.x": t(3), "b.a.x": t(4) }, "a.");
  assert.deepEqual(Object.keys(got), ["x", "y.z"]);
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
