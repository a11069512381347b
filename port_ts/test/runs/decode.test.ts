// Greedy decoding: topTwo on hand-made rows (first index on ties, margin 0), step t sees exactly
// positions 0..t (the teacher-forced forward on the decoded prefix gives the same argmax and the
// same margin, bit for bit), a batch decodes as its rows one by one, decodes end at <eos> or the
// length limit and are padded with -1 / 0 after the end.
import { test } from "node:test";
import assert from "node:assert/strict";
import { Generator } from "../../src/core/rng.ts";
import type { IntTensor } from "../../src/core/ops.ts";
import { greedyDecode, topTwo } from "../../src/runs/decode.ts";
import { BOS, EOS, VOCAB, digitsData } from "../../src/runs/digits.ts";
import { initTransformerParams, transformerForward, type TransformerConfig } from "../../src/models/transformer.ts";

const MODEL: TransformerConfig = {
  vocab_src: VOCAB, vocab_tgt: VOCAB, d: 16, ffn_hidden: 32, heads: 2, enc_blocks: 1, dec_blocks: 1, dropout: 0,
};

function problem(seed: number, n: number) {
  const rng = new Generator(seed);
  const params = initTransformerParams(rng, MODEL);
  params["dec.out.b"].data[EOS] = -10; // random parameters favour <eos> at once; keep decoding
  return { params, test: digitsData(rng, 1, n, 1, 6).test };
}

function row(x: IntTensor, n: number): IntTensor {
  const W = x.shape.length > 1 ? x.shape[1] : 1;
  return { shape: [1, ...x.shape.slice(1)], data: x.data.slice(n * W, n * W + W) };
}

test("topTwo: first maximal index, margin to the best other logit, 0 on a tie", () => {
  const { best, margin } = topTwo({ shape: [3, 4], data: Float64Array.from([1, 5, 2, 4.5, -1, -3, -1, -2, 0, 0, 0, 7]) });
  assert.deepEqual(Array.from(best.data), [1, 0, 3]);
  assert.deepEqual(Array.from(margin.data), [0.5, 0, 7]);
  assert.throws(() => topTwo({ shape: [2, 1], data: Float64Array.from([1, 2]) }), /V >= 2/);
});

test("step t sees positions 0..t: the teacher-forced forward on the prefix agrees bit for bit", () => {
  const { params, test: t } = problem(11, 8);
  const dec = greedyDecode(params, MODEL, t.src, t.srcLens, 7, BOS, EOS);
  for (let n = 0; n < 8; n++) {
    const L = dec.lengths.data[n];
    const tgtIn: IntTensor = { shape: [1, L], data: Int32Array.from([BOS, ...dec.tokens.data.subarray(n * 7, n * 7 + L - 1)]) };
    const { out: logits } = transformerForward(row(t.src, n), row(t.srcLens, n), tgtIn, params, MODEL);
    for (let s = 0; s < L; s++) {
      const { best, margin } = topTwo({ shape: [1, VOCAB], data: logits.data.slice(s * VOCAB, (s + 1) * VOCAB) });
      assert.equal(best.data[0], dec.tokens.data[n * 7 + s], `row ${n} step ${s}`);
      assert.equal(margin.data[0], dec.margins.data[n * 7 + s], `row ${n} step ${s}`);
    }
    assert.ok(L === 7 || dec.tokens.data[n * 7 + L - 1] === EOS, "ends at <eos> or at the limit");
    for (let s = L; s < 7; s++) {
      assert.equal(dec.tokens.data[n * 7 + s], -1);
      assert.equal(dec.margins.data[n * 7 + s], 0);
    }
  }
});

test("a batch decodes as its rows one by one", () => {
  const { params, test: t } = problem(12, 10);
  const batch = greedyDecode(params, MODEL, t.src, t.srcLens, 7, BOS, EOS);
  for (let n = 0; n < 10; n++) {
    const one = greedyDecode(params, MODEL, row(t.src, n), row(t.srcLens, n), 7, BOS, EOS);
    assert.deepEqual(Array.from(one.tokens.data), Array.from(batch.tokens.data.subarray(n * 7, n * 7 + 7)));
    assert.deepEqual(Array.from(one.margins.data), Array.from(batch.margins.data.subarray(n * 7, n * 7 + 7)));
  }
});

test("an <eos> at step 0 ends the decode after one token; the length limit ends the others", () => {
  const { params, test: t } = problem(13, 4);
  params["dec.out.b"].data[EOS] = 100;
  const early = greedyDecode(params, MODEL, t.src, t.srcLens, 7, BOS, EOS);
  assert.deepEqual(Array.from(early.lengths.data), [1, 1, 1, 1]);
  assert.deepEqual(early.crossWeights[0].shape, [4, 2, 1, 7]); // one decoder pass, prefix of 1
  params["dec.out.b"].data[EOS] = -100;
  const late = greedyDecode(params, MODEL, t.src, t.srcLens, 5, BOS, EOS);
  assert.deepEqual(Array.from(late.lengths.data), [5, 5, 5, 5]);
  assert.ok(!late.tokens.data.includes(EOS));
});
