// Post-norm Transformer decoder block, always causal (twin: reference/nn/decoder_block.py).
//
//   S = MHA_self(X, X, X, causal)             (B, T, d)    query t sees keys 0..t
//   Y = AddNorm1(X, S) = LN1(X + drop(S))     (B, T, d)
//   C = MHA_cross(Y, E, E, encLens)           (B, T, d)    keys/values: the encoder's output
//   Z = AddNorm2(Y, C) = LN2(Y + drop(C))     (B, T, d)
//   out = AddNorm3(Z, FFN(Z))                 (B, T, d)
//
// Shape legend: B batch, T target steps, S source steps, d model dim, H heads, F FFN hidden.
// The causal mask is the book's training-mode one: 2-D valid lengths [1, 2, ..., T] for every
// batch row. This project applies it in every mode (decisions.md "Decoding"); the book's eval
// mode drops it.
//
// Parameters (stripped of the block's prefix): self_attn.W_q..W_o, ln1.*, cross_attn.W_q..W_o,
// Traced sub-layers (core/trace.ts): self_attention, addnorm1, cross_attention, addnorm2, ffn, addnorm3,
// forward and backward.
// ln2.*, ffn.W1/b1/W2/b2, ln3.* (shapes as in encoderBlock.ts). Generator draws when
// dropoutP > 0, in forward order: self-attention weights (B, H, T, T), AddNorm1 (B, T, d),
// cross-attention weights (B, H, T, S), AddNorm2 (B, T, d), AddNorm3 (B, T, d).
//
// Backward (dout (B, T, d) -> dx (B, T, d), denc (B, S, d) and the parameters' gradients under
// the stripped names) walks the six lines above in reverse. denc is the cross-attention's x_kv
// gradient, this block's contribution to the encoder output's gradient. Tensors used more than
// once receive their gradients as they arrive, in one fixed order, the same in both engines:
//   dZ = dZ_residual + dZ_ffn                     from AddNorm3, then from the FFN
//   dY = dY_residual + dY_query                   from AddNorm2, then the cross-attention's x_q
//   dX = (dX_residual + dX_query) + dX_keyvalue   from AddNorm1, then self-attention's x_q, x_kv

import type { Generator } from "../core/rng.ts";
import type { Tensor, IntTensor } from "../core/ops.ts";
import { type FfnCache, ffnBackward, ffnForward } from "./ffn.ts";
import { type MultiHeadAttentionCache, multiHeadAttentionBackward, multiHeadAttentionForward } from "./multiHeadAttention.ts";
import { type Params, addGrads, param, subParams } from "../core/params.ts";
import { backward, sublayer } from "../core/trace.ts";
import { type AddNormCache, addNormBackward, addNormForward, initFfnParams, initLayerNormParams, initMhaParams } from "./encoderBlock.ts";

/** (B, T): row t of every batch element may see keys 0..t, i.e. length t + 1. */
export function causalValidLens(B: number, T: number): IntTensor {
  const data = new Int32Array(B * T);
  for (let b = 0; b < B; b++) for (let t = 0; t < T; t++) data[b * T + t] = t + 1;
  return { shape: [B, T], data };
}

/** Stripped names, drawn in this order: self_attn.W_q..W_o, (ln1), cross_attn.W_q..W_o, (ln2),
 *  ffn.W1, b1, W2, b2, (ln3). Cross-attention keys/values come from the encoder, also d wide. */
export function initDecoderBlockParams(rng: Generator, d: number, ffnHidden: number): Params {
  return {
    ...initMhaParams(rng, d, "self_attn."), ...initLayerNormParams(d, "ln1."),
    ...initMhaParams(rng, d, "cross_attn."), ...initLayerNormParams(d, "ln2."),
    ...initFfnParams(rng, d, ffnHidden, "ffn."), ...initLayerNormParams(d, "ln3."),
  };
}

export interface DecoderBlockCache {
  x: Tensor; // (B, T, d)
  encOut: Tensor; // (B, S, d)
  selfAttn: MultiHeadAttentionCache;
  norm1: AddNormCache;
  crossAttn: MultiHeadAttentionCache;
  norm2: AddNormCache;
  ffn: FfnCache;
  norm3: AddNormCache;
  selfWeights: Tensor; // (B, H, T, T)
  crossWeights: Tensor; // (B, H, T, S)
}

/** x (B, T, d), encOut (B, S, d), encValidLens null | (B,) -> out (B, T, d). */
export function decoderBlockForward(
  x: Tensor, encOut: Tensor, encValidLens: IntTensor | null, params: Params, numHeads: number,
  dropoutP = 0, rng: Generator | null = null,
): { out: Tensor; cache: DecoderBlockCache } {
  const [B, T] = x.shape;
  const { out: s, cache: selfAttn } = sublayer("self_attention", multiHeadAttentionForward, x, x, subParams(params, "self_attn."),
    numHeads, causalValidLens(B, T), dropoutP, rng); // (B, T, d)
  const { out: y, cache: norm1 } = sublayer("addnorm1", addNormForward, x, s, param(params, "ln1.gamma"), param(params, "ln1.beta"), dropoutP, rng); // (B, T, d)
  const { out: c, cache: crossAttn } = sublayer("cross_attention", multiHeadAttentionForward, y, encOut,
    subParams(params, "cross_attn."), numHeads, encValidLens, dropoutP, rng); // (B, T, d)
  const { out: z, cache: norm2 } = sublayer("addnorm2", addNormForward, y, c, param(params, "ln2.gamma"), param(params, "ln2.beta"), dropoutP, rng); // (B, T, d)
  const { out: g, cache: ffn } = sublayer("ffn", ffnForward, z, subParams(params, "ffn.")); // (B, T, d)
  const { out, cache: norm3 } = sublayer("addnorm3", addNormForward, z, g, param(params, "ln3.gamma"), param(params, "ln3.beta"), dropoutP, rng); // (B, T, d)
  const cache = {
    x, encOut, selfAttn, norm1, crossAttn, norm2, ffn, norm3,
    selfWeights: selfAttn.weights, crossWeights: crossAttn.weights,
  };
  return { out, cache };
}

/** dout (B, T, d) -> dx (B, T, d), denc (B, S, d), grads under the stripped names, in draw order. */
export function decoderBlockBackward(
  dout: Tensor, cache: DecoderBlockCache,
): { dx: Tensor; denc: Tensor; grads: Params } {
  // inverts: out = AddNorm3(Z, G)
  const { dx: dzRes, dy: dg, dgamma: dgamma3, dbeta: dbeta3 } = backward("addnorm3", addNormBackward, dout, cache.norm3); // (B, T, d)
  // inverts: G = FFN(Z)
  const { dx: dzFfn, grads: ffnGrads } = backward("ffn", ffnBackward, dg, cache.ffn); // (B, T, d)
  const dz = addGrads(dzRes, dzFfn); // Z feeds the residual and the FFN
  // inverts: Z = AddNorm2(Y, C)
  const { dx: dyRes, dy: dc, dgamma: dgamma2, dbeta: dbeta2 } = backward("addnorm2", addNormBackward, dz, cache.norm2); // (B, T, d)
  // inverts: C = MHA_cross(Y, E, E, encLens)
  const { dxQ: dyQ, dxKv: denc, grads: crossGrads } = backward("cross_attention", multiHeadAttentionBackward, dc, cache.crossAttn); // (B, T, d), (B, S, d)
  const dy = addGrads(dyRes, dyQ); // Y feeds the residual and the cross-attention's queries
  // inverts: Y = AddNorm1(X, S)
  const { dx: dxRes, dy: ds, dgamma: dgamma1, dbeta: dbeta1 } = backward("addnorm1", addNormBackward, dy, cache.norm1); // (B, T, d)
  // inverts: S = MHA_self(X, X, X, causal)
  const { dxQ, dxKv, grads: selfGrads } = backward("self_attention", multiHeadAttentionBackward, ds, cache.selfAttn); // (B, T, d) each
  const dx = addGrads(dxRes, dxQ, dxKv); // (dxRes + dxQ) + dxKv: X feeds the residual, the queries, the keys and values
  const names = ["W_q", "W_k", "W_v", "W_o"];
  const grads: Params = {};
  for (const name of names) grads[`self_attn.${name}`] = selfGrads[name];
  grads["ln1.gamma"] = dgamma1;
  grads["ln1.beta"] = dbeta1;
  for (const name of names) grads[`cross_attn.${name}`] = crossGrads[name];
  grads["ln2.gamma"] = dgamma2;
  grads["ln2.beta"] = dbeta2;
  for (const name of ["W1", "b1", "W2", "b2"]) grads[`ffn.${name}`] = ffnGrads[name];
  grads["ln3.gamma"] = dgamma3;
  grads["ln3.beta"] = dbeta3;
  return { dx, denc, grads };
}
