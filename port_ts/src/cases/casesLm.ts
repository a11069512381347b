// Cases of the lesson's block and the decoder-only model: forward cases of the biased attention,
// the block, the model and KV-cache generation; gradient checks of the block and the model
// (twin: cases_lm.py; docs/lesson_block.md, docs/decoder_lm.md, docs/kv_cache.md).
//
// The forward ops compute from the inputs the request hands them (COMPUTE: the reference draws
// the parameters and the data). The gradient checks draw here too (BUILDERS): they draw the
// parameters first (the init function: PyTorch's defaults), then move
// what init leaves at a constant away from it, for each parameter name in order: a layer norm's
// gamma becomes 1 + 0.1 z, its beta 0.1 z, an attention bias (b_in, b_o) 0.1 z, z ~ N(0, 1) of
// the tensor's shape; then the data. Gradient checks then make gradcheck's own draws
// (runs/gradcheck.ts) and write the same outputs as casesGradcheck.ts.

import type { Builder, Compute } from "./casesAttention.ts";
import type { Named } from "../core/golden.ts";
import type { IntTensor, Tensor } from "../core/ops.ts";
import type { Params } from "../core/params.ts";
import type { Generator } from "../core/rng.ts";
import { type Config, get, intArray, need, optional, positiveInt } from "../core/caseConfig.ts";
import { type DecoderLmConfig, decoderLmForward, decoderLmLoss, decoderLmLossBackward, initDecoderLmParams } from "../models/decoderLm.ts";
import { causalKeep, lessonAttentionForward } from "../nn/lessonAttention.ts";
import { initLessonBlockParams, lessonBlockBackward, lessonBlockForward, lessonBlockParamCount } from "../nn/lessonBlock.ts";
import { sequenceWeights } from "../nn/loss.ts";
import type { LossFn } from "../runs/gradcheck.ts";
import { reluPattern, runCheck, scalar } from "./casesGradcheck.ts";
import { type Generated, generateCached, generateFull } from "../runs/kvCache.ts";

/** Norms and attention biases away from init, in parameter order (the module doc). */
function jitter(rng: Generator, params: Params): Params {
  for (const name of Object.keys(params)) {
    const gamma = name.endsWith(".gamma");
    if (gamma || name.endsWith(".beta") || name.endsWith("b_in") || name.endsWith("b_o")) {
      const z = rng.normal(params[name].shape).data;
      for (let i = 0; i < z.length; i++) z[i] = gamma ? 1 + 0.1 * z[i] : 0.1 * z[i];
      params[name] = { shape: [...params[name].shape], data: z };
    }
  }
  return params;
}

function model(config: Config): DecoderLmConfig {
  const [vocab, maxLen, d, heads, ffnHidden, blocks] = ["vocab", "max_len", "d", "heads", "ffn_hidden", "blocks"].map((n) => positiveInt(config, n));
  return { vocab, max_len: maxLen, d, heads, ffn_hidden: ffnHidden, blocks };
}

/** The handed inputs but the data: the model's parameters, by name. */
function paramsOf(inputs: Named, ...data: string[]): Params {
  return Object.fromEntries(Object.entries(inputs).filter(([name]) => !data.includes(name))) as Params;
}

function keepOf(config: Config, T: number) {
  return get(config, "causal", false) ? causalKeep(T) : null;
}

// config: heads, causal (default false)
function lessonAttention(inputs: Named, config: Config): Named {
  const { x } = need(inputs, "x");
  const { out, cache } = lessonAttentionForward(x, paramsOf(inputs, "x"), positiveInt(config, "heads"), keepOf(config, x.shape[1]));
  return { out, weights: cache.weights };
}

// config: d, heads, ffn_hidden, causal (default false)
function lessonBlock(inputs: Named, config: Config): Named {
  const { x } = need(inputs, "x");
  const d = positiveInt(config, "d"), F = positiveInt(config, "ffn_hidden");
  const { out, cache } = lessonBlockForward(x, paramsOf(inputs, "x"), positiveInt(config, "heads"), keepOf(config, x.shape[1]));
  const count: IntTensor = { shape: [], data: Int32Array.of(lessonBlockParamCount(d, F)) };
  return { out, weights: cache.weights, param_count: count };
}

// config: the model's (vocab, max_len, d, heads, ffn_hidden, blocks); inputs tokens (B, T), pads (B,) or none
function decoderLm(inputs: Named, config: Config): Named {
  const { tokens } = need(inputs, "tokens");
  const pads = optional(inputs, "pads");
  const { out: logits, cache } = decoderLmForward(tokens as unknown as IntTensor, paramsOf(inputs, "tokens", "pads"), model(config),
    pads === null ? null : pads.data);
  const outputs: Named = { logits };
  cache.weights.forEach((w, i) => { outputs[`blk${i}.weights`] = w; });
  return outputs;
}

function stack(parts: (Tensor | IntTensor)[]): Tensor | IntTensor {
  const size = parts[0].data.length;
  const data = parts[0].data instanceof Int32Array ? new Int32Array(parts.length * size) : new Float64Array(parts.length * size);
  parts.forEach((p, n) => data.set(p.data, n * size));
  return { shape: [parts.length, ...parts[0].shape.slice(1)], data } as Tensor | IntTensor;
}

// config: the model's, steps (G), eos; inputs the prompts left-padded with eos (N, P), pads (N,)
function kvGenerate(inputs: Named, config: Config): Named {
  const m = model(config);
  const steps = positiveInt(config, "steps"), eos = get<number>(config, "eos");
  const { prompts: given, pads: padsGiven } = need(inputs, "prompts", "pads");
  const padded = given as unknown as IntTensor, pads = (padsGiven as unknown as IntTensor).data;
  const params = paramsOf(inputs, "prompts", "pads");
  const P = padded.shape[1];
  const prompts = Array.from(pads, (pad, n) => [...padded.data.subarray(n * P + pad, (n + 1) * P)]);
  const cached = generateCached(params, m, padded, pads, steps, eos);
  const full = generateFull(params, m, padded, pads, steps, eos);
  const alone: Generated[] = prompts.map((p) => generateFull(params, m, { shape: [1, p.length], data: Int32Array.from(p) }, new Int32Array(1), steps, eos));
  const outputs: Named = {};
  for (const [name, gen] of [["cached", cached], ["recomputed", full]] as [string, Generated][]) {
    outputs[`${name}.tokens`] = gen.tokens;
    outputs[`${name}.margin`] = gen.margins;
    outputs[`${name}.logits`] = gen.logits;
  }
  outputs["alone.tokens"] = stack(alone.map((a) => a.tokens)); // (N, G)
  outputs["alone.logits"] = stack(alone.map((a) => a.logits)); // (N, G, V)
  return outputs;
}

// config: B, T, d, heads, ffn_hidden, causal (default false), gradcheck's
// draws: initLessonBlockParams; norms and biases jittered; x ~ N(0, 1) (B, T, d);
//   R ~ N(0, 1) (B, T, d); gradcheck's draws. loss = sum of out * R (in order): dout = R
function gradcheckLessonBlockCase(config: Config, rng: Generator) {
  const [B, T, d, heads, F] = ["B", "T", "d", "heads", "ffn_hidden"].map((n) => positiveInt(config, n));
  const params = jitter(rng, initLessonBlockParams(rng, d, F));
  const x = rng.normal([B, T, d]);
  const R = rng.normal([B, T, d]);
  const keep = get(config, "causal", false) ? causalKeep(T) : null;
  const lossOf = (p: Params) => {
    const { out, cache } = lessonBlockForward(x, p, heads, keep);
    let loss = 0;
    for (let i = 0; i < out.data.length; i++) loss += out.data[i] * R.data[i];
    return { loss, cache };
  };
  const lossFn: LossFn = (p) => {
    const { loss, cache } = lossOf(p);
    return { loss, kinks: reluPattern([cache]) };
  };
  const { loss, cache } = lossOf(params);
  const { grads } = lessonBlockBackward(R, cache);
  return { inputs: { x, R }, outputs: { loss: scalar(loss), ...runCheck(config, rng, params, lossFn, grads) } };
}

// config: the model's, B, T, target_lens (B,) (default: every position counts), gradcheck's
// draws: initDecoderLmParams; norms and biases jittered; tokens U{0..vocab-1} (B, T);
//   targets U{0..vocab-1} (B, T); gradcheck's draws
function gradcheckDecoderLmCase(config: Config, rng: Generator) {
  const m = model(config);
  const B = positiveInt(config, "B"), T = positiveInt(config, "T");
  const params = jitter(rng, initDecoderLmParams(rng, m));
  const tokens = rng.integers([B, T], 0, m.vocab);
  const targets = rng.integers([B, T], 0, m.vocab);
  const lensValue = get<unknown>(config, "target_lens", null);
  const weights = lensValue === null ? null : sequenceWeights(intArray(lensValue, "target_lens"), T);
  const lossFn: LossFn = (p) => {
    const { loss, cache } = decoderLmLoss(p, m, tokens, targets, weights);
    return { loss, kinks: reluPattern(cache.model.blocks) };
  };
  const { loss, cache } = decoderLmLoss(params, m, tokens, targets, weights);
  const grads = decoderLmLossBackward(cache);
  const inputs: Named = { tokens, targets };
  if (weights !== null) inputs.weights = weights;
  return { inputs, outputs: { loss: scalar(loss), ...runCheck(config, rng, params, lossFn, grads) } };
}

export const COMPUTE: Record<string, Compute> = {
  lesson_attention: lessonAttention,
  lesson_block: lessonBlock,
  decoder_lm: decoderLm,
  kv_generate: kvGenerate,
};

export const BUILDERS: Record<string, Builder> = {
  gradcheck_lesson_block: gradcheckLessonBlockCase,
  gradcheck_decoder_lm: gradcheckDecoderLmCase,
};
