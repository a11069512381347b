// The Vision Transformer, forward to class logits (twin: reference/vit.py).
//
//   P = patches(img)                          (B, N, C*p*p)   patch (r, c) of the grid is row r*G + c;
//                                                             its values flattened in (channel, i, j) order
//   E = P W_patch^T + b_patch                 (B, N, d)       = Conv2d(C, d, p, stride=p) + flatten + transpose
//   X = drop(concat(cls, E) + pos)            (B, N+1, d)     <cls> PREPENDED at position 0
//   X = X + MHA(LN1(X))                       (B, N+1, d)     pre-norm blocks, no mask
//   X = X + MLP(LN2(X))                       (B, N+1, d)     MLP: Linear -> GELU (erf) -> drop -> Linear -> drop
//   logits = LN_head(X[:, 0]) W_head^T + b    (B, classes)
//
// Shape legend: B batch, C channels, H = W image side, p patch side, G = H/p patches per side,
// N = G*G patches, d model dim, M MLP hidden. Config: image, channels, patch, d, heads, mlp_hidden,
// blocks, classes, dropout (embedding, attention weights and both MLP dropouts).
//
// Parameters, in the order initVitParams draws them (PyTorch's defaults):
//   patch.W (d, C, p, p), patch.b (d,)  U(+-1/sqrt(C*p*p))
//   cls (d,) zeros; pos (N+1, d) N(0, 1)
//   blk{i}.ln1.*, blk{i}.attn.W_q..W_o (d, d), blk{i}.ln2.*, blk{i}.mlp.W1 (M, d)/b1/W2 (d, M)/b2
//   head.ln.*, head.W (classes, d), head.b (classes,)
// Dropout masks (p > 0) in forward order: embedding (B, N+1, d); per block: attention weights
// (B, H, N+1, N+1), MLP hidden (B, N+1, M), MLP output (B, N+1, d).

import type { Generator } from "./rng.ts";
import { type Tensor, zeros } from "./ops.ts";
import { type DropoutCache, dropoutForward } from "./dropout.ts";
import { type GeluCache, geluForward } from "./gelu.ts";
import { linearParams, patchEmbeddingParams } from "./init.ts";
import { type LayerNormCache, layerNormForward } from "./layerNorm.ts";
import { type LinearCache, linearForward } from "./linear.ts";
import { type MultiHeadAttentionCache, multiHeadAttentionForward } from "./multiHeadAttention.ts";
import { type Params, initFfnParams, initLayerNormParams, initMhaParams, param, subParams } from "./encoderBlock.ts";

export interface VitConfig {
  image: number; channels: number; patch: number; d: number; heads: number;
  mlp_hidden: number; blocks: number; classes: number; dropout: number;
}

/** The flat parameter record, keyed by dotted names, drawn in the order of the module doc. */
export function initVitParams(rng: Generator, config: VitConfig): Params {
  const { channels: C, patch: p, d } = config;
  const N = (Math.floor(config.image / p)) ** 2;
  const patch = patchEmbeddingParams(rng, d, C, p); // W (d, C*p*p): a conv's fan_in is C*p*p
  const params: Params = {
    "patch.W": { shape: [d, C, p, p], data: patch.W.data }, "patch.b": patch.b,
    "cls": zeros([d]), "pos": rng.normal([N + 1, d]),
  };
  for (let i = 0; i < config.blocks; i++) {
    Object.assign(params, initLayerNormParams(d, `blk${i}.ln1.`), initMhaParams(rng, d, `blk${i}.attn.`));
    Object.assign(params, initLayerNormParams(d, `blk${i}.ln2.`), initFfnParams(rng, d, config.mlp_hidden, `blk${i}.mlp.`));
  }
  Object.assign(params, initLayerNormParams(d, "head.ln."));
  const head = linearParams(rng, config.classes, d);
  params["head.W"] = head.W;
  params["head.b"] = head.b as Tensor;
  return params;
}

/** (B, C, H, W) -> (B, N, C*p*p): patch n = r*G + c holds images[:, :, r*p:(r+1)*p, c*p:(c+1)*p]
 *  flattened in (channel, i, j) order. */
export function patchify(images: Tensor, p: number): Tensor {
  const [B, C, H, W] = images.shape;
  if (H !== W || H % p !== 0) throw new RangeError(`vit: images must be square with a side divisible by the patch ${p}, got ${H}x${W}`);
  const G = H / p, K = C * p * p;
  const out = zeros([B, G * G, K]); // (B, N, C*p*p)
  const X = images.data, O = out.data;
  for (let b = 0; b < B; b++)
    for (let r = 0; r < G; r++)
      for (let c = 0; c < G; c++)
        for (let ch = 0; ch < C; ch++)
          for (let i = 0; i < p; i++)
            for (let j = 0; j < p; j++)
              O[(b * G * G + r * G + c) * K + (ch * p + i) * p + j] = X[((b * C + ch) * H + r * p + i) * W + c * p + j];
  return out;
}

/** images (B, C, H, W), W (d, C, p, p), b (d,) -> out (B, N, d). */
export function patchEmbeddingForward(images: Tensor, W: Tensor, b: Tensor): { out: Tensor; cache: { patches: Tensor; linear: LinearCache } } {
  const [d, C, p] = W.shape;
  const patches = patchify(images, p); // (B, N, C*p*p)
  const { out, cache: linear } = linearForward(patches, { shape: [d, C * p * p], data: W.data }, b); // (B, N, d)
  return { out, cache: { patches, linear } };
}

export interface VitMlpCache { lin1: LinearCache; gelu: GeluCache; drop1: DropoutCache; lin2: LinearCache; drop2: DropoutCache }

/** x (..., d) -> out (..., d): Linear -> GELU -> dropout -> Linear -> dropout. */
export function vitMlpForward(x: Tensor, params: Params, dropoutP = 0, rng: Generator | null = null): { out: Tensor; cache: VitMlpCache } {
  const { out: h, cache: lin1 } = linearForward(x, param(params, "W1"), param(params, "b1")); // (..., M)
  const { out: g, cache: gelu } = geluForward(h); // (..., M)
  const { out: gd, cache: drop1 } = dropoutForward(g, dropoutP, rng); // (..., M)
  const { out: y, cache: lin2 } = linearForward(gd, param(params, "W2"), param(params, "b2")); // (..., d)
  const { out, cache: drop2 } = dropoutForward(y, dropoutP, rng); // (..., d)
  return { out, cache: { lin1, gelu, drop1, lin2, drop2 } };
}

function add(a: Tensor, b: Tensor): Tensor {
  const out = zeros(a.shape);
  for (let i = 0; i < out.data.length; i++) out.data[i] = a.data[i] + b.data[i];
  return out;
}

export interface VitBlockCache { x: Tensor; ln1: LayerNormCache; attn: MultiHeadAttentionCache; ln2: LayerNormCache; mlp: VitMlpCache; weights: Tensor }

/** Pre-norm block, params stripped of blk{i}.: x (B, T, d) -> out (B, T, d). */
export function vitBlockForward(x: Tensor, params: Params, numHeads: number, dropoutP = 0, rng: Generator | null = null): { out: Tensor; cache: VitBlockCache } {
  const { out: n1, cache: ln1 } = layerNormForward(x, param(params, "ln1.gamma"), param(params, "ln1.beta")); // (B, T, d)
  const { out: a, cache: attn } = multiHeadAttentionForward(n1, n1, subParams(params, "attn."), numHeads, null, dropoutP, rng); // (B, T, d)
  const x1 = add(x, a); // (B, T, d)
  const { out: n2, cache: ln2 } = layerNormForward(x1, param(params, "ln2.gamma"), param(params, "ln2.beta")); // (B, T, d)
  const { out: m, cache: mlp } = vitMlpForward(n2, subParams(params, "mlp."), dropoutP, rng); // (B, T, d)
  const out = add(x1, m); // (B, T, d)
  return { out, cache: { x, ln1, attn, ln2, mlp, weights: attn.weights } };
}

/** images (B, C, H, W) -> logits (B, classes); cache.weights[i] (B, H, N+1, N+1) is block i's
 *  attention, row 0 the <cls> query. */
export function vitForward(images: Tensor, params: Params, config: VitConfig, rng: Generator | null = null) {
  const p = config.dropout;
  const { out: e, cache: patch } = patchEmbeddingForward(images, param(params, "patch.W"), param(params, "patch.b")); // (B, N, d)
  const [B, N, d] = e.shape;
  const cls = param(params, "cls").data, pos = param(params, "pos").data;
  const x0 = zeros([B, N + 1, d]); // (B, N+1, d)  row 0 <cls>, row n+1 patch n
  for (let b = 0; b < B; b++) {
    for (let k = 0; k < d; k++) x0.data[b * (N + 1) * d + k] = cls[k] + pos[k];
    for (let n = 0; n < N; n++)
      for (let k = 0; k < d; k++) x0.data[(b * (N + 1) + n + 1) * d + k] = e.data[(b * N + n) * d + k] + pos[(n + 1) * d + k];
  }
  const { out: xd, cache: dropout } = dropoutForward(x0, p, rng); // (B, N+1, d)
  let x = xd;
  const blocks: VitBlockCache[] = [];
  for (let i = 0; i < config.blocks; i++) {
    const blk = vitBlockForward(x, subParams(params, `blk${i}.`), config.heads, p, rng); // (B, N+1, d)
    x = blk.out;
    blocks.push(blk.cache);
  }
  const first = zeros([B, d]); // (B, d)  X[:, 0], the <cls> row
  for (let b = 0; b < B; b++) first.data.set(x.data.subarray(b * (N + 1) * d, b * (N + 1) * d + d), b * d);
  const { out: h, cache: headLn } = layerNormForward(first, param(params, "head.ln.gamma"), param(params, "head.ln.beta")); // (B, d)
  const { out: logits, cache: head } = linearForward(h, param(params, "head.W"), param(params, "head.b")); // (B, classes)
  return { out: logits, cache: { patch, dropout, blocks, headLn, head, weights: blocks.map((blk) => blk.weights) } };
}
