// Act 4's alignment scorer: additive attention learning which source word each target word
// translates (twin: reference/models/alignment.py).
//
// The sentence pair and its gold alignment:
//   source  the  red  car  <eos>          keys:    K = 4 source words
//   target  la   voiture  rouge  <eos>    queries: Q = 4 target words
//   gold    la -> the, voiture -> car, rouge -> red, <eos> -> <eos>   i.e. ALIGNMENT = (0, 2, 1, 3)
// Every word is a fixed random embedding of E features (not trained); the scorer is additive
// attention a(q, k) = w_v^T tanh(W_q q + W_k k) with W_q (H, E), W_k (H, E), w_v (1, H), no biases.
//
// Forward, for a batch of B sentence pairs (N = B * Q target words):
//   out  = additiveAttention(q = target embeddings, k = source embeddings, v = I_K)   (B, Q, K)
//          values are the K x K identity, so out[b, i, :] is exactly the weights row
//          (each output sums w_j * 1 with w_k * 0 = +0 terms, no rounding)
//   loss = (sum over (b, i) in row-major order of -log(out[b, i, gold[b, i]])) / N
// Backward (dloss = 1): the only nonzero entries of dout are at the gold source words,
//   dout[b, i, gold] = -1 / (N * out[b, i, gold])
// and additiveAttentionBackward turns dout into the gradients of W_q, W_k and w_v.
//
// Draw order: initAlignmentParams draws W_q (H, E) and W_k (H, E) from U(+-1/sqrt(E)), then
// w_v (1, H) from U(+-1/sqrt(H)) (PyTorch's nn.Linear default, bias-free). alignmentData draws,
// for each pair b = 0..B-1 in turn, the source embeddings (K, E) then the target embeddings (Q, E),
// all N(0, 1). Pair b's draws do not depend on B, so pair 0 is the same sentence at every batch
// size. Pairs after the first are the same sentences under other random embeddings: one set of
// weights must align them all.
// Shape legend: B sentence pairs, Q target words, K source words, E embedding dim, H scorer hidden.

import type { Generator } from "../core/rng.ts";
import { type Tensor, type IntTensor, zeros } from "../core/ops.ts";
import { type AdditiveAttentionCache, additiveAttentionBackward, additiveAttentionForward } from "../nn/additiveAttention.ts";
import { linearParams } from "../nn/init.ts";
import { log } from "../core/mathlib.ts";

export const SOURCE = ["the", "red", "car", "<eos>"] as const;
export const TARGET = ["la", "voiture", "rouge", "<eos>"] as const;
export const ALIGNMENT = [0, 2, 1, 3] as const; // target word i attends to source word ALIGNMENT[i]

export interface AlignmentData { queries: Tensor; keys: Tensor; gold: IntTensor }

/** { W_q (H, E), W_k (H, E), w_v (1, H) }, drawn in that order. */
export function initAlignmentParams(rng: Generator, E: number, H: number): Record<string, Tensor> {
  const W_q = linearParams(rng, H, E, false).W; // (H, E)
  const W_k = linearParams(rng, H, E, false).W; // (H, E)
  const w_v = linearParams(rng, 1, H, false).W; // (1, H)
  return { W_q, W_k, w_v };
}

/** { queries (B, Q, E), keys (B, K, E), gold (B, Q) }: pair by pair, source then target. */
export function alignmentData(rng: Generator, E: number, pairs = 1): AlignmentData {
  if (!(Number.isInteger(pairs) && pairs >= 1 && Number.isInteger(E) && E >= 1)) {
    throw new RangeError(`alignmentData: E and pairs must be positive integers, got E=${E}, pairs=${pairs}`);
  }
  const K = SOURCE.length, Q = TARGET.length;
  const keys = zeros([pairs, K, E]), queries = zeros([pairs, Q, E]);
  for (let b = 0; b < pairs; b++) {
    keys.data.set(rng.normal([K, E]).data, b * K * E); // (K, E) the, red, car, <eos>
    queries.data.set(rng.normal([Q, E]).data, b * Q * E); // (Q, E) la, voiture, rouge, <eos>
  }
  const gold: IntTensor = { shape: [pairs, Q], data: new Int32Array(pairs * Q) }; // (B, Q)
  for (let b = 0; b < pairs; b++) gold.data.set(ALIGNMENT, b * Q);
  return { queries, keys, gold };
}

export interface AlignmentCache { out: Tensor; gold: IntTensor; attn: AdditiveAttentionCache; weights: Tensor; N: number }

/** Mean over the target words of -log(attention weight on the gold source word). Returns the
 *  loss and a cache: cache.weights (B, Q, K) the attention weights (the heatmap). */
export function alignmentLoss(params: Record<string, Tensor>, data: AlignmentData): { loss: number; cache: AlignmentCache } {
  const { queries: q, keys: k, gold } = data;
  const B = q.shape[0], Q = q.shape[1], K = k.shape[1];
  if (gold.shape.length !== 2 || gold.shape[0] !== B || gold.shape[1] !== Q || gold.data.some((g) => g < 0 || g >= K)) {
    throw new RangeError(`alignmentLoss: gold must be source indices in [0, ${K}) of shape (${B}, ${Q}), got [${Array.from(gold.data)}]`);
  }
  const identity = zeros([B, K, K]); // (B, K, K) values: out = weights
  for (let b = 0; b < B; b++) for (let j = 0; j < K; j++) identity.data[(b * K + j) * K + j] = 1;
  const { out, cache: attn } = additiveAttentionForward(q, k, identity, params); // (B, Q, K)
  const N = B * Q;
  let acc = 0; // in-order over (b, i)
  for (let n = 0; n < N; n++) acc += -log(out.data[n * K + gold.data[n]]);
  return { loss: acc / N, cache: { out, gold, attn, weights: attn.weights, N } };
}

/** The gradient of alignmentLoss's loss (dloss = 1) -> { W_q, W_k, w_v }. */
export function alignmentLossBackward(cache: AlignmentCache): Record<string, Tensor> {
  const { out, gold, N } = cache;
  const K = out.shape[2];
  const dout = zeros(out.shape); // (B, Q, K)
  for (let n = 0; n < N; n++) {
    const at = n * K + gold.data[n];
    dout.data[at] = -1 / (N * out.data[at]); // inverts: loss_n = -log(out[gold]) / N
  }
  const { grads } = additiveAttentionBackward(dout, cache.attn); // inverts: out = attention(q, k, I)
  return { W_q: grads.W_q, W_k: grads.W_k, w_v: grads.w_v };
}
