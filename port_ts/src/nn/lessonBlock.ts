// The lesson's Transformer block: pre-norm, PyTorch's biased multi-head attention, a ReLU FFN and
// two layer norms, an optional mask (twin: reference/nn/lesson_block.py; docs/lesson_block.md).
//
//   N1 = LN1(X)                  (B, T, d)
//   A  = Attn(N1, keep)          (B, T, d)    lessonAttention: nn.MultiheadAttention, biased
//   X1 = X + A                   (B, T, d)
//   N2 = LN2(X1)                 (B, T, d)
//   G  = FFN(N2)                 (B, T, d)    Linear(d -> F) -> ReLU -> Linear(F -> d)
//   out = X1 + G                 (B, T, d)
//
// Shape legend: B batch, T steps, d model dim, H heads, F FFN hidden. keep null | (B|1, T, T)
// (causal: lessonAttention's causalKeep). Unlike the book's post-norm block (encoderBlock.ts),
// the norms come first and the residual stream is never normalised inside the block. No dropout.
//
// Parameters, stripped of the block's prefix, in this order (the forward's):
//   ln1.gamma, ln1.beta (d,); attn.W_in (3d, d), attn.b_in (3d,), attn.W_o (d, d), attn.b_o (d,);
//   ln2.gamma, ln2.beta (d,); ffn.W1 (F, d), ffn.b1 (F,), ffn.W2 (d, F), ffn.b2 (d,)
//   4d^2 + 4d + 2dF + F + d + 4d in all (lessonBlockParamCount): 49,984 at d 64, F 256;
//   7,087,872 at d 768, F 3072 (the heads do not count).
// Drawn: attn (W_in, W_o), then ffn (W1, b1, W2, b2); layer norms and attention biases draw nothing.
//
// Backward walks the six lines in reverse. A tensor used twice gets its gradients added in one
// fixed order, the same in both engines:
//   dX1 = dOut + dX1_ln2     the residual, then the FFN branch through LN2
//   dX  = dX1 + dX_ln1       the residual, then the attention branch through LN1

import type { Generator } from "../core/rng.ts";
import type { Tensor } from "../core/ops.ts";
import { type Params, addGrads, param, subParams } from "../core/params.ts";
import { backward, sublayer } from "../core/trace.ts";
import { initFfnParams, initLayerNormParams } from "./encoderBlock.ts";
import { type FfnCache, ffnBackward, ffnForward } from "./ffn.ts";
import { type LayerNormCache, layerNormBackward, layerNormForward } from "./layerNorm.ts";
import { type Keep, type LessonAttentionCache, initLessonAttentionParams, lessonAttentionBackward, lessonAttentionForward } from "./lessonAttention.ts";

export const NAMES: readonly string[] = ["ln1.gamma", "ln1.beta", "attn.W_in", "attn.b_in", "attn.W_o", "attn.b_o",
  "ln2.gamma", "ln2.beta", "ffn.W1", "ffn.b1", "ffn.W2", "ffn.b2"];

/** The block's parameters under the stripped names, in NAMES order (draws: attn, then ffn). */
export function initLessonBlockParams(rng: Generator, d: number, ffnHidden: number): Params {
  const attn = initLessonAttentionParams(rng, d, "attn.");
  const ffn = initFfnParams(rng, d, ffnHidden, "ffn.");
  const drawn: Params = { ...initLayerNormParams(d, "ln1."), ...attn, ...initLayerNormParams(d, "ln2."), ...ffn };
  const out: Params = {};
  for (const name of NAMES) out[name] = drawn[name];
  return out;
}

/** How many numbers the block holds: attention 4d^2 + 4d, FFN 2dF + F + d, norms 4d. */
export function lessonBlockParamCount(d: number, ffnHidden: number): number {
  return (4 * d * d + 4 * d) + (2 * d * ffnHidden + ffnHidden + d) + 4 * d;
}

export interface LessonBlockCache {
  ln1: LayerNormCache; attn: LessonAttentionCache; ln2: LayerNormCache; ffn: FfnCache;
  weights: Tensor; // (B, H, T, T)
}

/** x (B, T, d), keep null | (B|1, T, T) -> out (B, T, d). */
/** The block's first half, x + attention(LN1(x)): x (B, T, d) -> x1 (B, T, d). */
export function lessonBlockAttention(x: Tensor, params: Params, numHeads: number, keep: Keep | null = null): { out: Tensor; cache: { ln1: LayerNormCache; attn: LessonAttentionCache } } {
  const { out: n1, cache: ln1 } = layerNormForward(x, param(params, "ln1.gamma"), param(params, "ln1.beta")); // (B, T, d)
  const { out: a, cache: attn } = lessonAttentionForward(n1, subParams(params, "attn."), numHeads, keep); // (B, T, d)
  const x1 = addGrads(x, a); // (B, T, d)
  return { out: x1, cache: { ln1, attn } };
}

/** The block's second half, x1 + FFN(LN2(x1)): x1 (B, T, d) -> out (B, T, d). */
export function lessonBlockFfn(x1: Tensor, params: Params): { out: Tensor; cache: { ln2: LayerNormCache; ffn: FfnCache } } {
  const { out: n2, cache: ln2 } = layerNormForward(x1, param(params, "ln2.gamma"), param(params, "ln2.beta")); // (B, T, d)
  const { out: g, cache: ffn } = ffnForward(n2, subParams(params, "ffn.")); // (B, T, d)
  const out = addGrads(x1, g); // (B, T, d)
  return { out, cache: { ln2, ffn } };
}

/** Traced sub-layers (core/trace.ts): attention (the first half), ffn (the second), forward and backward. */
export function lessonBlockForward(x: Tensor, params: Params, numHeads: number, keep: Keep | null = null): { out: Tensor; cache: LessonBlockCache } {
  const { out: x1, cache: first } = sublayer("attention", lessonBlockAttention, x, params, numHeads, keep); // (B, T, d)
  const { out, cache: second } = sublayer("ffn", lessonBlockFfn, x1, params); // (B, T, d)
  return { out, cache: { ln1: first.ln1, attn: first.attn, ln2: second.ln2, ffn: second.ffn, weights: first.attn.weights } };
}

/** The block's second half: dout (B, T, d) -> dx (B, T, d) (x1's), dgamma, dbeta (d,) (LN2's),
 *  grads { W1, b1, W2, b2 }. */
export function lessonBlockFfnBackward(dout: Tensor, cache: LessonBlockCache): { dx: Tensor; dgamma: Tensor; dbeta: Tensor; grads: Params } {
  // inverts: out = x1 + g; g = FFN(n2)
  const { dx: dn2, grads } = ffnBackward(dout, cache.ffn); // (B, T, d)
  // inverts: n2 = LN2(x1)
  const { dx: dx1Ln, dgamma, dbeta } = layerNormBackward(dn2, cache.ln2); // (B, T, d)
  const dx1 = addGrads(dout, dx1Ln); // x1 feeds the residual and LN2
  return { dx: dx1, dgamma, dbeta, grads };
}

/** The block's first half: dx1 (B, T, d) -> dx (B, T, d), dgamma, dbeta (d,) (LN1's),
 *  grads { W_in, b_in, W_o, b_o }. */
export function lessonBlockAttentionBackward(dx1: Tensor, cache: LessonBlockCache): { dx: Tensor; dgamma: Tensor; dbeta: Tensor; grads: Params } {
  // inverts: x1 = x + a; a = Attn(n1, keep)
  const { dx: dn1, grads } = lessonAttentionBackward(dx1, cache.attn); // (B, T, d)
  // inverts: n1 = LN1(x)
  const { dx: dxLn, dgamma, dbeta } = layerNormBackward(dn1, cache.ln1); // (B, T, d)
  const dx = addGrads(dx1, dxLn); // x feeds the residual and LN1
  return { dx, dgamma, dbeta, grads };
}

/** dout (B, T, d) -> dx (B, T, d), grads under the stripped names, in NAMES order. */
export function lessonBlockBackward(dout: Tensor, cache: LessonBlockCache): { dx: Tensor; grads: Params } {
  const { dx: dx1, dgamma: dgamma2, dbeta: dbeta2, grads: ffnGrads } = backward("ffn", lessonBlockFfnBackward, dout, cache); // (B, T, d)
  const { dx, dgamma: dgamma1, dbeta: dbeta1, grads: attnGrads } = backward("attention", lessonBlockAttentionBackward, dx1, cache); // (B, T, d)
  const grads: Params = { "ln1.gamma": dgamma1, "ln1.beta": dbeta1 };
  for (const name of ["W_in", "b_in", "W_o", "b_o"]) grads[`attn.${name}`] = attnGrads[name];
  grads["ln2.gamma"] = dgamma2;
  grads["ln2.beta"] = dbeta2;
  for (const name of ["W1", "b1", "W2", "b2"]) grads[`ffn.${name}`] = ffnGrads[name];
  return { dx, grads };
}
