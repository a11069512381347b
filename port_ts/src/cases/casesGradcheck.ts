// Gradient-check cases (kind "gradcheck") of the three models that train: the encoder-decoder
// Transformer, the ViT and act 4's alignment scorer; and of RoPE attention's backward through the
// rotations of its queries and keys (twin: cases_gradcheck.py). An op's own gradient check may
// live beside its forward instead (grouped-query attention's: casesAttention.ts).
//
// The request hands each case the data (its inputs) and the parameters the reference drew (init,
// then the layer norms jittered so a backward that ignored gamma, beta or <cls> cannot pass by the
// accident of init's 1, 0 and 0), with the generator's position after them. From there this
// engine draws, when the config's dropout > 0, one integer mask seed U{0..2^31-1} (every loss
// evaluation draws its dropout masks from a fresh Generator(mask seed), so the finite differences
// see the masks the backward uses), then gradcheck's own draws (coordinates, then directions:
// gradcheck.ts).
//
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
// handed dout (an input), summed in index order.

import type { Compute } from "../core/caseConfig.ts";
import type { Named } from "../core/golden.ts";
import type { IntTensor, Tensor } from "../core/ops.ts";
import { Generator } from "../core/rng.ts";
import { type Config, CaseError, get, need, optional } from "../core/caseConfig.ts";
import { type AlignmentData, alignmentLoss, alignmentLossBackward } from "../models/alignment.ts";
import type { Params } from "../core/params.ts";
import { type LossFn, runCheck } from "../runs/gradcheck.ts";
import { transformerLoss, transformerLossBackward } from "../models/transformer.ts";
import { vitLoss, vitLossBackward } from "../models/vit.ts";
import { transformerConfig, vitConfig } from "./casesModels.ts";
import { ropeAttentionBackward, ropeAttentionForward } from "../nn/rope.ts";

/** A gradient check's handed parameters (a CaseError when the document has none). */
export function given(params: Params | null, ...names: string[]): Params {
  if (params === null) throw new CaseError("a gradient check needs the 'parameters' of its handed document");
  return need(params, ...names);
}

/** The dropout masks' seed, drawn only when the config's dropout > 0. */
function maskSeed(config: Config, rng: Generator): number | null {
  return get(config, "dropout", 0) > 0 ? rng.integers([1], 0, 2 ** 31).data[0] : null;
}

function masks(seed: number | null): Generator | null {
  return seed === null ? null : new Generator(seed);
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

// config: vocab_src, vocab_tgt, d, ffn_hidden, heads, enc_blocks, dec_blocks, dropout (default 0), gradcheck's
// inputs: src (B, T_src), tgt_in, tgt_out (B, T_tgt), src_valid_lens, tgt_valid_lens (B,) or none
function gradcheckTransformer(inputs: Named, config: Config, rng: Generator, params: Params | null): Named {
  const model = transformerConfig(config);
  const { src, tgt_in: tgtIn, tgt_out: tgtOut } = need(inputs, "src", "tgt_in", "tgt_out") as unknown as Record<string, IntTensor>;
  const srcLens = optional(inputs, "src_valid_lens"), tgtLens = optional(inputs, "tgt_valid_lens");
  const seed = maskSeed(config, rng);
  const lossFn: LossFn = (p) => {
    const { loss, cache } = transformerLoss(p, model, src, srcLens, tgtIn, tgtOut, tgtLens, masks(seed));
    return { loss, kinks: reluPattern([...cache.model.enc.blocks, ...cache.model.dec.blocks]) };
  };
  const { loss, cache } = transformerLoss(given(params), model, src, srcLens, tgtIn, tgtOut, tgtLens, masks(seed));
  return runCheck(config, rng, given(params), lossFn, transformerLossBackward(cache), loss);
}

// config: image, channels, patch, d, heads, mlp_hidden, blocks, classes, dropout (default 0), gradcheck's
// inputs: images (B, C, H, H), labels (B,)
function gradcheckVit(inputs: Named, config: Config, rng: Generator, params: Params | null): Named {
  const model = vitConfig(config);
  const { images, labels } = need(inputs, "images", "labels");
  const seed = maskSeed(config, rng);
  const lossFn: LossFn = (p) => ({ loss: vitLoss(p, model, images, labels as unknown as IntTensor, masks(seed)).loss, kinks: null });
  const { loss, cache } = vitLoss(given(params), model, images, labels as unknown as IntTensor, masks(seed));
  return runCheck(config, rng, given(params), lossFn, vitLossBackward(cache), loss);
}

// config: gradcheck's; inputs: queries, keys, gold (alignmentData's)
function gradcheckAlignment(inputs: Named, config: Config, rng: Generator, params: Params | null): Named {
  const data = need(inputs, "queries", "keys", "gold") as unknown as AlignmentData;
  const lossFn: LossFn = (p) => ({ loss: alignmentLoss(p, data).loss, kinks: null });
  const { loss, cache } = alignmentLoss(given(params), data);
  return { weights: cache.weights, ...runCheck(config, rng, given(params), lossFn, alignmentLossBackward(cache), loss) };
}

// config: gradcheck's; inputs: dout (lead, Q, V), valid_lens, q_positions, k_positions or none;
// parameters: q (lead, Q, D), k (lead, K, D), v (lead, K, V)
function gradcheckRope(inputs: Named, config: Config, rng: Generator, params: Params | null): Named {
  const { dout } = need(inputs, "dout");
  const p0 = given(params, "q", "k", "v");
  const lens = optional(inputs, "valid_lens"), qPos = optional(inputs, "q_positions"), kPos = optional(inputs, "k_positions");
  const lossFn: LossFn = (p) => {
    const { out } = ropeAttentionForward(p.q, p.k, p.v, lens, qPos, kPos);
    let loss = 0; // L = sum(out * dout), in index order
    for (let i = 0; i < out.data.length; i++) loss += out.data[i] * dout.data[i];
    return { loss, kinks: null };
  };
  const { loss } = lossFn(p0);
  const { cache } = ropeAttentionForward(p0.q, p0.k, p0.v, lens, qPos, kPos);
  const { dq, dk, dv } = ropeAttentionBackward(dout, cache);
  return runCheck(config, rng, p0, lossFn, { q: dq, k: dk, v: dv }, loss);
}

export const COMPUTE: Record<string, Compute> = {
  gradcheck_transformer: gradcheckTransformer,
  gradcheck_vit: gradcheckVit,
  gradcheck_alignment: gradcheckAlignment,
  gradcheck_rope: gradcheckRope,
};
