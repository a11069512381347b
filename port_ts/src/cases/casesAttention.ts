// Forward cases of the attention primitives (twin: cases_attention.py): each op computes from the
// inputs the request hands it (COMPUTE; the reference draws them, cases_attention.py). A case with
// dropout_p > 0 draws its keep mask inside the forward, from the position the inputs were handed with.

import type { Generator } from "../core/rng.ts";
import type { Tensor } from "../core/ops.ts";
import type { Named } from "../core/golden.ts";
import { type Compute, type Config, get, positiveInt, need, optional } from "../core/caseConfig.ts";
import { maskedSoftmaxForward } from "../nn/maskedSoftmax.ts";
import { dotProductAttentionForward } from "../nn/dotProductAttention.ts";
import { additiveAttentionForward } from "../nn/additiveAttention.ts";
import { multiHeadAttentionForward } from "../nn/multiHeadAttention.ts";
import { ropeAttentionForward, ropeForward } from "../nn/rope.ts";

function maskedSoftmax(inputs: Named): Named {
  const { x } = need(inputs, "x");
  return { out: maskedSoftmaxForward(x, optional(inputs, "valid_lens")).out };
}

function dotProductAttention(inputs: Named, config: Config, rng: Generator): Named {
  const { q, k, v } = need(inputs, "q", "k", "v");
  const { out, cache } = dotProductAttentionForward(q, k, v, optional(inputs, "valid_lens"), get(config, "dropout_p", 0), rng);
  return { out, weights: cache.weights };
}

function additiveAttention(inputs: Named, config: Config, rng: Generator): Named {
  const { q, k, v, W_q, W_k, w_v } = need(inputs, "q", "k", "v", "W_q", "W_k", "w_v");
  const { out, cache } = additiveAttentionForward(q, k, v, { W_q, W_k, w_v }, optional(inputs, "valid_lens"), get(config, "dropout_p", 0), rng);
  return { out, weights: cache.weights };
}

function multiHeadAttention(inputs: Named, config: Config, rng: Generator): Named {
  const { x_q, W_q, W_k, W_v, W_o } = need(inputs, "x_q", "W_q", "W_k", "W_v", "W_o");
  const x_kv = optional<Tensor>(inputs, "x_kv") ?? x_q;
  const { out, cache } = multiHeadAttentionForward(x_q, x_kv, { W_q, W_k, W_v, W_o }, positiveInt(config, "heads"),
    optional(inputs, "valid_lens"), get(config, "dropout_p", 0), rng);
  return { out, weights: cache.weights };
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
