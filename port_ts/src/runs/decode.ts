// Greedy decoding with the encoder-decoder (twin: reference/runs/decode.py).
//
//   E = encode(src, srcLens)                          (N, S, d)    once
//   prefix_0 = [<bos>]                                (N, 1)
//   step t = 0, 1, ..., maxLen - 1:
//     logits = decode(prefix_t, E, srcLens)           (N, t+1, V)  the whole prefix, positions
//                                                                  0..t, causal mask
//     y_t = argmax_v logits[:, t, v]                  (N,)         first index on ties
//     margin_t = logits[y_t] - max_{v != y_t} logits[v]            >= 0; near 0 = near-tie
//     prefix_{t+1} = prefix_t + [y_t]
//   a row stops after emitting <eos>, or after maxLen tokens.
//
// This is decisions.md's decoder: every step re-runs the decoder over the whole prefix, so token
// t sits at position t, as in training. The book's cached decoder feeds one token per step and
// adds position 0's code to every one of them (docs/reversal.md); we do not copy that. Rows are
// decoded together; a row's tokens and margins depend only on that row (every operation is
// row-wise and a finished row's later tokens are never read), so a batch decodes exactly as its
// rows one by one. Shape legend: N inputs, S source steps, d model dim, H heads, V vocabulary.

import type { Named } from "../core/golden.ts";
import type { IntTensor, Tensor } from "../core/ops.ts";
import type { Params } from "../core/params.ts";
import { type TransformerConfig, transformerDecode, transformerEncode } from "../models/transformer.ts";

export interface Decoded {
  tokens: IntTensor; // (N, maxLen) emitted ids (<eos> included), -1 after the end
  margins: Tensor; // (N, maxLen) top-1 minus top-2 logit per step, 0 after the end
  lengths: IntTensor; // (N,) tokens emitted (<eos> included)
  crossWeights: Tensor[]; // per decoder block (N, H, T, S), the last decoder pass; row n's map is [n, :, :lengths[n], :]
}

/** logits (N, V), V >= 2 -> per row the first index of the largest logit and that logit minus
 *  the largest logit at any other index (0 on a tie). Maxima are exact in any order. */
export function topTwo(logits: Tensor): { best: IntTensor; margin: Tensor } {
  if (logits.shape.length !== 2 || logits.shape[1] < 2) {
    throw new RangeError(`topTwo: logits must be (N, V) with V >= 2, got [${logits.shape}]`);
  }
  const [N, V] = logits.shape;
  const best = new Int32Array(N), margin = new Float64Array(N);
  const x = logits.data;
  for (let n = 0; n < N; n++) {
    const row = n * V;
    let b = 0;
    for (let v = 1; v < V; v++) if (x[row + v] > x[row + b]) b = v;
    let second = -Infinity;
    for (let v = 0; v < V; v++) if (v !== b && x[row + v] > second) second = x[row + v];
    best[n] = b;
    margin[n] = x[row + b] - second;
  }
  return { best: { shape: [N], data: best }, margin: { shape: [N], data: margin } };
}

/** src (N, S), srcLens (N,) -> tokens, margins, lengths and the last pass's cross-attention. */
export function greedyDecode(
  params: Params, config: TransformerConfig, src: IntTensor, srcLens: IntTensor, maxLen: number, bos: number, eos: number,
): Decoded {
  const N = src.shape[0];
  const { out: encOut } = transformerEncode(src, srcLens, params, config); // (N, S, d)
  const tokens = new Int32Array(N * maxLen).fill(-1);
  const margins = new Float64Array(N * maxLen);
  const lengths = new Int32Array(N);
  const done = new Uint8Array(N);
  let prefix: IntTensor = { shape: [N, 1], data: new Int32Array(N).fill(bos) }; // (N, t+1)
  let crossWeights: Tensor[] = [];
  for (let t = 0; t < maxLen; t++) {
    const { out: logits, cache } = transformerDecode(prefix, encOut, srcLens, params, config); // (N, t+1, V)
    crossWeights = cache.blocks.map((b) => b.crossWeights);
    const V = logits.shape[2];
    const last: Tensor = { shape: [N, V], data: new Float64Array(N * V) };
    for (let n = 0; n < N; n++) last.data.set(logits.data.subarray((n * (t + 1) + t) * V, (n * (t + 1) + t + 1) * V), n * V);
    const { best, margin } = topTwo(last);
    let allDone = true;
    for (let n = 0; n < N; n++) {
      if (!done[n]) {
        tokens[n * maxLen + t] = best.data[n];
        margins[n * maxLen + t] = margin.data[n];
        lengths[n] = t + 1;
        if (best.data[n] === eos) done[n] = 1;
      }
      if (!done[n]) allDone = false;
    }
    if (allDone) break;
    const next = new Int32Array(N * (t + 2)); // finished rows run on, unread
    for (let n = 0; n < N; n++) {
      next.set(prefix.data.subarray(n * (t + 1), (n + 1) * (t + 1)), n * (t + 2));
      next[n * (t + 2) + t + 1] = best.data[n];
    }
    prefix = { shape: [N, t + 2], data: next };
  }
  return {
    tokens: { shape: [N, maxLen], data: tokens }, margins: { shape: [N, maxLen], data: margins },
    lengths: { shape: [N], data: lengths }, crossWeights,
  };
}

/** A baked run's held-out decodes as its outputs: decode.tokens (N, P), decode.margin (N, P),
 *  decode.exact (N,) and exact_match, the fraction of exact rows (a count over N). */
export function decodeOutputs(tokens: IntTensor, margins: Tensor, exact: IntTensor): Named {
  let count = 0;
  for (const e of exact.data) if (e !== 0) count++;
  return {
    "decode.tokens": tokens, "decode.margin": margins, "decode.exact": exact,
    exact_match: { shape: [], data: Float64Array.of(count / exact.shape[0]) },
  };
}
