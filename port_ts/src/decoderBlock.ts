// Post-norm Transformer decoder block, always causal (twin: reference/decoder_block.py).
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
// ln2.*, ffn.W1/b1/W2/b2, ln3.* (shapes as in encoderBlock.ts). Generator draws when
// dropoutP > 0, in forward order: self-attention weights (B, H, T, T), AddNorm1 (B, T, d),
// cross-attention weights (B, H, T, S), AddNorm2 (B, T, d), AddNorm3 (B, T, d).

import type { Generator } from "./rng.ts";
import type { Tensor, IntTensor } from "./ops.ts";
import { type FfnCache, ffnForward } from "./ffn.ts";
import { type MultiHeadAttentionCache, multiHeadAttentionForward } from "./multiHeadAttention.ts";
import {
  type AddNormCache, type Params, addNormForward, initFfnParams, initLayerNormParams, initMhaParams,
  param, subParams,
} from "./encoderBlock.ts";

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
  const { out: s, cache: selfAttn } = multiHeadAttentionForward(x, x, subParams(params, "self_attn."), numHeads,
    causalValidLens(B, T), dropoutP, rng); // (B, T, d)
  const { out: y, cache: norm1 } = addNormForward(x, s, param(params, "ln1.gamma"), param(params, "ln1.beta"), dropoutP, rng); // (B, T, d)
  const { out: c, cache: crossAttn } = multiHeadAttentionForward(y, encOut, subParams(params, "cross_attn."), numHeads,
    encValidLens, dropoutP, rng); // (B, T, d)
  const { out: z, cache: norm2 } = addNormForward(y, c, param(params, "ln2.gamma"), param(params, "ln2.beta"), dropoutP, rng); // (B, T, d)
  const { out: g, cache: ffn } = ffnForward(z, subParams(params, "ffn.")); // (B, T, d)
  const { out, cache: norm3 } = addNormForward(z, g, param(params, "ln3.gamma"), param(params, "ln3.beta"), dropoutP, rng); // (B, T, d)
  const cache = {
    x, encOut, selfAttn, norm1, crossAttn, norm2, ffn, norm3,
    selfWeights: selfAttn.weights, crossWeights: crossAttn.weights,
  };
  return { out, cache };
}
