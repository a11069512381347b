// Token embedding: a lookup of rows of the table E (twin: embedding.py).
// Shapes: tokens int (...) with ids in [0, V); E (V, d) -> out (..., d), out[..., :] = E[id, :].
// No arithmetic, so both engines agree bit for bit. An id outside [0, V) is an error.
// Backward: dE (V, d) starts at +0 and row id of dE gets dout[n, :] added for every token n in
// row-major order of tokens, so a repeated id accumulates its rows in token order.

import { type Tensor, type IntTensor, empty, zeros } from "../core/ops.ts";

export interface EmbeddingCache {
  tokens: IntTensor; // (...)
  V: number;
}

export function embeddingForward(tokens: IntTensor, E: Tensor): { out: Tensor; cache: EmbeddingCache } {
  if (!(tokens.data instanceof Int32Array)) {
    throw new TypeError("embedding: token ids must be an integer tensor (Int32Array)");
  }
  if (E.shape.length !== 2) throw new RangeError(`embedding: table E must be (V, d), got [${E.shape}]`);
  const V = E.shape[0], d = E.shape[1];
  const out = empty([...tokens.shape, d]); // (..., d)  every element written
  const T = tokens.data, O = out.data, W = E.data;
  for (let n = 0; n < T.length; n++) {
    const id = T[n];
    if (id < 0 || id >= V) {
      throw new RangeError(`embedding: token id ${id} at flat index ${n} is outside [0, ${V}); the vocabulary has ${V} rows`);
    }
    for (let k = 0, src = id * d, dst = n * d; k < d; k++) O[dst + k] = W[src + k]; // the row copied (no view per token)
  }
  return { out, cache: { tokens, V } };
}

/** Returns dE (V, d): dout's rows scattered back to their ids, accumulated in token order. */
export function embeddingBackward(dout: Tensor, cache: EmbeddingCache): Tensor {
  const { tokens, V } = cache;
  const n = tokens.shape.length;
  if (dout.shape.length !== n + 1 || tokens.shape.some((s, k) => s !== dout.shape[k])) {
    throw new RangeError(`embeddingBackward: dout must have shape [${tokens.shape},d], got [${dout.shape}]`);
  }
  const d = dout.shape[n];
  const dE = zeros([V, d]); // (V, d)
  const D = dout.data, G = dE.data;
  // inverts: out = E[tokens]
  for (let t = 0; t < tokens.data.length; t++) {
    const row = tokens.data[t] * d;
    for (let k = 0; k < d; k++) G[row + k] += D[t * d + k]; // in row-major token order
  }
  return dE;
}
