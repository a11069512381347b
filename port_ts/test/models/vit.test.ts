// The ViT: patch order (row-major over the grid, (channel, i, j) inside a patch), the patch
// embedding against a direct convolution, <cls> prepended at position 0 and read by the head,
// parameter order, shapes and the dropout draws; the backward against central differences written
// here, patchify's inverse, the <cls>/pos[0] gradients and the reuse of the dropout masks.
import { test } from "node:test";
import assert from "node:assert/strict";
import { Generator } from "../../src/core/rng.ts";
import { tensor, zeros, type Tensor } from "../../src/core/ops.ts";
import {
  initVitParams, patchEmbeddingForward, patchify, patchifyBackward, vitBackward, vitForward, vitLoss, vitLossBackward, type VitConfig,
} from "../../src/models/vit.ts";
import { centralDifference, tolerance } from "../toolkit.ts";

const DIRECT = tolerance("vit_patch_embedding", "direct").value;
const LN_ONLY = tolerance("vit", "ln_only").value;

const SMALL: VitConfig = { image: 8, channels: 3, patch: 4, d: 8, heads: 2, mlp_hidden: 16, blocks: 2, classes: 5, dropout: 0 };

function arange(shape: number[]): Tensor {
  const t = zeros(shape);
  for (let i = 0; i < t.data.length; i++) t.data[i] = i;
  return t;
}

test("patchify: patch r*G + c, values in (channel, i, j) order", () => {
  const images = arange([1, 2, 4, 4]); // C = 2, H = W = 4, p = 2, G = 2
  const p = patchify(images, 2);
  assert.deepEqual(p.shape, [1, 4, 8]);
  const patch = (n: number) => Array.from(p.data.subarray(n * 8, (n + 1) * 8));
  assert.deepEqual(patch(0), [0, 1, 4, 5, 16, 17, 20, 21]);
  assert.deepEqual(patch(1), [2, 3, 6, 7, 18, 19, 22, 23]); // top right: the grid is row-major
  assert.deepEqual(patch(2), [8, 9, 12, 13, 24, 25, 28, 29]);
  assert.deepEqual(patch(3), [10, 11, 14, 15, 26, 27, 30, 31]);
});

test("patch embedding equals a stride-p convolution written as a direct loop", () => {
  const rng = new Generator(30);
  const B = 2, C = 3, H = 8, p = 2, d = 5, G = H / p;
  const images = rng.uniform([B, C, H, H]), W = rng.normal([d, C, p, p]), b = rng.normal([d]);
  const { out } = patchEmbeddingForward(images, W, b);
  assert.deepEqual(out.shape, [B, G * G, d]);
  for (let n = 0; n < B; n++)
    for (let r = 0; r < G; r++)
      for (let c = 0; c < G; c++)
        for (let o = 0; o < d; o++) {
          let acc = b.data[o];
          for (let ch = 0; ch < C; ch++)
            for (let i = 0; i < p; i++)
              for (let j = 0; j < p; j++)
                acc += W.data[((o * C + ch) * p + i) * p + j] * images.data[((n * C + ch) * H + r * p + i) * H + c * p + j];
          assert.ok(Math.abs(out.data[((n * G * G) + r * G + c) * d + o] - acc) <= DIRECT);
        }
});

test("parameters in the documented order, cls zeros, pos (N+1, d)", () => {
  const params = initVitParams(new Generator(31), SMALL);
  const names = Object.keys(params);
  assert.deepEqual(names.slice(0, 4), ["patch.W", "patch.b", "cls", "pos"]);
  assert.deepEqual(names.slice(4, 8), ["blk0.ln1.gamma", "blk0.ln1.beta", "blk0.attn.W_q", "blk0.attn.W_k"]);
  assert.deepEqual(names.slice(-4), ["head.ln.gamma", "head.ln.beta", "head.W", "head.b"]);
  assert.deepEqual(params["patch.W"].shape, [8, 3, 4, 4]);
  assert.deepEqual(params.pos.shape, [5, 8]);
  assert.ok(params.cls.data.every((v) => v === 0));
  assert.deepEqual(params["blk1.mlp.W1"].shape, [16, 8]);
});

test("<cls> is prepended: with no blocks the logits are head(LN(cls + pos[0])), whatever the image", () => {
  const config = { ...SMALL, blocks: 0, d: 4, classes: 2 };
  const rng = new Generator(32);
  const params = initVitParams(rng, config);
  params.cls = tensor([4], [0.5, -1, 2, 0.25]);
  const x = [0, 1, 2, 3].map((k) => params.cls.data[k] + params.pos.data[k]);
  const m = x.reduce((a, v) => a + v, 0) / 4;
  const rstd = 1 / Math.sqrt(x.reduce((a, v) => a + (v - m) ** 2, 0) / 4 + 1e-5);
  const n = x.map((v) => (v - m) * rstd);
  const want = [0, 1].map((c) => n.reduce((a, v, k) => a + v * params["head.W"].data[c * 4 + k], 0) + params["head.b"].data[c]);
  for (const seed of [1, 2]) {
    const { out } = vitForward(new Generator(seed).uniform([3, 3, 8, 8]), params, config);
    for (let b = 0; b < 3; b++) for (let c = 0; c < 2; c++) assert.ok(Math.abs(out.data[b * 2 + c] - want[c]) <= LN_ONLY);
  }
});

test("shapes: logits (B, classes), weights (B, H, N+1, N+1) per block, rows summing to 1", () => {
  const params = initVitParams(new Generator(33), SMALL);
  const { out, cache } = vitForward(new Generator(34).uniform([2, 3, 8, 8]), params, SMALL);
  assert.deepEqual(out.shape, [2, 5]);
  assert.equal(cache.weights.length, 2);
  assert.deepEqual(cache.weights[1].shape, [2, 2, 5, 5]);
  for (let r = 0; r < 2 * 2 * 5; r++) {
    let s = 0;
    for (let k = 0; k < 5; k++) s += cache.weights[0].data[r * 5 + k];
    assert.ok(Math.abs(s - 1) <= 1e-15);
  }
});

test("dropout: embedding mask, then per block weights, MLP hidden, MLP output", () => {
  const B = 2, N1 = 5, d = 8, H = 2, M = 16;
  const params = initVitParams(new Generator(35), SMALL);
  const images = new Generator(36).uniform([B, 3, 8, 8]);
  const rng = new Generator(37);
  const plain = vitForward(images, params, SMALL, rng).out;
  assert.equal(rng.counter, 0);
  const dropped = vitForward(images, params, { ...SMALL, dropout: 0.1 }, rng).out;
  assert.equal(rng.counter, B * N1 * d + 2 * (B * H * N1 * N1 + B * N1 * M + B * N1 * d));
  assert.notDeepEqual(Array.from(dropped.data), Array.from(plain.data));
});

// --- backward -----------------------------------------------------------------------------------

// Central differences from the toolkit, independent of src/runs/gradcheck.ts: fourth-order stencil at
// the declared step, relative to max(|analytic|, |numeric|, floor).
const FD = tolerance("vit", "fd");
const numericCoordinate = (f: () => number, x: Float64Array, i: number) => centralDifference(f, x, i, FD.step!, 4);

const TINY: VitConfig = { image: 4, channels: 2, patch: 2, d: 8, heads: 2, mlp_hidden: 12, blocks: 2, classes: 3, dropout: 0 };

function tinyModel(seed: number) {
  const rng = new Generator(seed);
  const params = initVitParams(rng, TINY);
  for (const name of Object.keys(params)) { // layer norms and <cls> away from init's 1, 0 and 0
    if (name.endsWith(".gamma") || name.endsWith(".beta") || name === "cls") {
      const z = rng.normal(params[name].shape).data;
      for (let i = 0; i < z.length; i++) params[name].data[i] = (name.endsWith(".gamma") ? 1 : 0) + 0.1 * z[i];
    }
  }
  const images = rng.uniform([3, TINY.channels, TINY.image, TINY.image]);
  const labels = rng.integers([3], 0, TINY.classes);
  return { params, images, labels };
}

test("patchifyBackward undoes patchify exactly (a permutation)", () => {
  const images = new Generator(40).normal([2, 3, 8, 8]);
  const back = patchifyBackward(patchify(images, 4), images.shape, 4);
  assert.deepEqual(back.shape, images.shape);
  assert.deepEqual(Array.from(back.data), Array.from(images.data));
});

test("vitLossBackward: every parameter, in init order, each against central differences", () => {
  const { params, images, labels } = tinyModel(41);
  const grads = vitLossBackward(vitLoss(params, TINY, images, labels).cache);
  assert.deepEqual(Object.keys(grads), Object.keys(params));
  const rng = new Generator(42);
  for (const name of Object.keys(params)) {
    assert.deepEqual(grads[name].shape, params[name].shape, name);
    const size = params[name].data.length;
    for (let c = 0; c < 3; c++) {
      const i = Math.floor(rng.nextDouble() * size);
      const n = numericCoordinate(() => vitLoss(params, TINY, images, labels).loss, params[name].data, i);
      const a = grads[name].data[i];
      assert.ok(Math.abs(a - n) <= FD.value * Math.max(Math.abs(a), Math.abs(n), FD.floor!), `${name}[${i}]: analytic ${a}, numeric ${n}`);
    }
  }
});

test("vitBackward: <cls> and pos[0] get the same gradient (both enter row 0 of every image)", () => {
  const { params, images } = tinyModel(43);
  const { cache } = vitForward(images, params, TINY);
  const dlogits = new Generator(44).normal([3, TINY.classes]);
  const grads = vitBackward(dlogits, cache);
  // cls and pos[0] enter every image's row 0 through the same sum: equal gradients
  assert.deepEqual(Array.from(grads.cls.data), Array.from(grads.pos.data.subarray(0, TINY.d)));
  assert.ok(grads.cls.data.some((v) => v !== 0));
});

test("dropout: the backward reuses the forward's masks", () => {
  const { params, images, labels } = tinyModel(45);
  const config = { ...TINY, dropout: 0.2 };
  const g1 = vitLossBackward(vitLoss(params, config, images, labels, new Generator(9)).cache);
  const g2 = vitLossBackward(vitLoss(params, config, images, labels, new Generator(9)).cache);
  const g0 = vitLossBackward(vitLoss(params, TINY, images, labels).cache);
  for (const name of Object.keys(params)) assert.deepEqual(Array.from(g1[name].data), Array.from(g2[name].data), name);
  assert.ok(Object.keys(params).some((n) => g1[n].data.some((v, i) => v !== g0[n].data[i])));
  // and it is the gradient of the masked loss: a coordinate of the first MLP weight
  const f = () => vitLoss(params, config, images, labels, new Generator(9)).loss;
  const n = numericCoordinate(f, params["blk0.mlp.W1"].data, 5);
  assert.ok(Math.abs(g1["blk0.mlp.W1"].data[5] - n) <= FD.value * Math.max(Math.abs(n), FD.floor!));
});
