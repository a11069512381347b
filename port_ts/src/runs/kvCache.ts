// Greedy generation with the decoder-only model: by a key-value cache, and by full recomputation
// (twin: reference/runs/kv_cache.py; docs/kv_cache.md).
//
// A batch of prompts of different lengths is left-padded (leftPad): row n has pads[n] pad tokens,
// then its prompt, so every row's next token is at the same slot. Slot c of row n holds position
// c - pads[n], and the pads are masked keys.
//
//   cached:  logits, cache = decoderLmForward(prompts, pads)      prefill, (N, P, V)
//            K_i[:, :, 0:P], V_i[:, :, 0:P] = block i's keys, values  (N, H, S, D), S = P + G - 1 slots
//            y_0 = argmax logits[:, P-1]
//            step s = 1..G-1, slot c = P + s - 1, the new token y_{s-1} at position c - pads:
//                x = tok[y] + pos[c - pads]                          (N, 1, d)
//                per block: n1 = LN1(x); q, k, v = n1 W_in^T + b_in; K_i[:, :, c] = k; V_i[:, :, c] = v
//                           attend from the new position to slots 0..c (pads masked); x += attn;
//                           x += FFN(LN2(x))
//                y_s = argmax of LN_f(x) W_head^T + b_head
//   full:    step s = 0..G-1: logits = decoderLmForward(prompts + y_0..y_{s-1}, pads)[:, -1]
//
// Both give the same logits at every step, bit for bit in our engines: the cached step computes
// each of the new position's sums over the same terms in the same order as the full forward's
// last row, and a key the full forward masks has weight exactly +0, which adds nothing to any sum.
// For the same reason a left-padded row generates exactly what it generates alone. A row stops
// after emitting eos, or after G tokens; finished rows run on, unread; generation stops when
// every row has stopped.
// Shape legend: N prompts, P padded prompt length, G generated tokens, S slots, H heads, D head
// dim, d model dim, V vocabulary.

import { type IntTensor, type Tensor, zeros } from "../core/ops.ts";
import { type Params, addGrads, param, subParams } from "../core/params.ts";
import { type DecoderLmConfig, decoderLmForward } from "../models/decoderLm.ts";
import { embeddingForward } from "../nn/embedding.ts";
import { ffnForward } from "../nn/ffn.ts";
import { layerNormForward } from "../nn/layerNorm.ts";
import { maskedAttentionForward, splitQkv } from "../nn/lessonAttention.ts";
import { linearForward } from "../nn/linear.ts";
import { mergeHeads, splitHeads } from "../nn/multiHeadAttention.ts";
import { topTwo } from "./decode.ts";

export interface KvCache {
  k: Tensor[]; v: Tensor[]; // per block (N, H, S, D)
  next: number; // the slot the next token goes to
  pads: Int32Array; // (N,)
}

export interface Generated {
  tokens: IntTensor; // (N, G) emitted ids (eos included), -1 after the end
  margins: Tensor; // (N, G) top-1 minus top-2 logit per step, 0 after the end
  lengths: IntTensor; // (N,) tokens emitted (eos included)
  logits: Tensor; // (N, G, V) each step's logits, 0 after the end
}

/** A list of token lists -> prompts (N, P) and pads (N,): row n is pads[n] fills, then prompt n;
 *  P is the longest prompt's length. */
export function leftPad(prompts: readonly (readonly number[])[], fill: number): { prompts: IntTensor; pads: Int32Array } {
  const P = Math.max(...prompts.map((p) => p.length));
  if (Math.min(...prompts.map((p) => p.length)) < 1) throw new RangeError("leftPad: every prompt needs at least one token");
  const out = new Int32Array(prompts.length * P).fill(fill);
  const pads = new Int32Array(prompts.length);
  prompts.forEach((p, n) => {
    pads[n] = P - p.length;
    out.set(p, n * P + pads[n]);
  });
  return { prompts: { shape: [prompts.length, P], data: out }, pads };
}

/** The prompts' forward, and the cache (per block (N, H, slots, D) keys and values, slots 0..P-1
 *  filled). Returns the logits at the last prompt slot (N, V) and the cache. */
export function kvPrefill(params: Params, config: DecoderLmConfig, prompts: IntTensor, pads: Int32Array, slots: number): { out: Tensor; cache: KvCache } {
  const [N, P] = prompts.shape;
  const { out: logits, cache: model } = decoderLmForward(prompts, params, config, pads); // (N, P, V)
  const cache: KvCache = { k: [], v: [], next: P, pads };
  for (const blk of model.blocks) {
    const [, H, , D] = blk.attn.kh.shape; // (N, H, P, D)
    const K = zeros([N, H, slots, D]), V = zeros([N, H, slots, D]);
    for (let r = 0; r < N * H; r++) {
      K.data.set(blk.attn.kh.data.subarray(r * P * D, (r + 1) * P * D), r * slots * D);
      V.data.set(blk.attn.vh.data.subarray(r * P * D, (r + 1) * P * D), r * slots * D);
    }
    cache.k.push(K);
    cache.v.push(V);
  }
  const Vv = logits.shape[2];
  const last = zeros([N, Vv]);
  for (let n = 0; n < N; n++) last.data.set(logits.data.subarray((n * P + P - 1) * Vv, (n * P + P) * Vv), n * Vv);
  return { out: last, cache };
}

/** Slots 0..c of a cache tensor (N, H, S, D) -> (N, H, c + 1, D). */
function firstSlots(t: Tensor, c: number): Tensor {
  const [N, H, S, D] = t.shape;
  const out = zeros([N, H, c + 1, D]);
  for (let r = 0; r < N * H; r++) out.data.set(t.data.subarray(r * S * D, r * S * D + (c + 1) * D), r * (c + 1) * D);
  return out;
}

/** One new token per row, tokens (N,), at slot c = cache.next: its keys and values go to slot c of
 *  every block's cache, its query attends to slots 0..c. Returns logits (N, V). */
export function kvStep(params: Params, config: DecoderLmConfig, cache: KvCache, tokens: Int32Array): Tensor {
  const c = cache.next, pads = cache.pads, N = tokens.length, H = config.heads;
  const positions = new Int32Array(N);
  for (let n = 0; n < N; n++) positions[n] = c - pads[n];
  const { out: eTok } = embeddingForward({ shape: [N, 1], data: tokens }, param(params, "tok")); // (N, 1, d)
  const { out: ePos } = embeddingForward({ shape: [N, 1], data: positions }, param(params, "pos")); // (N, 1, d)
  let x = addGrads(eTok, ePos); // (N, 1, d)
  const keepData = new Uint8Array(N * (c + 1)); // (N, 1, c + 1): the pads masked
  for (let n = 0; n < N; n++) for (let k = 0; k <= c; k++) keepData[n * (c + 1) + k] = k >= pads[n] ? 1 : 0;
  const keep = { shape: [N, 1, c + 1], data: keepData };
  for (let i = 0; i < config.blocks; i++) {
    const p = subParams(params, `blk${i}.`);
    const { out: n1 } = layerNormForward(x, param(p, "ln1.gamma"), param(p, "ln1.beta")); // (N, 1, d)
    const { out: qkv } = linearForward(n1, param(p, "attn.W_in"), param(p, "attn.b_in")); // (N, 1, 3d)
    const { q, k, v } = splitQkv(qkv); // (N, 1, d) each
    const K = cache.k[i], V = cache.v[i]; // (N, H, S, D)
    const [, , S, D] = K.shape;
    const kh = splitHeads(k, H), vh = splitHeads(v, H); // (N, H, 1, D)
    for (let r = 0; r < N * H; r++) {
      K.data.set(kh.data.subarray(r * D, (r + 1) * D), (r * S + c) * D);
      V.data.set(vh.data.subarray(r * D, (r + 1) * D), (r * S + c) * D);
    }
    const { out: heads } = maskedAttentionForward(splitHeads(q, H), firstSlots(K, c), firstSlots(V, c), keep); // (N, H, 1, D)
    const { out: a } = linearForward(mergeHeads(heads), param(p, "attn.W_o"), param(p, "attn.b_o")); // (N, 1, d)
    x = addGrads(x, a); // (N, 1, d)
    const { out: n2 } = layerNormForward(x, param(p, "ln2.gamma"), param(p, "ln2.beta")); // (N, 1, d)
    const { out: g } = ffnForward(n2, subParams(p, "ffn.")); // (N, 1, d)
    x = addGrads(x, g); // (N, 1, d)
  }
  cache.next = c + 1;
  const { out: h } = layerNormForward(x, param(params, "ln_f.gamma"), param(params, "ln_f.beta")); // (N, 1, d)
  const { out: logits } = linearForward(h, param(params, "head.W"), param(params, "head.b")); // (N, 1, V)
  return { shape: [N, logits.shape[2]], data: logits.data };
}

/** The greedy loop shared by both ways: first() -> logits (N, V) of step 0, nextLogits(s, y) ->
 *  logits (N, V) of step s after the tokens y (N,) of step s - 1. */
function greedy(first: () => Tensor, nextLogits: (s: number, y: Int32Array) => Tensor, N: number, steps: number, eos: number): Generated {
  const tokens = new Int32Array(N * steps).fill(-1);
  const margins = new Float64Array(N * steps);
  const lengths = new Int32Array(N);
  const done = new Uint8Array(N);
  let all: Float64Array | null = null, V = 0;
  let y: Int32Array = new Int32Array(N);
  for (let s = 0; s < steps; s++) {
    const logits = s === 0 ? first() : nextLogits(s, y); // (N, V)
    if (all === null) { V = logits.shape[1]; all = new Float64Array(N * steps * V); }
    const { best, margin } = topTwo(logits);
    y = best.data;
    let allDone = true;
    for (let n = 0; n < N; n++) {
      if (!done[n]) {
        tokens[n * steps + s] = y[n];
        margins[n * steps + s] = margin.data[n];
        lengths[n] = s + 1;
        all.set(logits.data.subarray(n * V, (n + 1) * V), (n * steps + s) * V);
        if (y[n] === eos) done[n] = 1;
      }
      if (!done[n]) allDone = false;
    }
    if (allDone) break;
  }
  return {
    tokens: { shape: [N, steps], data: tokens }, margins: { shape: [N, steps], data: margins },
    lengths: { shape: [N], data: lengths }, logits: { shape: [N, steps, V], data: all ?? new Float64Array(0) },
  };
}

/** Greedy generation through the cache: tokens, margins, lengths, logits (N, G, V). */
export function generateCached(params: Params, config: DecoderLmConfig, prompts: IntTensor, pads: Int32Array, steps: number, eos: number): Generated {
  const [N, P] = prompts.shape;
  let cache: KvCache | null = null;
  const first = () => {
    const pre = kvPrefill(params, config, prompts, pads, P + steps - 1);
    cache = pre.cache;
    return pre.out;
  };
  return greedy(first, (_s, y) => kvStep(params, config, cache!, y), N, steps, eos);
}

/** Greedy generation by full recomputation: every step runs the whole prefix again. */
export function generateFull(params: Params, config: DecoderLmConfig, prompts: IntTensor, pads: Int32Array, steps: number, eos: number): Generated {
  const N = prompts.shape[0];
  let prefix = prompts;
  const logitsOf = (pre: IntTensor): Tensor => {
    const { out } = decoderLmForward(pre, params, config, pads); // (N, T, V)
    const [, T, V] = out.shape;
    const last = zeros([N, V]);
    for (let n = 0; n < N; n++) last.data.set(out.data.subarray((n * T + T - 1) * V, (n * T + T) * V), n * V);
    return last;
  };
  const nextLogits = (_s: number, y: Int32Array): Tensor => {
    const T = prefix.shape[1];
    const next = new Int32Array(N * (T + 1)); // (N, P + s)
    for (let n = 0; n < N; n++) {
      next.set(prefix.data.subarray(n * T, (n + 1) * T), n * (T + 1));
      next[n * (T + 1) + T] = y[n];
    }
    prefix = { shape: [N, T + 1], data: next };
    return logitsOf(prefix);
  };
  return greedy(() => logitsOf(prompts), nextLogits, N, steps, eos);
}
