// Forward cases of the attention primitives (twin: cases_attention.py): each op computes from the
// inputs the request hands it (COMPUTE; the reference draws them, cases_attention.py). A case with
// dropout_p > 0 draws its keep mask inside the forward, from the position the inputs were handed with.
// Grouped-query attention's gradient check (kind "gradcheck") lives beside its forward.

import type { Generator } from "../core/rng.ts";
import type { Tensor } from "../core/ops.ts";
import type { Named } from "../core/golden.ts";
import type { Params } from "../core/params.ts";
import type { Compute } from "../core/caseConfig.ts";
import { type Config, get, positiveInt, need, optional } from "../core/caseConfig.ts";
import { maskedSoftmaxForward } from "../nn/maskedSoftmax.ts";
import { dotProductAttentionForward } from "../nn/dotProductAttention.ts";
import { additiveAttentionForward } from "../nn/additiveAttention.ts";
import { multiHeadAttentionForward } from "../nn/multiHeadAttention.ts";
import { groupedQueryAttentionBackward, groupedQueryAttentionForward } from "../nn/groupedQueryAttention.ts";
import { type LossFn, runCheck } from "../runs/gradcheck.ts";
import { given } from "./casesGradcheck.ts";
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

/** Grouped-query attention of the handed x_q (x_kv, valid_lens) under params; config: heads, kv_heads, dropout_p. */
export function gqa(inputs: Named, params: Params, config: Config, rng: Generator | null) {
  const { x_q } = need(inputs, "x_q");
  return groupedQueryAttentionForward(x_q, optional<Tensor>(inputs, "x_kv") ?? x_q, params, positiveInt(config, "heads"),
    positiveInt(config, "kv_heads"), optional(inputs, "valid_lens"), get(config, "dropout_p", 0), rng);
}

function groupedQueryAttention(inputs: Named, config: Config, rng: Generator): Named {
  const { out, cache } = gqa(inputs, need(inputs, "W_q", "W_k", "W_v", "W_o"), config, rng);
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

// config: grouped_query_attention's but dropout_p, gradcheck's; inputs: x_q (x_kv, valid_lens), dout (B, Tq, d);
// parameters: W_q, W_k, W_v, W_o. loss = sum(out * dout), in index order
function gradcheckGroupedQueryAttention(inputs: Named, config: Config, rng: Generator, params: Params | null): Named {
  const { dout } = need(inputs, "dout");
  const lossFn: LossFn = (p) => {
    const { out } = gqa(inputs, p, config, null);
    let loss = 0;
    for (let i = 0; i < out.data.length; i++) loss += out.data[i] * dout.data[i];
    return { loss, kinks: null };
  };
  const { cache } = gqa(inputs, given(params), config, null);
  const { grads } = groupedQueryAttentionBackward(dout, cache);
  return runCheck(config, rng, given(params), lossFn, grads, lossFn(given(params)).loss);
}

export const COMPUTE: Record<string, Compute> = {
  masked_softmax: maskedSoftmax,
  dot_product_attention: dotProductAttention,
  additive_attention: additiveAttention,
  multi_head_attention: multiHeadAttention,
  rope,
  rope_attention: ropeAttention,
  grouped_query_attention: groupedQueryAttention,
  gradcheck_grouped_query_attention: gradcheckGroupedQueryAttention,
};
