// The Vision Transformer, forward to class logits (twin: reference/models/vit.py).
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
//
// Backward: each *Backward sits below its forward, takes its cache and walks it in reverse. A
// tensor used twice gets its gradients added in one fixed order, the same in both engines:
//   block:  dX1 = dOut + dX1_ln2       the residual, then the MLP branch through LN2
//           dN1 = dN1_query + dN1_kv   LN1's output is the queries and the keys/values
//           dX  = dX1 + dX_ln1         the residual, then the attention branch through LN1
//   model:  dcls = sum over b of dX0[b, 0], dpos = sum over b of dX0[b]   in batch order from +0
// vitBackward returns every parameter's gradient under its name, in init order.
// Traced (core/trace.ts): the sub-layers embedding, blk{i}.attention, blk{i}.mlp and head, forward
// and backward.
// vitLoss / vitLossBackward add the mean cross-entropy of the logits against integer labels.

import type { Generator } from "../core/rng.ts";
import { type Tensor, type IntTensor, empty, zeros } from "../core/ops.ts";
import { type DropoutCache, dropoutBackward, dropoutForward } from "../nn/dropout.ts";
import { type GeluCache, geluBackward, geluForward } from "../nn/gelu.ts";
import { linearParams, patchEmbeddingParams } from "../nn/init.ts";
import { type LayerNormCache, layerNormBackward, layerNormForward } from "../nn/layerNorm.ts";
import { type LinearCache, linearBackward, linearForward } from "../nn/linear.ts";
import { type CrossEntropyCache, crossEntropyBackward, crossEntropyForward } from "../nn/loss.ts";
import { type MultiHeadAttentionCache, multiHeadAttentionBackward, multiHeadAttentionForward } from "../nn/multiHeadAttention.ts";
import { type Params, param, subParams } from "../core/params.ts";
import { initFfnParams, initLayerNormParams, initMhaParams } from "../nn/encoderBlock.ts";
import { backward, scope, sublayer } from "../core/trace.ts";

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

/** dpatches (B, N, C*p*p) -> (B, C, H, W): every patch value back to its pixel, the inverse
 *  permutation of patchify (patches do not overlap, so nothing is summed). */
export function patchifyBackward(dpatches: Tensor, imageShape: readonly number[], p: number): Tensor {
  const [B, C, H, W] = imageShape;
  const G = H / p, K = C * p * p;
  const out = zeros(imageShape); // (B, C, H, W)
  const D = dpatches.data, O = out.data;
  for (let b = 0; b < B; b++)
    for (let r = 0; r < G; r++)
      for (let c = 0; c < G; c++)
        for (let ch = 0; ch < C; ch++)
          for (let i = 0; i < p; i++)
            for (let j = 0; j < p; j++)
              O[((b * C + ch) * H + r * p + i) * W + c * p + j] = D[(b * G * G + r * G + c) * K + (ch * p + i) * p + j];
  return out;
}

export interface PatchEmbeddingCache { patches: Tensor; linear: LinearCache; imageShape: number[]; WShape: number[] }

/** images (B, C, H, W), W (d, C, p, p), b (d,) -> out (B, N, d). */
export function patchEmbeddingForward(images: Tensor, W: Tensor, b: Tensor): { out: Tensor; cache: PatchEmbeddingCache } {
  const [d, C, p] = W.shape;
  const patches = patchify(images, p); // (B, N, C*p*p)
  const { out, cache: linear } = linearForward(patches, { shape: [d, C * p * p], data: W.data }, b); // (B, N, d)
  return { out, cache: { patches, linear, imageShape: [...images.shape], WShape: [...W.shape] } };
}

/** dout (B, N, d) -> dimages (B, C, H, W), dW (d, C, p, p), db (d,). */
export function patchEmbeddingBackward(dout: Tensor, cache: PatchEmbeddingCache): { dimages: Tensor; dW: Tensor; db: Tensor } {
  const p = cache.WShape[2];
  const { dx: dpatches, dW, db } = linearBackward(dout, cache.linear); // inverts: E = P W_patch^T + b_patch
  const dimages = patchifyBackward(dpatches, cache.imageShape, p); // inverts: P = patches(img)
  return { dimages, dW: { shape: [...cache.WShape], data: dW.data }, db: db as Tensor };
}

/** dropout, p = 0 being the identity without dropout's copy (x itself; its readers only read). */
function drop(x: Tensor, p: number, rng: Generator | null): { out: Tensor; cache: DropoutCache } {
  return p === 0 ? { out: x, cache: { mask: null, p: 0 } } : dropoutForward(x, p, rng);
}

/** dropoutBackward, p = 0 passing dout itself. */
function dropBackward(dout: Tensor, cache: DropoutCache): Tensor {
  return cache.mask === null ? dout : dropoutBackward(dout, cache);
}

export interface VitMlpCache { lin1: LinearCache; gelu: GeluCache; drop1: DropoutCache; lin2: LinearCache; drop2: DropoutCache }

/** x (..., d) -> out (..., d): Linear -> GELU -> dropout -> Linear -> dropout. */
export function vitMlpForward(x: Tensor, params: Params, dropoutP = 0, rng: Generator | null = null): { out: Tensor; cache: VitMlpCache } {
  const { out: h, cache: lin1 } = linearForward(x, param(params, "W1"), param(params, "b1")); // (..., M)
  const { out: g, cache: gelu } = geluForward(h); // (..., M)
  const { out: gd, cache: drop1 } = drop(g, dropoutP, rng); // (..., M)
  const { out: y, cache: lin2 } = linearForward(gd, param(params, "W2"), param(params, "b2")); // (..., d)
  const { out, cache: drop2 } = drop(y, dropoutP, rng); // (..., d)
  return { out, cache: { lin1, gelu, drop1, lin2, drop2 } };
}

/** dout (..., d) -> dx (..., d), grads { W1, b1, W2, b2 }. */
export function vitMlpBackward(dout: Tensor, cache: VitMlpCache): { dx: Tensor; grads: Record<string, Tensor> } {
  const dy = dropBackward(dout, cache.drop2); // inverts: out = dropout(y)
  const { dx: dgd, dW: dW2, db: db2 } = linearBackward(dy, cache.lin2); // inverts: y = g W2^T + b2
  const dg = dropBackward(dgd, cache.drop1); // inverts: g = dropout(g)
  const dh = geluBackward(dg, cache.gelu); // inverts: g = GELU(h)
  const { dx, dW: dW1, db: db1 } = linearBackward(dh, cache.lin1); // inverts: h = x W1^T + b1
  return { dx, grads: { W1: dW1, b1: db1 as Tensor, W2: dW2, b2: db2 as Tensor } };
}

function add(a: Tensor, b: Tensor): Tensor {
  const out = empty(a.shape); // every element written
  for (let i = 0; i < out.data.length; i++) out.data[i] = a.data[i] + b.data[i];
  return out;
}

export interface VitBlockCache { x: Tensor; ln1: LayerNormCache; attn: MultiHeadAttentionCache; ln2: LayerNormCache; mlp: VitMlpCache; weights: Tensor }

/** Pre-norm block, params stripped of blk{i}.: x (B, T, d) -> out (B, T, d). */
/** The block's first half, x + MHA(LN1(x)): x (B, T, d) -> x1 (B, T, d). */
export function vitAttentionForward(x: Tensor, params: Params, numHeads: number, dropoutP = 0, rng: Generator | null = null): { out: Tensor; cache: { ln1: LayerNormCache; attn: MultiHeadAttentionCache } } {
  const { out: n1, cache: ln1 } = layerNormForward(x, param(params, "ln1.gamma"), param(params, "ln1.beta")); // (B, T, d)
  const { out: a, cache: attn } = multiHeadAttentionForward(n1, n1, subParams(params, "attn."), numHeads, null, dropoutP, rng); // (B, T, d)
  const x1 = add(x, a); // (B, T, d)
  return { out: x1, cache: { ln1, attn } };
}

/** The block's second half, x1 + MLP(LN2(x1)): x1 (B, T, d) -> out (B, T, d). */
export function vitFeedforwardForward(x1: Tensor, params: Params, dropoutP = 0, rng: Generator | null = null): { out: Tensor; cache: { ln2: LayerNormCache; mlp: VitMlpCache } } {
  const { out: n2, cache: ln2 } = layerNormForward(x1, param(params, "ln2.gamma"), param(params, "ln2.beta")); // (B, T, d)
  const { out: m, cache: mlp } = vitMlpForward(n2, subParams(params, "mlp."), dropoutP, rng); // (B, T, d)
  const out = add(x1, m); // (B, T, d)
  return { out, cache: { ln2, mlp } };
}

/** Traced sub-layers (core/trace.ts): attention (the first half), mlp (the second), forward and backward. */
export function vitBlockForward(x: Tensor, params: Params, numHeads: number, dropoutP = 0, rng: Generator | null = null): { out: Tensor; cache: VitBlockCache } {
  const { out: x1, cache: first } = sublayer("attention", vitAttentionForward, x, params, numHeads, dropoutP, rng); // (B, T, d)
  const { out, cache: second } = sublayer("mlp", vitFeedforwardForward, x1, params, dropoutP, rng); // (B, T, d)
  return { out, cache: { x, ln1: first.ln1, attn: first.attn, ln2: second.ln2, mlp: second.mlp, weights: first.attn.weights } };
}

/** The block's second half: dout (B, T, d) -> dx (B, T, d) (x1's), dgamma, dbeta (d,) (LN2's),
 *  grads { W1, b1, W2, b2 }. */
export function vitFeedforwardBackward(dout: Tensor, cache: VitBlockCache): { dx: Tensor; dgamma: Tensor; dbeta: Tensor; grads: Params } {
  // inverts: out = x1 + m; m = MLP(n2)
  const { dx: dn2, grads: mlp } = vitMlpBackward(dout, cache.mlp); // (B, T, d)
  // inverts: n2 = LN2(x1)
  const { dx: dx1Ln, dgamma, dbeta } = layerNormBackward(dn2, cache.ln2); // (B, T, d)
  const dx1 = add(dout, dx1Ln); // x1 feeds the residual and LN2
  return { dx: dx1, dgamma, dbeta, grads: mlp };
}

/** The block's first half: dx1 (B, T, d) -> dx (B, T, d), dgamma, dbeta (d,) (LN1's),
 *  grads { W_q, W_k, W_v, W_o }. */
export function vitAttentionBackward(dx1: Tensor, cache: VitBlockCache): { dx: Tensor; dgamma: Tensor; dbeta: Tensor; grads: Params } {
  // inverts: x1 = x + a; a = MHA(n1, n1)
  const { dxQ: dn1Q, dxKv: dn1Kv, grads: attn } = multiHeadAttentionBackward(dx1, cache.attn); // (B, T, d) each
  const dn1 = add(dn1Q, dn1Kv); // n1 is both the queries and the keys/values
  // inverts: n1 = LN1(x)
  const { dx: dxLn, dgamma, dbeta } = layerNormBackward(dn1, cache.ln1); // (B, T, d)
  const dx = add(dx1, dxLn); // x feeds the residual and LN1
  return { dx, dgamma, dbeta, grads: attn };
}

/** dout (B, T, d) -> dx (B, T, d), grads under the stripped names, in init order. */
export function vitBlockBackward(dout: Tensor, cache: VitBlockCache): { dx: Tensor; grads: Params } {
  const { dx: dx1, dgamma: dgamma2, dbeta: dbeta2, grads: mlp } = backward("mlp", vitFeedforwardBackward, dout, cache); // (B, T, d)
  const { dx, dgamma: dgamma1, dbeta: dbeta1, grads: attn } = backward("attention", vitAttentionBackward, dx1, cache); // (B, T, d)
  const grads: Params = { "ln1.gamma": dgamma1, "ln1.beta": dbeta1 };
  for (const name of ["W_q", "W_k", "W_v", "W_o"]) grads[`attn.${name}`] = attn[name];
  grads["ln2.gamma"] = dgamma2;
  grads["ln2.beta"] = dbeta2;
  for (const name of ["W1", "b1", "W2", "b2"]) grads[`mlp.${name}`] = mlp[name];
  return { dx, grads };
}

/** images (B, C, H, W) -> logits (B, classes); cache.weights[i] (B, H, N+1, N+1) is block i's
 *  attention, row 0 the <cls> query. */
export function vitForward(images: Tensor, params: Params, config: VitConfig, rng: Generator | null = null): { out: Tensor; cache: VitCache } {
  const p = config.dropout;
  const { out: xd, cache: embed } = sublayer("embedding", vitEmbedForward, images, params, p, rng); // (B, N+1, d)
  let x = xd;
  const blocks: VitBlockCache[] = [];
  for (let i = 0; i < config.blocks; i++) {
    scope(`blk${i}.`); // names the block's traced sub-layers
    const blk = vitBlockForward(x, subParams(params, `blk${i}.`), config.heads, p, rng); // (B, N+1, d)
    x = blk.out;
    blocks.push(blk.cache);
  }
  scope("");
  const { out: logits, cache: head } = sublayer("head", vitHeadForward, x, params); // (B, classes)
  const cache: VitCache = {
    patch: embed.patch, dropout: embed.dropout, blocks, headLn: head.headLn, head: head.head,
    weights: blocks.map((blk) => blk.weights), tokens: [...x.shape],
  };
  return { out: logits, cache };
}

/** images (B, C, H, W) -> x (B, N+1, d): the patches embedded, <cls> put first, the positions added, dropout. */
export function vitEmbedForward(images: Tensor, params: Params, dropoutP = 0, rng: Generator | null = null): { out: Tensor; cache: { patch: PatchEmbeddingCache; dropout: DropoutCache } } {
  const { out: e, cache: patch } = patchEmbeddingForward(images, param(params, "patch.W"), param(params, "patch.b")); // (B, N, d)
  const [B, N, d] = e.shape;
  const cls = param(params, "cls").data, pos = param(params, "pos").data;
  const x0 = zeros([B, N + 1, d]); // (B, N+1, d)  row 0 <cls>, row n+1 patch n
  for (let b = 0; b < B; b++) {
    for (let k = 0; k < d; k++) x0.data[b * (N + 1) * d + k] = cls[k] + pos[k];
    for (let n = 0; n < N; n++)
      for (let k = 0; k < d; k++) x0.data[(b * (N + 1) + n + 1) * d + k] = e.data[(b * N + n) * d + k] + pos[(n + 1) * d + k];
  }
  const { out: x, cache: dropout } = drop(x0, dropoutP, rng); // (B, N+1, d)
  return { out: x, cache: { patch, dropout } };
}

/** x (B, N+1, d) -> logits (B, classes): LN then Linear of the <cls> row. */
export function vitHeadForward(x: Tensor, params: Params): { out: Tensor; cache: { headLn: LayerNormCache; head: LinearCache } } {
  const [B, T, d] = x.shape;
  const first = zeros([B, d]); // (B, d)  X[:, 0], the <cls> row
  for (let b = 0; b < B; b++) first.data.set(x.data.subarray(b * T * d, b * T * d + d), b * d);
  const { out: h, cache: headLn } = layerNormForward(first, param(params, "head.ln.gamma"), param(params, "head.ln.beta")); // (B, d)
  const { out: logits, cache: head } = linearForward(h, param(params, "head.W"), param(params, "head.b")); // (B, classes)
  return { out: logits, cache: { headLn, head } };
}

export interface VitCache {
  patch: PatchEmbeddingCache; dropout: DropoutCache; blocks: VitBlockCache[]; headLn: LayerNormCache; head: LinearCache;
  weights: Tensor[]; // per block (B, H, N+1, N+1)
  tokens: number[]; // [B, N+1, d]
}

/** dlogits (B, classes) -> dx (B, N+1, d), dgamma, dbeta (d,), dW (classes, d), db (classes,) of
 *  the head's LN and Linear; cache the model's. */
export function vitHeadBackward(dlogits: Tensor, cache: VitCache): { dx: Tensor; dgamma: Tensor; dbeta: Tensor; dW: Tensor; db: Tensor } {
  const [B, T, d] = cache.tokens;
  // inverts: logits = LN_head(X[:, 0]) W_head^T + b
  const { dx: dh, dW, db } = linearBackward(dlogits, cache.head); // (B, d)
  const { dx: dfirst, dgamma, dbeta } = layerNormBackward(dh, cache.headLn); // (B, d)
  const dx = zeros([B, T, d]); // (B, N+1, d): only the <cls> row reaches the head
  for (let b = 0; b < B; b++) dx.data.set(dfirst.data.subarray(b * d, b * d + d), b * T * d);
  return { dx, dgamma, dbeta, dW, db: db as Tensor };
}

/** dx (B, N+1, d) -> dW (d, C, p, p), db (d,) (the patch embedding's), dcls (d,), dpos (N+1, d);
 *  cache the model's. */
export function vitEmbedBackward(dx: Tensor, cache: VitCache): { dW: Tensor; db: Tensor; dcls: Tensor; dpos: Tensor } {
  const [B, T, d] = cache.tokens;
  // inverts: X = drop(concat(cls, E) + pos)
  const dx0 = dropBackward(dx, cache.dropout); // (B, N+1, d)
  const dpos = zeros([T, d]); // (N+1, d)  pos is added to every image: in batch order from +0
  for (let b = 0; b < B; b++)
    for (let k = 0; k < T * d; k++) dpos.data[k] = dpos.data[k] + dx0.data[b * T * d + k];
  const dcls = zeros([d]); // (d,)  <cls> is row 0 of every image
  for (let b = 0; b < B; b++)
    for (let k = 0; k < d; k++) dcls.data[k] = dcls.data[k] + dx0.data[b * T * d + k];
  const de = zeros([B, T - 1, d]); // (B, N, d)  the patch rows
  for (let b = 0; b < B; b++) de.data.set(dx0.data.subarray(b * T * d + d, (b + 1) * T * d), b * (T - 1) * d);
  const { dW, db } = patchEmbeddingBackward(de, cache.patch); // inverts: E = patch_embed(img)
  return { dW, db, dcls, dpos };
}

/** dlogits (B, classes) -> grads keyed by every parameter name, in init order. */
export function vitBackward(dlogits: Tensor, cache: VitCache): Params {
  const { dx: dx0, dgamma: dgammaHead, dbeta: dbetaHead, dW: dWHead, db: dbHead } = backward("head", vitHeadBackward, dlogits, cache);
  let dx = dx0;
  const blockGrads: Params[] = new Array(cache.blocks.length);
  for (let i = cache.blocks.length - 1; i >= 0; i--) {
    scope(`blk${i}.`); // names the block's traced backwards
    const blk = vitBlockBackward(dx, cache.blocks[i]); // inverts: X = block_i(X)
    dx = blk.dx;
    blockGrads[i] = blk.grads;
  }
  scope("");
  const { dW: dWPatch, db: dbPatch, dcls, dpos } = backward("embedding", vitEmbedBackward, dx, cache);
  const grads: Params = { "patch.W": dWPatch, "patch.b": dbPatch, cls: dcls, pos: dpos };
  blockGrads.forEach((bg, i) => { for (const [name, g] of Object.entries(bg)) grads[`blk${i}.${name}`] = g; });
  Object.assign(grads, { "head.ln.gamma": dgammaHead, "head.ln.beta": dbetaHead, "head.W": dWHead, "head.b": dbHead as Tensor });
  return grads;
}

export interface VitLossCache { logits: Tensor; model: VitCache; ce: CrossEntropyCache }

/** Mean cross-entropy of the logits against labels (B,) in [0, classes). Returns the loss and a
 *  cache: cache.logits (B, classes), cache.model the forward's cache, cache.ce the loss's cache.
 *  Dropout p > 0 needs rng (masks drawn in forward order). */
export function vitLoss(
  params: Params, config: VitConfig, images: Tensor, labels: IntTensor, rng: Generator | null = null,
): { loss: number; cache: VitLossCache } {
  const { out: logits, cache: model } = vitForward(images, params, config, rng); // (B, classes)
  const { loss, cache: ce } = crossEntropyForward(logits, labels);
  return { loss, cache: { logits, model, ce } };
}

/** The gradient of vitLoss's loss (dloss = 1) -> grads keyed by the parameter names. */
export function vitLossBackward(cache: VitLossCache): Params {
  const dlogits = crossEntropyBackward(cache.ce); // (B, classes)  inverts: loss = CE(logits, labels)
  return vitBackward(dlogits, cache.model);
}
