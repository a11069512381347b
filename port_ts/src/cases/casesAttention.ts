// Forward cases of the attention primitives (twin: cases_attention.py): each op computes from the
// inputs the request hands it (COMPUTE). A case with dropout_p > 0 draws its keep mask last,
// inside the forward, from the same stream, so the attention ops also draw their inputs (DRAWS),
// in the order written in each comment. Parameters are drawn as PyTorch's default Linear init,
// U(-1/sqrt(fan_in), 1/sqrt(fan_in)), after the inputs.

import type { Generator } from "../core/rng.ts";
import type { IntTensor, Tensor } from "../core/ops.ts";
import type { Named } from "../core/golden.ts";
import { type Config, CaseError, get, shape, intArray, floatArray, positiveInt, need, optional } from "../core/caseConfig.ts";
import { maskedSoftmaxForward } from "../nn/maskedSoftmax.ts";
import { dotProductAttentionForward } from "../nn/dotProductAttention.ts";
import { additiveAttentionForward } from "../nn/additiveAttention.ts";
import { multiHeadAttentionForward } from "../nn/multiHeadAttention.ts";
import { ropeAttentionForward, ropeForward } from "../nn/rope.ts";

export type Builder = (config: Config, rng: Generator) => { inputs: Named; outputs: Named };
/** An op's outputs from its case's inputs and config; rng, where the case draws them, for the
 *  forward's dropout masks (docs/protocol.md, "Handed inputs"). */
export type Compute = (inputs: Named, config: Config, rng?: Generator | null) => Named;
/** An op's inputs drawn from the case's seed, for the cases whose forward draws dropout masks. */
export type Draw = (config: Config, rng: Generator) => Named;

export function validLens(config: Config): IntTensor | null {
  const value = get<unknown>(config, "valid_lens", null);
  return value === null ? null : intArray(value, "valid_lens");
}

function withLens(inputs: Named, lens: IntTensor | null): Named {
  if (lens !== null) inputs.valid_lens = lens;
  return inputs;
}

/** (out, in) from U(-1/sqrt(in), 1/sqrt(in)), PyTorch's default Linear weight init. */
function linearWeight(rng: Generator, outDim: number, inDim: number): Tensor {
  const bound = 1 / Math.sqrt(inDim);
  return rng.uniform([outDim, inDim], -bound, bound);
}

function maskedSoftmax(inputs: Named): Named {
  const { x } = need(inputs, "x");
  return { out: maskedSoftmaxForward(x, optional(inputs, "valid_lens")).out };
}

// config: either literal q, k, v (nested lists, no draws), or lead (e.g. [B] or [B, H]),
//   Q, K, D, V and std (default 1); valid_lens null | (B,) | (B, Q); dropout_p (default 0)
// draws: q ~ N(0, std^2) (lead, Q, D); k (lead, K, D); v (lead, K, V); then, in the forward, the keep mask
function dotProductAttentionInputs(config: Config, rng: Generator): Named {
  let q: Tensor, k: Tensor, v: Tensor;
  if ("q" in config) {
    [q, k, v] = ["q", "k", "v"].map((n) => floatArray(get(config, n), n));
  } else {
    const lead = shape(config, "lead");
    const [Q, K, D, V] = ["Q", "K", "D", "V"].map((n) => positiveInt(config, n));
    const std = get(config, "std", 1);
    q = rng.normal([...lead, Q, D], 0, std);
    k = rng.normal([...lead, K, D], 0, std);
    v = rng.normal([...lead, K, V], 0, std);
  }
  return withLens({ q, k, v }, validLens(config));
}

function dotProductAttention(inputs: Named, config: Config, rng: Generator | null = null): Named {
  const { q, k, v } = need(inputs, "q", "k", "v");
  const { out, cache } = dotProductAttentionForward(q, k, v, optional(inputs, "valid_lens"), get(config, "dropout_p", 0), rng);
  return { out, weights: cache.weights };
}

// config: B, Q, K, Dq, Dk, H, V; std of the inputs (default 1); valid_lens; dropout_p
// draws: q ~ N(0, std^2) (B, Q, Dq); k (B, K, Dk); v (B, K, V);
//   W_q U(+-1/sqrt(Dq)) (H, Dq); W_k U(+-1/sqrt(Dk)) (H, Dk); w_v U(+-1/sqrt(H)) (1, H); then, in the forward, the keep mask
function additiveAttentionInputs(config: Config, rng: Generator): Named {
  const [B, Q, K, Dq, Dk, H, V] = ["B", "Q", "K", "Dq", "Dk", "H", "V"].map((n) => positiveInt(config, n));
  const std = get(config, "std", 1);
  const q = rng.normal([B, Q, Dq], 0, std);
  const k = rng.normal([B, K, Dk], 0, std);
  const v = rng.normal([B, K, V], 0, std);
  const W_q = linearWeight(rng, H, Dq);
  const W_k = linearWeight(rng, H, Dk);
  const w_v = linearWeight(rng, 1, H);
  return withLens({ q, k, v, W_q, W_k, w_v }, validLens(config));
}

function additiveAttention(inputs: Named, config: Config, rng: Generator | null = null): Named {
  const { q, k, v, W_q, W_k, w_v } = need(inputs, "q", "k", "v", "W_q", "W_k", "w_v");
  const { out, cache } = additiveAttentionForward(q, k, v, { W_q, W_k, w_v }, optional(inputs, "valid_lens"), get(config, "dropout_p", 0), rng);
  return { out, weights: cache.weights };
}

// config: B, Tq, d, heads, dq_in; self (default true: x_kv = x_q); when not self: Tk, dkv_in;
//   valid_lens null | (B,) | (B, Tq); dropout_p (default 0)
// draws: x_q ~ N(0, 1) (B, Tq, dq_in); x_kv (B, Tk, dkv_in) unless self;
//   W_q U(+-1/sqrt(dq_in)) (d, dq_in); W_k, W_v U(+-1/sqrt(dkv_in)) (d, dkv_in);
//   W_o U(+-1/sqrt(d)) (d, d); then, in the forward, the keep mask of the weights (B, H, Tq, Tk)
function multiHeadAttentionInputs(config: Config, rng: Generator): Named {
  const [B, Tq, d, dqIn] = ["B", "Tq", "d", "dq_in"].map((n) => positiveInt(config, n));
  const inputs: Named = { x_q: rng.normal([B, Tq, dqIn]) };
  let dkvIn = dqIn;
  if (!get(config, "self", true)) {
    const Tk = positiveInt(config, "Tk");
    dkvIn = positiveInt(config, "dkv_in");
    inputs.x_kv = rng.normal([B, Tk, dkvIn]);
  }
  inputs.W_q = linearWeight(rng, d, dqIn);
  inputs.W_k = linearWeight(rng, d, dkvIn);
  inputs.W_v = linearWeight(rng, d, dkvIn);
  inputs.W_o = linearWeight(rng, d, d);
  return withLens(inputs, validLens(config));
}

function multiHeadAttention(inputs: Named, config: Config, rng: Generator | null = null): Named {
  const { x_q, W_q, W_k, W_v, W_o } = need(inputs, "x_q", "W_q", "W_k", "W_v", "W_o");
  const x_kv = optional<Tensor>(inputs, "x_kv") ?? x_q;
  const { out, cache } = multiHeadAttentionForward(x_q, x_kv, { W_q, W_k, W_v, W_o }, positiveInt(config, "heads"),
    optional(inputs, "valid_lens"), get(config, "dropout_p", 0), rng);
  return { out, weights: cache.weights };
}

/** null (positions 0..T-1) or the config's T integer positions. */
export function positions(config: Config, key: string, T: number): IntTensor | null {
  const value = get<unknown>(config, key, null);
  if (value === null) return null;
  const p = intArray(value, key);
  if (p.shape.length !== 1 || p.shape[0] !== T || p.data.some((n) => n < 0)) {
    throw new CaseError(`config '${key}' must list ${T} non-negative integer positions (one per step), got ${JSON.stringify(value)}`);
  }
  return p;
}

export function even(config: Config, key: string): number {
  const n = positiveInt(config, key);
  if (n % 2 !== 0) throw new CaseError(`config '${key}' must be even (RoPE rotates pairs of features), got ${n}`);
  return n;
}

function rope(inputs: Named): Named {
  const { x } = need(inputs, "x");
  const { out, cache } = ropeForward(x, optional(inputs, "positions"));
  return { out, cos: cache.cos, sin: cache.sin };
}

function ropeAttention(inputs: Named): Named {
  const { q, k, v } = need(inputs, "q", "k", "v");
  const { out, cache } = ropeAttentionForward(q, k, v, optional(inputs, "valid_lens"), optional(inputs, "q_positions"), optional(inputs, "k_positions"));
  return { out, weights: cache.weights };
}

export const COMPUTE: Record<string, Compute> = {
  masked_softmax: maskedSoftmax,
  dot_product_attention: dotProductAttention,
  additive_attention: additiveAttention,
  multi_head_attention: multiHeadAttention,
  rope,
  rope_attention: ropeAttention,
};

export const DRAWS: Record<string, Draw> = {
  dot_product_attention: dotProductAttentionInputs,
  additive_attention: additiveAttentionInputs,
  multi_head_attention: multiHeadAttentionInputs,
};
