// The encoder-decoder: parameter names in draw order, embedding scaled by sqrt(d) before the
// sinusoids are added (against a direct formula), output shapes, and the masks' promises: the
// decoder is causal and padded source tokens change nothing, bit for bit.
import { test } from "node:test";
import assert from "node:assert/strict";
import { Generator } from "../../src/core/rng.ts";
import { intTensor, type IntTensor } from "../../src/core/ops.ts";
import {
  embedPositions, initTransformerParams, transformerEncode, transformerForward, transformerLoss, transformerLossBackward,
  type TransformerConfig,
} from "../../src/models/transformer.ts";
import { centralDifference, pickCoordinates, tolerance } from "../toolkit.ts";

const DIRECT = tolerance("transformer", "direct").value;

const SMALL: TransformerConfig = {
  vocab_src: 12, vocab_tgt: 10, d: 8, ffn_hidden: 16, heads: 4, enc_blocks: 2, dec_blocks: 2, dropout: 0,
};

function setup(seed: number, config: TransformerConfig, B: number, S: number, T: number) {
  const rng = new Generator(seed);
  const params = initTransformerParams(rng, config);
  const src = rng.integers([B, S], 0, config.vocab_src), tgt = rng.integers([B, T], 0, config.vocab_tgt);
  return { params, src, tgt };
}

function copy(t: IntTensor): IntTensor {
  return { shape: [...t.shape], data: t.data.slice() };
}

test("parameters in the documented order: encoder, decoder, output layer", () => {
  const { params } = setup(20, { ...SMALL, enc_blocks: 1, dec_blocks: 1 }, 1, 1, 1);
  const names = Object.keys(params);
  assert.equal(names[0], "enc.embed");
  assert.deepEqual(params["enc.embed"].shape, [12, 8]);
  assert.equal(names[1], "enc.blk0.attn.W_q");
  assert.equal(names.indexOf("dec.embed"), 1 + 12); // 12 encoder-block entries
  assert.equal(names[names.length - 2], "dec.out.W");
  assert.deepEqual(params["dec.out.W"].shape, [10, 8]);
  assert.deepEqual(params["dec.out.b"].shape, [10]);
  assert.equal(names.length, 1 + 12 + 1 + 18 + 2);
});

test("embedPositions is E[token] * sqrt(d) + sinusoids, the scale applied before the positions", () => {
  const rng = new Generator(21);
  const d = 6, E = rng.normal([5, d]);
  const tokens = intTensor([1, 3], [4, 0, 4]);
  const { out } = embedPositions(tokens, E, 0, null);
  for (let t = 0; t < 3; t++) {
    for (let k = 0; k < d; k++) {
      const angle = t / 10000 ** ((2 * Math.floor(k / 2)) / d);
      const pe = k % 2 === 0 ? Math.sin(angle) : Math.cos(angle);
      const want = E.data[tokens.data[t] * d + k] * Math.sqrt(d) + pe;
      assert.ok(Math.abs(out.data[t * d + k] - want) <= DIRECT, `step ${t} feature ${k}`);
    }
  }
});

test("logits (B, T, V_tgt) and every block's attention weights", () => {
  const B = 2, S = 6, T = 7;
  const { params, src, tgt } = setup(22, SMALL, B, S, T);
  const { out, cache } = transformerForward(src, intTensor([B], [3, 6]), tgt, params, SMALL);
  assert.deepEqual(out.shape, [B, T, 10]);
  assert.equal(cache.encWeights.length, 2);
  assert.equal(cache.decSelfWeights.length, 2);
  assert.deepEqual(cache.encWeights[1].shape, [B, 4, S, S]);
  assert.deepEqual(cache.decSelfWeights[0].shape, [B, 4, T, T]);
  assert.deepEqual(cache.decCrossWeights[1].shape, [B, 4, T, S]);
  assert.ok(out.data.every(Number.isFinite));
});

test("causal decoder: changing target token 4 leaves the logits of steps 0..3 unchanged", () => {
  const B = 2, S = 6, T = 7, V = SMALL.vocab_tgt;
  const { params, src, tgt } = setup(23, SMALL, B, S, T);
  const lens = intTensor([B], [6, 3]);
  const before = transformerForward(src, lens, tgt, params, SMALL).out;
  const tgt2 = copy(tgt);
  for (let b = 0; b < B; b++) tgt2.data[b * T + 4] = (tgt2.data[b * T + 4] + 1) % V;
  const after = transformerForward(src, lens, tgt2, params, SMALL).out;
  for (let b = 0; b < B; b++) {
    const head = (o: typeof before) => Array.from(o.data.subarray(b * T * V, (b * T + 4) * V));
    assert.deepEqual(head(after), head(before));
    const at4 = (o: typeof before) => Array.from(o.data.subarray((b * T + 4) * V, (b * T + 5) * V));
    assert.notDeepEqual(at4(after), at4(before));
  }
});

test("padded source tokens change neither the valid encoder rows nor any logit", () => {
  const B = 2, S = 6, T = 4, d = SMALL.d;
  const { params, src, tgt } = setup(24, SMALL, B, S, T);
  const lens = intTensor([B], [6, 2]);
  const src2 = copy(src);
  for (let s = 2; s < S; s++) src2.data[S + s] = (src2.data[S + s] + 5) % SMALL.vocab_src;
  const enc = transformerEncode(src, lens, params, SMALL).out, enc2 = transformerEncode(src2, lens, params, SMALL).out;
  assert.deepEqual(Array.from(enc2.data.subarray(S * d, (S + 2) * d)), Array.from(enc.data.subarray(S * d, (S + 2) * d)));
  assert.notDeepEqual(Array.from(enc2.data.subarray((S + 2) * d)), Array.from(enc.data.subarray((S + 2) * d)));
  const before = transformerForward(src, lens, tgt, params, SMALL).out;
  const after = transformerForward(src2, lens, tgt, params, SMALL).out;
  assert.deepEqual(Array.from(after.data), Array.from(before.data));
});

test("dropout draws masks in forward order and changes the logits; p = 0 draws none", () => {
  const B = 1, S = 3, T = 2, config = { ...SMALL, enc_blocks: 1, dec_blocks: 1 };
  const { params, src, tgt } = setup(25, config, B, S, T);
  const rng = new Generator(99);
  const plain = transformerForward(src, null, tgt, params, config, rng).out;
  assert.equal(rng.counter, 0);
  const dropped = transformerForward(src, null, tgt, params, { ...config, dropout: 0.2 }, rng).out;
  const d = config.d, H = config.heads;
  const enc = B * S * d + (B * H * S * S + 2 * B * S * d);
  const dec = B * T * d + (B * H * T * T + B * T * d + B * H * T * S + 2 * B * T * d);
  assert.equal(rng.counter, enc + dec);
  assert.notDeepEqual(Array.from(dropped.data), Array.from(plain.data));
});

// Fourth-order central differences of the loss at the declared step, at coordinates with
// |gradient| >= min_grad (the same check as tests/test_backward_transformer.py's).
const FD = tolerance("transformer", "fd"), FD_STEP = FD.step!, FD_REL = FD.value, FD_MIN_GRAD = FD.minGrad!;

for (const dropout of [0, 0.1]) {
  test(`transformerLossBackward matches central differences of transformerLoss (dropout ${dropout}, padding)`, () => {
    const config: TransformerConfig = { ...SMALL, d: 8, heads: 2, enc_blocks: 1, dec_blocks: 1, dropout };
    const B = 2, S = 5, T = 4;
    const rng = new Generator(24);
    const params = initTransformerParams(rng, config);
    const src = rng.integers([B, S], 0, config.vocab_src);
    const tgtIn = rng.integers([B, T], 0, config.vocab_tgt), tgtOut = rng.integers([B, T], 0, config.vocab_tgt);
    const srcLens = intTensor([B], [5, 3]), tgtLens = intTensor([B], [4, 2]);
    const lossAt = () => transformerLoss(params, config, src, srcLens, tgtIn, tgtOut, tgtLens, new Generator(55)).loss;
    const grads = transformerLossBackward(transformerLoss(params, config, src, srcLens, tgtIn, tgtOut, tgtLens, new Generator(55)).cache);
    assert.deepEqual(Object.keys(grads), Object.keys(params));
    const pick = new Generator(25);
    let checked = 0;
    for (const name of Object.keys(params)) {
      const p = params[name], g = grads[name];
      assert.deepEqual(g.shape, p.shape, name);
      const [i] = pickCoordinates(pick, g, 1, FD_MIN_GRAD);
      if (i === undefined) continue;
      const numeric = centralDifference(lossAt, p.data, i, FD_STEP);
      const rel = Math.abs(numeric - g.data[i]) / Math.max(Math.abs(numeric), Math.abs(g.data[i]));
      assert.ok(rel <= FD_REL, `${name}[${i}]: analytic ${g.data[i]}, numeric ${numeric}, relative error ${rel}`);
      checked++;
    }
    assert.ok(checked >= Object.keys(params).length - 2, `only ${checked} tensors had a usable coordinate`);
  });
}

test("padded target positions change neither the loss nor any gradient", () => {
  const config: TransformerConfig = { ...SMALL, enc_blocks: 1, dec_blocks: 1 };
  const B = 2, S = 4, T = 5;
  const { params, src, tgt } = setup(26, config, B, S, T);
  const tgtLens = intTensor([B], [5, 2]);
  const tgtOut = copy(tgt);
  const a = transformerLoss(params, config, src, null, tgt, tgtOut, tgtLens);
  for (let t = 2; t < T; t++) tgtOut.data[T + t] = (tgtOut.data[T + t] + 1) % config.vocab_tgt;
  const b = transformerLoss(params, config, src, null, tgt, tgtOut, tgtLens);
  assert.equal(b.loss, a.loss);
  const ga = transformerLossBackward(a.cache), gb = transformerLossBackward(b.cache);
  for (const name of Object.keys(ga)) assert.deepEqual(Array.from(gb[name].data), Array.from(ga[name].data), name);
  tgtOut.data[1] = (tgtOut.data[1] + 1) % config.vocab_tgt; // a counted position: now the loss moves
  assert.notEqual(transformerLoss(params, config, src, null, tgt, tgtOut, tgtLens).loss, a.loss);
});
