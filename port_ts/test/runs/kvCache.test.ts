// KV-cache generation: the cached logits of every step are the full recomputation's, bit for bit,
// and a left-padded row generates exactly what it generates alone; leftPad's layout.
import { test } from "node:test";
import assert from "node:assert/strict";
import { Generator } from "../../src/core/rng.ts";
import { type DecoderLmConfig, initDecoderLmParams } from "../../src/models/decoderLm.ts";
import { generateCached, generateFull, leftPad } from "../../src/runs/kvCache.ts";

const MODEL: DecoderLmConfig = { vocab: 7, max_len: 16, d: 8, heads: 2, ffn_hidden: 16, blocks: 2 };
const PROMPTS = [[1, 2, 3, 4, 5], [3], [2, 2, 6], [0, 4, 4, 1]];

function model(seed: number) {
  const rng = new Generator(seed);
  const params = initDecoderLmParams(rng, MODEL);
  for (const name of Object.keys(params)) if (name.endsWith("b_in") || name.endsWith("b_o")) params[name] = rng.normal(params[name].shape, 0, 0.3);
  return params;
}

test("leftPad: pads first, the prompt last, P the longest prompt", () => {
  const { prompts, pads } = leftPad([[1, 2], [3]], 9);
  assert.deepEqual(prompts.shape, [2, 2]);
  assert.deepEqual(Array.from(prompts.data), [1, 2, 9, 3]);
  assert.deepEqual(Array.from(pads), [0, 1]);
  assert.throws(() => leftPad([[1], []], 0), /at least one token/);
});

test("cached generation is full recomputation, bit for bit, at every step", () => {
  const params = model(42);
  const { prompts, pads } = leftPad(PROMPTS, 6);
  const cached = generateCached(params, MODEL, prompts, pads, 7, 6);
  const full = generateFull(params, MODEL, prompts, pads, 7, 6);
  assert.deepEqual(Array.from(cached.logits.data), Array.from(full.logits.data));
  assert.deepEqual(Array.from(cached.tokens.data), Array.from(full.tokens.data));
  assert.deepEqual(Array.from(cached.margins.data), Array.from(full.margins.data));
});

test("a left-padded row generates what it generates alone, bit for bit", () => {
  const params = model(42);
  const { prompts, pads } = leftPad(PROMPTS, 6);
  const batch = generateCached(params, MODEL, prompts, pads, 7, 6);
  const G = 7, V = MODEL.vocab;
  PROMPTS.forEach((p, n) => {
    const alone = generateCached(params, MODEL, { shape: [1, p.length], data: Int32Array.from(p) }, new Int32Array(1), G, 6);
    assert.deepEqual(Array.from(alone.logits.data), Array.from(batch.logits.data.subarray(n * G * V, (n + 1) * G * V)), `prompt ${n}`);
  });
});
