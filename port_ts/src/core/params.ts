// Parameter records (twin: reference/core/params.py).
//
// A model's parameters are one record keyed by dotted names (enc.blk0.attn.W_q); a block or a
// sub-layer takes its own out of it with subParams(params, "enc.blk0.") and reads each by its
// stripped name with param. addGrads adds the two gradients of a tensor used twice.

import { type Tensor, empty } from "./ops.ts";

export type Params = Record<string, Tensor>;

/** The entries of params whose names start with prefix, with the prefix removed. */
export function subParams(params: Params, prefix: string): Params {
  const out: Params = {};
  for (const [name, value] of Object.entries(params)) {
    if (name.startsWith(prefix)) out[name.slice(prefix.length)] = value;
  }
  return out;
}

/** The blocks' gradients under one name each, `${prefix}${i}.${name}` (the inverse of subParams),
 *  block by block in order. */
export function prefixedParams(blocks: Params[], prefix: string): Params {
  const out: Params = {};
  blocks.forEach((block, i) => { for (const [name, value] of Object.entries(block)) out[`${prefix}${i}.${name}`] = value; });
  return out;
}

/** A parameter by name, or an error that lists what is there. */
export function param(params: Params, name: string): Tensor {
  const t = params[name];
  if (t === undefined) throw new RangeError(`params needs '${name}'; found [${Object.keys(params).sort().join(", ")}]`);
  return t;
}

/** a + b elementwise, a new tensor of a's shape (the += of a tensor used twice); with c,
 * (a + b) + c in the same pass (a tensor used three times: the two rounded adds in that order). */
export function addGrads(a: Tensor, b: Tensor, c: Tensor | null = null): Tensor {
  for (const t of c === null ? [b] : [b, c]) {
    if (a.shape.length !== t.shape.length || a.shape.some((n, i) => n !== t.shape[i])) throw new RangeError(`addGrads: shapes [${a.shape}] and [${t.shape}] differ`);
  }
  const out = empty(a.shape); // every element written
  const O = out.data, A = a.data, B = b.data;
  if (c === null) for (let i = 0; i < O.length; i++) O[i] = A[i] + B[i];
  else {
    const C = c.data;
    for (let i = 0; i < O.length; i++) O[i] = (A[i] + B[i]) + C[i];
  }
  return out;
}

/** A copy of every tensor of a record, in its order, each a fresh array (out of a workspace). */
export function copyParams(params: Params): Params {
  const out: Params = {};
  for (const [name, value] of Object.entries(params)) out[name] = { shape: [...value.shape], data: value.data.slice() };
  return out;
}
