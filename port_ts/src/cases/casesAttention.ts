// Forward cases of the attention primitives: inputs from the case's seed, then the outputs
// (twin: cases_attention.py). Each builder draws in the order written in its comment.
// Parameters are drawn as PyTorch's default Linear init, U(-1/sqrt(fan_in), 1/sqrt(fan_in)),
// after the inputs. The dropout keep mask, when dropout_p > 0, is the last draw, made inside
// the forward.

import type { Generator } from "../core/rng.ts";
import type { IntTensor, Tensor } from "../core/ops.ts";
import type { Named } from "../core/golden.ts";
import { type Config, CaseError, get, shape, intArray, floatArray, positiveInt } from "../core/caseConfig.ts";
import { maskedSoftmaxForward } from "../nn/maskedSoftmax.ts";
import { dotProductAttentionForward } from "../nn/dotProductAttention.ts";
import { additiveAttentionForward } from "../nn/additiveAttention.ts";
import { multiHeadAttentionForward } from "../nn/multiHeadAttention.ts";
import { ropeAttentionForward, ropeForward } from "../nn/rope.ts";

export type Builder = (config: Config, rng: Generator) => { inputs: Named; outputs: Named };

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

function maskedSoftmaxCase(config: Config, rng: Generator) {
  // config: shape [B, Q, K] or [B, H, Q, K]; mean, std of the scores; valid_lens null | (B,) | (B, Q)
  // draws: x ~ N(mean, std^2) of shape
  const s = shape(config, "shape");
  if (s.length !== 3 && s.length !== 4) throw new CaseError(`config 'shape' must be [B, Q, K] or [B, H, Q, K], got ${JSON.stringify(s)}`);
  const x = rng.normal(s, get(config, "mean", 0), get(config, "std", 1));
  const lens = validLens(config);
  const { out } = maskedSoftmaxForward(x, lens);
  return { inputs: withLens({ x }, lens), outputs: { out } };
}

function dotProductAttentionCase(config: Config, rng: Generator) {
  // config: either literal q, k, v (nested lists, no draws), or lead (e.g. [B] or [B, H]),
  //   Q, K, D, V and std (default 1); valid_lens null | (B,) | (B, Q); dropout_p (default 0)
  // draws: q ~ N(0, std^2) (lead, Q, D); k (lead, K, D); v (lead, K, V); then the keep mask
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
  const lens = validLens(config);
  const { out, cache } = dotProductAttentionForward(q, k, v, lens, get(config, "dropout_p", 0), rng);
  return { inputs: withLens({ q, k, v }, lens), outputs: { out, weights: cache.weights } };
}

function additiveAttentionCase(config: Config, rng: Generator) {
  // config: B, Q, K, Dq, Dk, H, V; std of the inputs (default 1); valid_lens; dropout_p
  // draws: q ~ N(0, std^2) (B, Q, Dq); k (B, K, Dk); v (B, K, V);
  //   W_q U(+-1/sqrt(Dq)) (H, Dq); W_k U(+-1/sqrt(Dk)) (H, Dk); w_v U(+-1/sqrt(H)) (1, H); keep mask
  const [B, Q, K, Dq, Dk, H, V] = ["B", "Q", "K", "Dq", "Dk", "H", "V"].map((n) => positiveInt(config, n));
  const std = get(config, "std", 1);
  const q = rng.normal([B, Q, Dq], 0, std);
  const k = rng.normal([B, K, Dk], 0, std);
  const v = rng.normal([B, K, V], 0, std);
  const W_q = linearWeight(rng, H, Dq);
  const W_k = linearWeight(rng, H, Dk);
  const w_v = linearWeight(rng, 1, H);
  const params = { W_q, W_k, w_v };
  const lens = validLens(config);
  const { out, cache } = additiveAttentionForward(q, k, v, params, lens, get(config, "dropout_p", 0), rng);
  return { inputs: withLens({ q, k, v, ...params }, lens), outputs: { out, weights: cache.weights } };
}

function multiHeadAttentionCase(config: Config, rng: Generator) {
  // config: B, Tq, d, heads, dq_in; self (default true: x_kv = x_q); when not self: Tk, dkv_in;
  //   valid_lens null | (B,) | (B, Tq); dropout_p (default 0)
  // draws: x_q ~ N(0, 1) (B, Tq, dq_in); x_kv (B, Tk, dkv_in) unless self;
  //   W_q U(+-1/sqrt(dq_in)) (d, dq_in); W_k, W_v U(+-1/sqrt(dkv_in)) (d, dkv_in);
  //   W_o U(+-1/sqrt(d)) (d, d); then the keep mask of the weights (B, H, Tq, Tk)
  const [B, Tq, d, heads, dqIn] = ["B", "Tq", "d", "heads", "dq_in"].map((n) => positiveInt(config, n));
  const selfAttention = get(config, "self", true);
  const x_q = rng.normal([B, Tq, dqIn]);
  let x_kv = x_q, dkvIn = dqIn;
  if (!selfAttention) {
    const Tk = positiveInt(config, "Tk");
    dkvIn = positiveInt(config, "dkv_in");
    x_kv = rng.normal([B, Tk, dkvIn]);
  }
  const W_q = linearWeight(rng, d, dqIn);
  const W_k = linearWeight(rng, d, dkvIn);
  const W_v = linearWeight(rng, d, dkvIn);
  const W_o = linearWeight(rng, d, d);
  const params = { W_q, W_k, W_v, W_o };
  const lens = validLens(config);
  const { out, cache } = multiHeadAttentionForward(x_q, x_kv, params, heads, lens, get(config, "dropout_p", 0), rng);
  const inputs: Named = selfAttention ? { x_q } : { x_q, x_kv };
  return { inputs: withLens({ ...inputs, ...params }, lens), outputs: { out, weights: cache.weights } };
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

function withPositions(inputs: Named, given: Record<string, IntTensor | null>): Named {
  for (const [name, p] of Object.entries(given)) if (p !== null) inputs[name] = p;
  return inputs;
}

function ropeCase(config: Config, rng: Generator) {
  // config: lead (e.g. [B] or [B, H]), T, d (even), std (default 1); positions null | (T,)
  // draws: x ~ N(0, std^2) (lead, T, d)
  const lead = shape(config, "lead"), T = positiveInt(config, "T"), d = even(config, "d");
  const pos = positions(config, "positions", T);
  const x = rng.normal([...lead, T, d], 0, get(config, "std", 1));
  const { out, cache } = ropeForward(x, pos);
  return { inputs: withPositions({ x }, { positions: pos }), outputs: { out, cos: cache.cos, sin: cache.sin } };
}

function ropeAttentionCase(config: Config, rng: Generator) {
  // config: lead (e.g. [B] or [B, H]), Q, K, D (even), V, std (default 1); valid_lens null | (B,) | (B, Q);
  //   q_positions null | (Q,), k_positions null | (K,)
  // draws: q ~ N(0, std^2) (lead, Q, D); k (lead, K, D); v (lead, K, V)
  const lead = shape(config, "lead");
  const [Q, K, V] = ["Q", "K", "V"].map((n) => positiveInt(config, n));
  const D = even(config, "D");
  const std = get(config, "std", 1);
  const q = rng.normal([...lead, Q, D], 0, std), k = rng.normal([...lead, K, D], 0, std), v = rng.normal([...lead, K, V], 0, std);
  const lens = validLens(config);
  const qPos = positions(config, "q_positions", Q), kPos = positions(config, "k_positions", K);
  const { out, cache } = ropeAttentionForward(q, k, v, lens, qPos, kPos);
  const inputs = withPositions(withLens({ q, k, v }, lens), { q_positions: qPos, k_positions: kPos });
  return { inputs, outputs: { out, weights: cache.weights } };
}

export const BUILDERS: Record<string, Builder> = {
  masked_softmax: maskedSoftmaxCase,
  dot_product_attention: dotProductAttentionCase,
  additive_attention: additiveAttentionCase,
  multi_head_attention: multiHeadAttentionCase,
  rope: ropeCase,
  rope_attention: ropeAttentionCase,
};
