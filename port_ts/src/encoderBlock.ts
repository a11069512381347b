// Post-norm Transformer encoder block (twin: reference/encoder_block.py).
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
// Generator draws when dropoutP > 0, in forward order: MHA's weight mask (B, H, T, T),
// AddNorm1's mask (B, T, d), AddNorm2's mask (B, T, d).

import type { Generator } from "./rng.ts";
import { type Tensor, type IntTensor, zeros } from "./ops.ts";
import { type DropoutCache, dropoutForward } from "./dropout.ts";
import { type FfnCache, ffnForward } from "./ffn.ts";
import { layerNormParams, linearParams } from "./init.ts";
import { type LayerNormCache, layerNormForward } from "./layerNorm.ts";
import { type MultiHeadAttentionCache, multiHeadAttentionForward } from "./multiHeadAttention.ts";

export type Params = Record<string, Tensor>;

/** The entries of params whose names start with prefix, with the prefix removed. */
export function subParams(params: Params, prefix: string): Params {
  const out: Params = {};
  for (const [name, value] of Object.entries(params)) {
    if (name.startsWith(prefix)) out[name.slice(prefix.length)] = value;
  }
  return out;
}

/** A parameter by name, or an error that lists what is there. */
export function param(params: Params, name: string): Tensor {
  const t = params[name];
  if (t === undefined) throw new RangeError(`params needs '${name}'; found [${Object.keys(params).sort().join(", ")}]`);
  return t;
}

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
  const { out: dropped, cache: dropout } = dropoutForward(y, dropoutP, rng); // (..., d)
  const sum = zeros(x.shape); // (..., d)
  for (let i = 0; i < sum.data.length; i++) sum.data[i] = x.data[i] + dropped.data[i];
  const { out, cache: ln } = layerNormForward(sum, gamma, beta); // (..., d)
  return { out, cache: { dropout, ln } };
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
  const { out: a, cache: attn } = multiHeadAttentionForward(x, x, subParams(params, "attn."), numHeads,
    validLens, dropoutP, rng); // (B, T, d)
  const { out: y, cache: norm1 } = addNormForward(x, a, param(params, "ln1.gamma"), param(params, "ln1.beta"), dropoutP, rng); // (B, T, d)
  const { out: g, cache: ffn } = ffnForward(y, subParams(params, "ffn.")); // (B, T, d)
  const { out, cache: norm2 } = addNormForward(y, g, param(params, "ln2.gamma"), param(params, "ln2.beta"), dropoutP, rng); // (B, T, d)
  return { out, cache: { x, attn, norm1, ffn, norm2, weights: attn.weights } };
}
