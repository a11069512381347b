// Post-norm Transformer encoder block (twin: reference/nn/encoder_block.py).
//
//   A = MHA(X, X, X, lens)                   (B, T, d)    attention-weight dropout p inside
//   Y = AddNorm1(X, A) = LN1(X + drop(A))    (B, T, d)
//   G = FFN(Y)                               (B, T, d)    Linear(d -> F) -> ReLU -> Linear(F -> d)
//   out = AddNorm2(Y, G) = LN2(Y + drop(G))  (B, T, d)
//
// Shape legend: B batch, T steps, d model dim, H heads, F FFN hidden. validLens null | (B,)
// masks padded keys (1-D: shared by every query of a row).
//
// Parameters arrive as a record stripped of the block's prefix (take them out of a model's flat
// record with subParams(params, "enc.blk0.")):
//   attn.W_q, attn.W_k, attn.W_v, attn.W_o (d, d)   no biases
//   ln1.gamma, ln1.beta (d,)
//   ffn.W1 (F, d), ffn.b1 (F,), ffn.W2 (d, F), ffn.b2 (d,)
//   ln2.gamma, ln2.beta (d,)
// Traced sub-layers (core/trace.ts): attention, addnorm1, ffn, addnorm2, forward and backward.
// Generator draws when dropoutP > 0, in forward order: MHA's weight mask (B, H, T, T),
// AddNorm1's mask (B, T, d), AddNorm2's mask (B, T, d).
//
// Backward (dout (B, T, d) -> dx (B, T, d) and the parameters' gradients under the stripped
// names) walks the four lines above in reverse. A tensor used twice receives its gradients as
// they arrive, in one fixed order, the same in both engines:
//   dY = dY_residual + dY_ffn                     from AddNorm2, then from the FFN
//   dX = (dX_residual + dX_query) + dX_keyvalue   from AddNorm1, then MHA's x_q, then its x_kv

import type { Generator } from "../core/rng.ts";
import type { Tensor, IntTensor } from "../core/ops.ts";
import { type DropoutCache, dropoutBackward, dropoutForward } from "./dropout.ts";
import { type FfnCache, ffnBackward, ffnForward } from "./ffn.ts";
import { layerNormParams, linearParams } from "./init.ts";
import { EPS, type LayerNormCache, layerNormBackward, layerNormForward } from "./layerNorm.ts";
import { type MultiHeadAttentionCache, multiHeadAttentionBackward, multiHeadAttentionForward } from "./multiHeadAttention.ts";
import { type Params, addGrads, param, subParams } from "../core/params.ts";
import { backward, sublayer } from "../core/trace.ts";

/** W_q, W_k, W_v, W_o (d, d) in that order, each U(+-1/sqrt(d)), no biases. */
export function initMhaParams(rng: Generator, d: number, prefix = ""): Params {
  const out: Params = {};
  for (const name of ["W_q", "W_k", "W_v", "W_o"]) out[prefix + name] = linearParams(rng, d, d, false).W;
  return out;
}

/** W1 (F, d) then b1 (F,) from U(+-1/sqrt(d)); W2 (d, F) then b2 (d,) from U(+-1/sqrt(F)). */
export function initFfnParams(rng: Generator, d: number, ffnHidden: number, prefix = ""): Params {
  const l1 = linearParams(rng, ffnHidden, d);
  const l2 = linearParams(rng, d, ffnHidden);
  return { [prefix + "W1"]: l1.W, [prefix + "b1"]: l1.b as Tensor, [prefix + "W2"]: l2.W, [prefix + "b2"]: l2.b as Tensor };
}

/** gamma = 1, beta = 0 (d,); draws nothing. */
export function initLayerNormParams(d: number, prefix = ""): Params {
  const { gamma, beta } = layerNormParams(d);
  return { [prefix + "gamma"]: gamma, [prefix + "beta"]: beta };
}

/** Stripped names, drawn in this order: attn.W_q..W_o, (ln1), ffn.W1, b1, W2, b2, (ln2). */
export function initEncoderBlockParams(rng: Generator, d: number, ffnHidden: number): Params {
  return {
    ...initMhaParams(rng, d, "attn."), ...initLayerNormParams(d, "ln1."),
    ...initFfnParams(rng, d, ffnHidden, "ffn."), ...initLayerNormParams(d, "ln2."),
  };
}

export interface AddNormCache {
  dropout: DropoutCache;
  ln: LayerNormCache;
}

/** LN(x + dropout(y)): x, y (..., d) -> out (..., d). */
export function addNormForward(
  x: Tensor, y: Tensor, gamma: Tensor, beta: Tensor, dropoutP = 0, rng: Generator | null = null,
): { out: Tensor; cache: AddNormCache } {
  // p = 0: the dropout is the identity, so y itself is added (no copy), and its cache says so
  const { out: dropped, cache: dropout } = dropoutP === 0 ? { out: y, cache: { mask: null, p: 0 } } : dropoutForward(y, dropoutP, rng); // (..., d)
  const { out, cache: ln } = layerNormForward(x, gamma, beta, EPS, dropped); // (..., d)  LN(x + dropped), the sum formed inside
  return { out, cache: { dropout, ln } };
}

/** dout (..., d) -> dx (..., d), dy (..., d), dgamma (d,), dbeta (d,). With p = 0, dy is dx
 *  itself (the same array): callers read them, never write them. */
export function addNormBackward(
  dout: Tensor, cache: AddNormCache,
): { dx: Tensor; dy: Tensor; dgamma: Tensor; dbeta: Tensor } {
  const { dx: dsum, dgamma, dbeta } = layerNormBackward(dout, cache.ln); // inverts: out = LN(x + dropped)
  const dx = dsum; // the residual path: x enters the sum unchanged
  const dy = cache.dropout.mask === null ? dsum : dropoutBackward(dsum, cache.dropout); // inverts: dropped = dropout(y)
  return { dx, dy, dgamma, dbeta };
}

export interface EncoderBlockCache {
  x: Tensor; // (B, T, d)
  attn: MultiHeadAttentionCache;
  norm1: AddNormCache;
  ffn: FfnCache;
  norm2: AddNormCache;
  weights: Tensor; // (B, H, T, T)
}

/** x (B, T, d), validLens null | (B,) -> out (B, T, d). */
export function encoderBlockForward(
  x: Tensor, validLens: IntTensor | null, params: Params, numHeads: number,
  dropoutP = 0, rng: Generator | null = null,
): { out: Tensor; cache: EncoderBlockCache } {
  const { out: a, cache: attn } = sublayer("attention", multiHeadAttentionForward, x, x, subParams(params, "attn."), numHeads,
    validLens, dropoutP, rng); // (B, T, d)
  const { out: y, cache: norm1 } = sublayer("addnorm1", addNormForward, x, a, param(params, "ln1.gamma"), param(params, "ln1.beta"), dropoutP, rng); // (B, T, d)
  const { out: g, cache: ffn } = sublayer("ffn", ffnForward, y, subParams(params, "ffn.")); // (B, T, d)
  const { out, cache: norm2 } = sublayer("addnorm2", addNormForward, y, g, param(params, "ln2.gamma"), param(params, "ln2.beta"), dropoutP, rng); // (B, T, d)
  return { out, cache: { x, attn, norm1, ffn, norm2, weights: attn.weights } };
}

/** dout (B, T, d) -> dx (B, T, d), grads under the stripped names, in draw order. */
export function encoderBlockBackward(dout: Tensor, cache: EncoderBlockCache): { dx: Tensor; grads: Params } {
  // inverts: out = AddNorm2(Y, G)
  const { dx: dyRes, dy: dg, dgamma: dgamma2, dbeta: dbeta2 } = backward("addnorm2", addNormBackward, dout, cache.norm2); // (B, T, d)
  // inverts: G = FFN(Y)
  const { dx: dyFfn, grads: ffnGrads } = backward("ffn", ffnBackward, dg, cache.ffn); // (B, T, d)
  const dy = addGrads(dyRes, dyFfn); // Y feeds the residual and the FFN
  // inverts: Y = AddNorm1(X, A)
  const { dx: dxRes, dy: da, dgamma: dgamma1, dbeta: dbeta1 } = backward("addnorm1", addNormBackward, dy, cache.norm1); // (B, T, d)
  // inverts: A = MHA(X, X, X, lens)
  const { dxQ, dxKv, grads: attnGrads } = backward("attention", multiHeadAttentionBackward, da, cache.attn); // (B, T, d) each
  const dx = addGrads(dxRes, dxQ, dxKv); // (dxRes + dxQ) + dxKv: X feeds the residual, the queries, the keys and values
  const grads: Params = {};
  for (const name of ["W_q", "W_k", "W_v", "W_o"]) grads[`attn.${name}`] = attnGrads[name];
  grads["ln1.gamma"] = dgamma1;
  grads["ln1.beta"] = dbeta1;
  for (const name of ["W1", "b1", "W2", "b2"]) grads[`ffn.${name}`] = ffnGrads[name];
  grads["ln2.gamma"] = dgamma2;
  grads["ln2.beta"] = dbeta2;
  return { dx, grads };
}
