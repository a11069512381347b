// Cases of the lesson's block and the decoder-only model: forward cases of the biased attention,
// the block, the model and KV-cache generation; gradient checks of the block and the model
// (twin: cases_lm.py; docs/lesson_block.md, docs/decoder_lm.md, docs/kv_cache.md).
//
// Every op computes from what the request hands it (COMPUTE: the reference draws the parameters,
// init's with its norms and attention biases jittered, and the data). The gradient checks then
// make gradcheck's own draws from the position they were handed with (runs/gradcheck.ts) and
// write the same outputs as casesGradcheck.ts.

import type { Compute } from "../core/caseConfig.ts";
import type { Named } from "../core/golden.ts";
import type { IntTensor, Tensor } from "../core/ops.ts";
import type { Params } from "../core/params.ts";
import type { Generator } from "../core/rng.ts";
import { type Config, get, need, optional, positiveInt } from "../core/caseConfig.ts";
import { type DecoderLmConfig, decoderLmForward, decoderLmLoss, decoderLmLossBackward } from "../models/decoderLm.ts";
import { causalKeep, lessonAttentionForward } from "../nn/lessonAttention.ts";
import { lessonBlockBackward, lessonBlockForward, lessonBlockParamCount } from "../nn/lessonBlock.ts";
import type { LossFn } from "../runs/gradcheck.ts";
import { given, reluPattern } from "./casesGradcheck.ts";
import { runCheck } from "../runs/gradcheck.ts";
import { type Generated, generateCached, generateFull } from "../runs/kvCache.ts";

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

// config: heads, causal (default false), gradcheck's; inputs: x, R (B, T, d); loss = sum of out * R (in order)
function gradcheckLessonBlock(inputs: Named, config: Config, rng: Generator, params: Params | null): Named {
  const { x, R } = need(inputs, "x", "R");
  const heads = positiveInt(config, "heads"), keep = keepOf(config, x.shape[1]);
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
  const { loss, cache } = lossOf(given(params));
  return runCheck(config, rng, given(params), lossFn, lessonBlockBackward(R, cache).grads, loss);
}

// config: the model's, gradcheck's; inputs: tokens, targets (B, T), weights (B, T) or none
function gradcheckDecoderLm(inputs: Named, config: Config, rng: Generator, params: Params | null): Named {
  const m = model(config);
  const { tokens, targets } = need(inputs, "tokens", "targets") as unknown as Record<string, IntTensor>;
  const weights = optional<Tensor>(inputs, "weights");
  const lossFn: LossFn = (p) => {
    const { loss, cache } = decoderLmLoss(p, m, tokens, targets, weights);
    return { loss, kinks: reluPattern(cache.model.blocks) };
  };
  const { loss, cache } = decoderLmLoss(given(params), m, tokens, targets, weights);
  return runCheck(config, rng, given(params), lossFn, decoderLmLossBackward(cache), loss);
}

export const COMPUTE: Record<string, Compute> = {
  lesson_attention: lessonAttention,
  lesson_block: lessonBlock,
  decoder_lm: decoderLm,
  kv_generate: kvGenerate,
  gradcheck_lesson_block: gradcheckLessonBlock,
  gradcheck_decoder_lm: gradcheckDecoderLm,
};
