// Gradient-check cases (kind "gradcheck") of the three models that train: the encoder-decoder
// Transformer, the ViT and act 4's alignment scorer; and of RoPE attention's backward through the
// rotations of its queries and keys (twin: cases_gradcheck.py).
//
// Each builder draws, in this order: the model's parameters (its init function), then the layer
// norms jittered (for each parameter name in order: a gamma becomes 1 + 0.1 * N(0, 1), a beta
// 0.1 * N(0, 1); the ViT's <cls> then becomes N(0, 1)), so a backward that ignored gamma, beta or
// <cls> cannot pass by the accident of init's 1, 0 and 0; then the data; then, when the config's
// dropout > 0, one integer mask seed U{0..2^31-1}: every loss evaluation draws its dropout masks
// from a fresh Generator(mask seed), so the finite differences see the masks the backward uses;
// then gradcheck's own draws (coordinates, then directions: gradcheck.ts).
//
// Inputs: the data only (the parameters follow from the seed; the forward cases check init).
// Outputs, with <name> every parameter name:
//   loss                  () the loss at the parameters
//   grad.<name>           the full analytic gradient, compared across engines
//   check.<name>.index    int64 (n,) flat row-major indices of the checked coordinates
//   check.<name>.analytic (n,), check.<name>.numeric (n,), check.<name>.rel_err (n,)
//   direction.analytic    (R,), direction.numeric (R,), direction.rel_err (R,)
//   kink_retries          int64 () how many checks were repeated with a halved step because a
//                         ReLU pre-activation changed sign inside the stencil (Transformer only)
// Config, besides the model's: full_max (default 32), samples (default 8), directions (default 3).
// RoPE attention has no parameters: its "parameters" are q, k and v, its loss sum(out * dout) for a
// drawn dout (an input), summed in index order.

import { type Builder, even, positions, validLens } from "./casesAttention.ts";
import type { Named } from "../core/golden.ts";
import type { IntTensor, Tensor } from "../core/ops.ts";
import { Generator } from "../core/rng.ts";
import { type Config, CaseError, get, intArray, positiveInt, shape } from "../core/caseConfig.ts";
import { alignmentData, alignmentLoss, alignmentLossBackward, initAlignmentParams } from "../models/alignment.ts";
import type { Params } from "../core/params.ts";
import { type LossFn, gradcheck } from "../runs/gradcheck.ts";
import { type TransformerConfig, initTransformerParams, transformerLoss, transformerLossBackward } from "../models/transformer.ts";
import { type VitConfig, initVitParams, vitLoss, vitLossBackward } from "../models/vit.ts";
import { ropeAttentionBackward, ropeAttentionForward } from "../nn/rope.ts";

// low 0 for the source: an empty source masks every key (uniform weights 1/K)
function lens(config: Config, key: string, B: number, limit: number, low = 1): IntTensor | null {
  const value = get<unknown>(config, key, null);
  if (value === null) return null;
  const t = intArray(value, key);
  if (t.shape.length !== 1 || t.shape[0] !== B || t.data.some((n) => n < low || n > limit)) {
    throw new CaseError(`config '${key}' must list ${B} lengths in [${low}, ${limit}], got ${JSON.stringify(value)}`);
  }
  return t;
}

/** Layer norms away from init, in parameter order: gamma = 1 + 0.1 z, beta = 0.1 z. */
function jitterNorms(rng: Generator, params: Params): Params {
  for (const name of Object.keys(params)) {
    if (name.endsWith(".gamma") || name.endsWith(".beta")) {
      const z = rng.normal(params[name].shape).data;
      const gamma = name.endsWith(".gamma");
      for (let i = 0; i < z.length; i++) z[i] = gamma ? 1 + 0.1 * z[i] : 0.1 * z[i];
      params[name] = { shape: [...params[name].shape], data: z };
    }
  }
  return params;
}

/** The dropout masks' seed, drawn only when the config's dropout > 0. */
function maskSeed(config: Config, rng: Generator): number | null {
  return get(config, "dropout", 0) > 0 ? rng.integers([1], 0, 2 ** 31).data[0] : null;
}

function masks(seed: number | null): Generator | null {
  return seed === null ? null : new Generator(seed);
}

export function scalar(x: number): Tensor {
  return { shape: [], data: Float64Array.of(x) };
}

/** gradcheck's draws and checks of lossFn at params (grads its analytic gradients), as the outputs
 *  every gradient-check case writes (also casesLm.ts's). */
export function runCheck(config: Config, rng: Generator, params: Params, lossFn: LossFn, grads: Params): Named {
  const result = gradcheck(lossFn, params, grads, rng, positiveInt(config, "full_max", 32), positiveInt(config, "samples", 8), positiveInt(config, "directions", 3));
  const outputs: Named = {};
  for (const name of Object.keys(params)) outputs[`grad.${name}`] = grads[name];
  for (const [name, c] of Object.entries(result.checks)) {
    const n = c.index.length;
    outputs[`check.${name}.index`] = { shape: [n], data: c.index };
    outputs[`check.${name}.analytic`] = { shape: [n], data: c.analytic };
    outputs[`check.${name}.numeric`] = { shape: [n], data: c.numeric };
    outputs[`check.${name}.rel_err`] = { shape: [n], data: c.relErr };
  }
  const R = result.direction.analytic.length;
  outputs["direction.analytic"] = { shape: [R], data: result.direction.analytic };
  outputs["direction.numeric"] = { shape: [R], data: result.direction.numeric };
  outputs["direction.rel_err"] = { shape: [R], data: result.direction.relErr };
  outputs["kink_retries"] = { shape: [], data: Int32Array.of(result.kinkRetries) };
  return outputs;
}

/** Where every FFN pre-activation of the blocks (their caches, in order) is > 0, block by block
 * (read off the ReLU's output h: h > 0 exactly where the pre-activation is). */
export function reluPattern(blocks: { ffn: { h: Tensor } }[]): Uint8Array {
  let total = 0;
  for (const b of blocks) total += b.ffn.h.data.length;
  const out = new Uint8Array(total);
  let at = 0;
  for (const b of blocks) for (const h of b.ffn.h.data) out[at++] = h > 0 ? 1 : 0;
  return out;
}

// config: vocab_src, vocab_tgt, d, ffn_hidden, heads, enc_blocks, dec_blocks, dropout (default 0),
//   B, T_src, T_tgt, src_valid_lens null | (B,), tgt_valid_lens null | (B,), gradcheck's
// draws: initTransformerParams; norms jittered; src U{0..vocab_src-1} (B, T_src);
//   tgt_out U{0..vocab_tgt-1} (B, T_tgt), tgt_in = tgt_out shifted right behind id 0 (<bos>);
//   the mask seed (dropout > 0); gradcheck's draws
function gradcheckTransformerCase(config: Config, rng: Generator): { inputs: Named; outputs: Named } {
  const [vocabSrc, vocabTgt, d, F, heads, encBlocks, decBlocks] =
    ["vocab_src", "vocab_tgt", "d", "ffn_hidden", "heads", "enc_blocks", "dec_blocks"].map((n) => positiveInt(config, n));
  const model: TransformerConfig = {
    vocab_src: vocabSrc, vocab_tgt: vocabTgt, d, ffn_hidden: F, heads,
    enc_blocks: encBlocks, dec_blocks: decBlocks, dropout: get(config, "dropout", 0),
  };
  const [B, S, T] = ["B", "T_src", "T_tgt"].map((n) => positiveInt(config, n));
  const params = jitterNorms(rng, initTransformerParams(rng, model));
  const src = rng.integers([B, S], 0, vocabSrc);
  const tgtOut = rng.integers([B, T], 0, vocabTgt);
  const tgtIn: IntTensor = { shape: [B, T], data: new Int32Array(B * T) }; // (B, T)  <bos> = 0, then tgt_out[:, :-1]
  for (let b = 0; b < B; b++) for (let t = 1; t < T; t++) tgtIn.data[b * T + t] = tgtOut.data[b * T + t - 1];
  const srcLens = lens(config, "src_valid_lens", B, S, 0), tgtLens = lens(config, "tgt_valid_lens", B, T);
  const seed = maskSeed(config, rng);
  const lossFn: LossFn = (p) => {
    const { loss, cache } = transformerLoss(p, model, src, srcLens, tgtIn, tgtOut, tgtLens, masks(seed));
    return { loss, kinks: reluPattern([...cache.model.enc.blocks, ...cache.model.dec.blocks]) };
  };
  const { loss, cache } = transformerLoss(params, model, src, srcLens, tgtIn, tgtOut, tgtLens, masks(seed));
  const grads = transformerLossBackward(cache);
  const inputs: Named = { src, tgt_in: tgtIn, tgt_out: tgtOut };
  if (srcLens !== null) inputs.src_valid_lens = srcLens;
  if (tgtLens !== null) inputs.tgt_valid_lens = tgtLens;
  return { inputs, outputs: { loss: scalar(loss), ...runCheck(config, rng, params, lossFn, grads) } };
}

// config: image, channels, patch, d, heads, mlp_hidden, blocks, classes, dropout (default 0), B,
//   gradcheck's
// draws: initVitParams; norms jittered; cls N(0, 1) (d,); images U[0, 1) (B, C, H, H);
//   labels U{0..classes-1} (B,); the mask seed (dropout > 0); gradcheck's draws
function gradcheckVitCase(config: Config, rng: Generator): { inputs: Named; outputs: Named } {
  const [image, channels, patch, d, heads, mlpHidden, blocks, classes] =
    ["image", "channels", "patch", "d", "heads", "mlp_hidden", "blocks", "classes"].map((n) => positiveInt(config, n));
  const model: VitConfig = { image, channels, patch, d, heads, mlp_hidden: mlpHidden, blocks, classes, dropout: get(config, "dropout", 0) };
  const B = positiveInt(config, "B");
  const params = jitterNorms(rng, initVitParams(rng, model));
  params.cls = rng.normal([d]);
  const images = rng.uniform([B, channels, image, image]);
  const labels = rng.integers([B], 0, classes);
  const seed = maskSeed(config, rng);
  const lossFn: LossFn = (p) => ({ loss: vitLoss(p, model, images, labels, masks(seed)).loss, kinks: null });
  const { loss, cache } = vitLoss(params, model, images, labels, masks(seed));
  const grads = vitLossBackward(cache);
  return { inputs: { images, labels }, outputs: { loss: scalar(loss), ...runCheck(config, rng, params, lossFn, grads) } };
}

// config: E, H, pairs (default 1), gradcheck's
// draws: initAlignmentParams; alignmentData (pair by pair: source then target embeddings);
//   gradcheck's draws
function gradcheckAlignmentCase(config: Config, rng: Generator): { inputs: Named; outputs: Named } {
  const E = positiveInt(config, "E"), H = positiveInt(config, "H"), pairs = positiveInt(config, "pairs", 1);
  const params = initAlignmentParams(rng, E, H);
  const data = alignmentData(rng, E, pairs);
  const lossFn: LossFn = (p) => ({ loss: alignmentLoss(p, data).loss, kinks: null });
  const { loss, cache } = alignmentLoss(params, data);
  const grads = alignmentLossBackward(cache);
  const inputs: Named = { queries: data.queries, keys: data.keys, gold: data.gold };
  return { inputs, outputs: { loss: scalar(loss), weights: cache.weights, ...runCheck(config, rng, params, lossFn, grads) } };
}

// config: lead (e.g. [B]), Q, K, D (even), V; valid_lens null | (B,) | (B, Q); q_positions null | (Q,),
//   k_positions null | (K,); gradcheck's
// draws: q ~ N(0, 1) (lead, Q, D); k (lead, K, D); v (lead, K, V); dout (lead, Q, V); gradcheck's draws
function gradcheckRopeCase(config: Config, rng: Generator): { inputs: Named; outputs: Named } {
  const lead = shape(config, "lead");
  const [Q, K, V] = ["Q", "K", "V"].map((n) => positiveInt(config, n));
  const D = even(config, "D");
  const params: Params = { q: rng.normal([...lead, Q, D]), k: rng.normal([...lead, K, D]), v: rng.normal([...lead, K, V]) };
  const dout = rng.normal([...lead, Q, V]);
  const lens = validLens(config);
  const qPos = positions(config, "q_positions", Q), kPos = positions(config, "k_positions", K);
  const lossFn: LossFn = (p) => {
    const { out } = ropeAttentionForward(p.q, p.k, p.v, lens, qPos, kPos);
    let loss = 0; // L = sum(out * dout), in index order
    for (let i = 0; i < out.data.length; i++) loss += out.data[i] * dout.data[i];
    return { loss, kinks: null };
  };
  const { loss } = lossFn(params);
  const { cache } = ropeAttentionForward(params.q, params.k, params.v, lens, qPos, kPos);
  const { dq, dk, dv } = ropeAttentionBackward(dout, cache);
  const inputs: Named = { dout };
  if (lens !== null) inputs.valid_lens = lens;
  if (qPos !== null) inputs.q_positions = qPos;
  if (kPos !== null) inputs.k_positions = kPos;
  return { inputs, outputs: { loss: scalar(loss), ...runCheck(config, rng, params, lossFn, { q: dq, k: dk, v: dv }) } };
}

export const BUILDERS: Record<string, Builder> = {
  gradcheck_transformer: gradcheckTransformerCase,
  gradcheck_vit: gradcheckVitCase,
  gradcheck_alignment: gradcheckAlignmentCase,
  gradcheck_rope: gradcheckRopeCase,
};
