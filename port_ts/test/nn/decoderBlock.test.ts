// The decoder block: causal self-attention (a later step never reaches an earlier one, bit for
// bit), cross-attention masked by the encoder's lengths, shapes, names and the dropout draws.
import { test } from "node:test";
import assert from "node:assert/strict";
import { Generator } from "../../src/core/rng.ts";
import { intTensor, type Tensor } from "../../src/core/ops.ts";
import { causalValidLens, decoderBlockBackward, decoderBlockForward, initDecoderBlockParams } from "../../src/nn/decoderBlock.ts";
import { centralDifference, dot, pickCoordinates, tolerance } from "../toolkit.ts";

const ROW_SUM = tolerance("decoder_block", "row_sum").value;

// Fourth-order central differences at the declared step, at coordinates with |gradient| >= min_grad.
const FD = tolerance("decoder_block", "fd"), FD_STEP = FD.step!, FD_REL = FD.value, FD_MIN_GRAD = FD.minGrad!;

function setup(seed: number, B: number, T: number, S: number, d: number) {
  const rng = new Generator(seed);
  const params = initDecoderBlockParams(rng, d, 2 * d);
  const x = rng.normal([B, T, d]), enc = rng.normal([B, S, d]);
  return { rng, params, x, enc };
}

function row(t: Tensor, r: number, d: number): number[] {
  return Array.from(t.data.subarray(r * d, (r + 1) * d));
}

test("causalValidLens gives every batch row the lengths 1..T", () => {
  const lens = causalValidLens(2, 3);
  assert.deepEqual(lens.shape, [2, 3]);
  assert.deepEqual(Array.from(lens.data), [1, 2, 3, 1, 2, 3]);
});

test("parameter names in draw order; output and weight shapes", () => {
  const B = 1, T = 4, S = 6, d = 8, H = 2;
  const { params, x, enc } = setup(10, B, T, S, d);
  assert.deepEqual(Object.keys(params), [
    "self_attn.W_q", "self_attn.W_k", "self_attn.W_v", "self_attn.W_o", "ln1.gamma", "ln1.beta",
    "cross_attn.W_q", "cross_attn.W_k", "cross_attn.W_v", "cross_attn.W_o", "ln2.gamma", "ln2.beta",
    "ffn.W1", "ffn.b1", "ffn.W2", "ffn.b2", "ln3.gamma", "ln3.beta",
  ]);
  const { out, cache } = decoderBlockForward(x, enc, intTensor([B], [4]), params, H);
  assert.deepEqual(out.shape, [B, T, d]);
  assert.deepEqual(cache.selfWeights.shape, [B, H, T, T]);
  assert.deepEqual(cache.crossWeights.shape, [B, H, T, S]);
});

test("self-attention weights are lower-triangular, rows summing to 1", () => {
  const B = 2, T = 5, H = 2;
  const { params, x, enc } = setup(11, B, T, 5, 8);
  const w = decoderBlockForward(x, enc, null, params, H).cache.selfWeights;
  for (let r = 0; r < B * H * T; r++) {
    const q = r % T;
    let sum = 0;
    for (let k = 0; k < T; k++) {
      const v = w.data[r * T + k];
      if (k > q) assert.equal(v, 0, `query ${q} attends to later key ${k}`);
      else assert.ok(v > 0);
      sum += v;
    }
    assert.ok(Math.abs(sum - 1) <= ROW_SUM);
  }
});

test("causal: changing step 3 of the input leaves steps 0..2 bit for bit unchanged", () => {
  const B = 2, T = 5, d = 8, H = 2;
  const { params, x, enc } = setup(12, B, T, 4, d);
  const lens = intTensor([B], [4, 2]);
  const before = decoderBlockForward(x, enc, lens, params, H).out;
  const x2: Tensor = { shape: x.shape, data: x.data.slice() };
  for (let b = 0; b < B; b++) for (let k = 0; k < d; k++) x2.data[(b * T + 3) * d + k] -= 2;
  const after = decoderBlockForward(x2, enc, lens, params, H).out;
  for (let b = 0; b < B; b++) {
    for (let t = 0; t < 3; t++) assert.deepEqual(row(after, b * T + t, d), row(before, b * T + t, d));
    assert.notDeepEqual(row(after, b * T + 3, d), row(before, b * T + 3, d));
    assert.notDeepEqual(row(after, b * T + 4, d), row(before, b * T + 4, d)); // step 4 sees step 3
  }
});

test("cross-attention ignores encoder rows beyond the valid length", () => {
  const B = 2, T = 3, S = 5, d = 8, H = 2;
  const { params, x, enc } = setup(13, B, T, S, d);
  const lens = intTensor([B], [5, 2]);
  const before = decoderBlockForward(x, enc, lens, params, H);
  for (let r = 0; r < H * T; r++)
    for (let k = 2; k < S; k++) assert.equal(before.cache.crossWeights.data[(H * T + r) * S + k], 0);
  const enc2: Tensor = { shape: enc.shape, data: enc.data.slice() };
  for (let s = 2; s < S; s++) for (let k = 0; k < d; k++) enc2.data[(1 * S + s) * d + k] *= -4;
  const after = decoderBlockForward(x, enc2, lens, params, H).out;
  assert.deepEqual(Array.from(after.data), Array.from(before.out.data));
});

test("dropout draws self weights, AddNorm1, cross weights, AddNorm2, AddNorm3 masks", () => {
  const B = 2, T = 3, S = 4, d = 4, H = 2;
  const { rng, params, x, enc } = setup(14, B, T, S, d);
  const start = rng.counter;
  const { cache } = decoderBlockForward(x, enc, null, params, H, 0.3, rng);
  assert.equal(rng.counter - start, B * H * T * T + B * T * d + B * H * T * S + 2 * B * T * d);
  assert.deepEqual(cache.crossAttn.attn.mask?.shape, [B, H, T, S]);
});

test("decoderBlockBackward matches central differences of sum(out * dout): input, encoder output, parameters", () => {
  const B = 2, T = 4, S = 5, d = 8, H = 2, lens = intTensor([B], [5, 2]);
  const { params, x, enc } = setup(10, B, T, S, d);
  const gen = new Generator(11);
  for (const name of Object.keys(params)) { // perturb every parameter: gamma, beta leave 1 and 0
    const z = gen.normal(params[name].shape);
    for (let i = 0; i < z.data.length; i++) params[name].data[i] += 0.1 * z.data[i];
  }
  const dout = gen.normal([B, T, d]);
  const loss = () => dot(decoderBlockForward(x, enc, lens, params, H, 0.2, new Generator(98)).out, dout);
  const { cache } = decoderBlockForward(x, enc, lens, params, H, 0.2, new Generator(98));
  const { dx, denc, grads } = decoderBlockBackward(dout, cache);
  assert.deepEqual(Object.keys(grads), Object.keys(params));
  for (let s = 2; s < S; s++) for (let k = 0; k < d; k++) assert.equal(denc.data[(1 * S + s) * d + k], 0, "a masked key got a gradient");
  const pick = new Generator(12);
  let checked = 0;
  const all = [["x", x, dx] as const, ["enc", enc, denc] as const, ...Object.keys(params).map((n) => [n, params[n], grads[n]] as const)];
  for (const [name, t, g] of all) {
    assert.deepEqual(g.shape, t.shape, name);
    for (const i of pickCoordinates(pick, g, 2, FD_MIN_GRAD)) {
      const numeric = centralDifference(loss, t.data, i, FD_STEP);
      const rel = Math.abs(numeric - g.data[i]) / Math.max(Math.abs(numeric), Math.abs(g.data[i]));
      assert.ok(rel <= FD_REL, `${name}[${i}]: analytic ${g.data[i]}, numeric ${numeric}, relative error ${rel}`);
      checked++;
    }
  }
  assert.ok(checked >= 2 * 19, `only ${checked} coordinates were checked`);
});
