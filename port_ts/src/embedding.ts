// Token embedding: a lookup of rows of the table E (twin: embedding.py).
// Shapes: tokens int (...) with ids in [0, V); E (V, d) -> out (..., d), out[..., :] = E[id, :].
// No arithmetic, so both engines agree bit for bit. An id outside [0, V) is an error.

import { type Tensor, type IntTensor, zeros } from "./ops.ts";

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
  const out = zeros([...tokens.shape, d]); // (..., d)
  for (let n = 0; n < tokens.data.length; n++) {
    const id = tokens.data[n];
    if (id < 0 || id >= V) {
      throw new RangeError(`embedding: token id ${id} at flat index ${n} is outside [0, ${V}); the vocabulary has ${V} rows`);
    }
    out.data.set(E.data.subarray(id * d, (id + 1) * d), n * d);
  }
  return { out, cache: { tokens, V } };
}
