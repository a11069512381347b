// The garment data set and the ViT run in the port: templates from their pictures, shifts, every
// image rebuilt from redrawn parameters, balance, the cyclic batches, the run's wiring (gradients
// of the step against central differences, resuming from a checkpoint, the report's shapes).
import { test } from "node:test";
import assert from "node:assert/strict";
import { Generator } from "../../src/core/rng.ts";
import type { IntTensor, Tensor } from "../../src/core/ops.ts";
import { CaseError } from "../../src/core/caseConfig.ts";
import { copyState, stateDigest, train } from "../../src/runs/train.ts";
import {
  GARMENTS, SIDE, TEMPLATES, accuracy, batchIndices, firstOfEachClass, garmentSplits, garmentTemplates,
  makeGarments, shiftImage, vitSetup,
} from "../../src/runs/garments.ts";
import { centralDifference, tolerance } from "../toolkit.ts";

const FD = tolerance("train_vit", "fd").value, FD_STEP = tolerance("train_vit", "fd").step!; // rule unit: max(1, |g|)
const ROW_SUM = tolerance("train_vit", "row_sum").value;

const SMALL = {
  patch: 4, d: 8, heads: 2, mlp_hidden: 8, blocks: 1, classes: 5, n_train: 20, n_test: 10, batch: 4,
  steps: 6, lr: 0.01, clip: 0.5, checkpoint_every: 3,
};

test("templates are the ASCII pictures: '#' 1, '+' 0.5, '.' 0, sixteen distinct", () => {
  const t = garmentTemplates();
  assert.deepEqual(t.shape, [8, 2, SIDE, SIDE]);
  assert.equal(GARMENTS.length, 8);
  const seen = new Set<string>();
  for (let k = 0; k < 8; k++)
    for (let v = 0; v < 2; v++) {
      const start = (k * 2 + v) * 64;
      seen.add(Array.from(t.data.subarray(start, start + 64)).join());
      assert.equal(t.data[start + 2 * 8 + 3], { ".": 0, "+": 0.5, "#": 1 }[TEMPLATES[k][v][2][3]]);
    }
  assert.equal(seen.size, 16);
  assert.ok(t.data.every((x) => x === 0 || x === 0.5 || x === 1));
});

test("shiftImage moves down and right, fills the uncovered pixels with 0", () => {
  const img: Tensor = { shape: [8, 8], data: Float64Array.from({ length: 64 }, (_, i) => i + 1) };
  const down = shiftImage(img, 1, 0).data;
  assert.equal(down[1 * 8 + 3], img.data[3]);
  for (let x = 0; x < 8; x++) assert.equal(down[x], 0);
  const left = shiftImage(img, 0, -1).data;
  assert.equal(left[2 * 8 + 6], img.data[2 * 8 + 7]);
  for (let y = 0; y < 8; y++) assert.equal(left[y * 8 + 7], 0);
  assert.deepEqual(shiftImage(img, 0, 0).data, img.data);
  const corner = shiftImage(img, -1, 1).data;
  assert.equal(corner[0 * 8 + 1], img.data[1 * 8 + 0]);
});

test("every image is its template moved, scaled by the brightness and noised, clamped to [0, 1]", () => {
  const n = 50, K = 8;
  const { images, labels } = makeGarments(new Generator(31), n, K);
  const g = new Generator(31); // redraw in the documented order
  const perm = g.permutation(n);
  const variant = g.integers([n], 0, 2).data;
  const shift = g.integers([n, 2], -1, 2).data;
  const scale = g.uniform([n], 0.6, 1.0).data;
  const noise = g.uniform([n, 8, 8], -0.15, 0.15).data;
  const t = garmentTemplates().data;
  for (let i = 0; i < n; i++) {
    assert.equal(labels.data[i], perm[i] % K);
    for (let y = 0; y < 8; y++)
      for (let x = 0; x < 8; x++) {
        const sy = y - shift[2 * i], sx = x - shift[2 * i + 1];
        const moved = sy >= 0 && sy < 8 && sx >= 0 && sx < 8 ? t[((labels.data[i] * 2 + variant[i]) * 8 + sy) * 8 + sx] : 0;
        const want = Math.min(1, Math.max(0, scale[i] * moved + noise[i * 64 + y * 8 + x]));
        assert.equal(images.data[i * 64 + y * 8 + x], want, `image ${i} pixel (${y}, ${x})`);
      }
  }
});

test("splits: balanced classes, pixels in [0, 1], the test split drawn after the train split", () => {
  const s = garmentSplits(new Generator(4), 80, 40, 8);
  for (const [labels, n] of [[s.trainLabels, 80], [s.testLabels, 40]] as [IntTensor, number][]) {
    const counts = new Array(8).fill(0);
    labels.data.forEach((k) => counts[k]++);
    assert.deepEqual(counts, new Array(8).fill(n / 8));
  }
  assert.ok(s.trainImages.data.every((x) => x >= 0 && x <= 1));
  assert.deepEqual(s.trainImages.shape, [80, 1, 8, 8]);
  const g = new Generator(4);
  makeGarments(g, 80, 8);
  assert.deepEqual(makeGarments(g, 40, 8).images.data, s.testImages.data);
  assert.equal(g.counter, (79 + 80 + 160 + 80 + 80 * 64) + (39 + 40 + 80 + 40 + 40 * 64), "draws per split: n-1 + n + 2n + n + 64n");
  assert.throws(() => makeGarments(new Generator(1), 4, 9), CaseError);
});

test("batches cycle through the training set in order", () => {
  const seen: number[] = [];
  for (let t = 1; t <= 5; t++) seen.push(...batchIndices(t, 4, 20));
  assert.deepEqual(seen, Array.from({ length: 20 }, (_, i) => i));
  assert.deepEqual(Array.from(batchIndices(6, 4, 20)), [0, 1, 2, 3]);
  assert.deepEqual(Array.from(batchIndices(3, 3, 7)), [6, 0, 1]);
});

test("accuracy counts matches; firstOfEachClass finds the first index of each label", () => {
  const labels: IntTensor = { shape: [6], data: Int32Array.from([2, 0, 1, 0, 2, 1]) };
  const pred: IntTensor = { shape: [6], data: Int32Array.from([2, 1, 1, 0, 0, 1]) };
  assert.equal(accuracy(pred, labels), 4 / 6);
  assert.deepEqual(Array.from(firstOfEachClass(labels, 3).data), [1, 2, 0]);
  assert.throws(() => firstOfEachClass(labels, 4), /no image of class 3/);
});

test("the step's gradient matches central differences of the step's loss", () => {
  const run = vitSetup(SMALL, new Generator(8));
  const t = 2; // the second batch
  const { grads } = run.stepFn(run.params, t);
  for (const [name, index] of [["cls", 3], ["patch.W", 17], ["blk0.attn.W_q", 5], ["head.b", 1], ["pos", 9]] as [string, number][]) {
    const fd = centralDifference(() => run.stepFn(run.params, t).loss, run.params[name].data, index, FD_STEP, 2);
    const g = grads[name].data[index];
    assert.ok(Math.abs(fd - g) <= FD * Math.max(1, Math.abs(g)), `${name}[${index}]: analytic ${g}, central difference ${fd}`);
  }
  assert.deepEqual(Object.keys(grads), run.names);
});

test("a run resumed from a checkpoint reproduces the uninterrupted run bit for bit", () => {
  const whole = vitSetup(SMALL, new Generator(8));
  const a = train(whole.params, whole.names, whole.stepFn, 6, whole.lr, whole.clip, 3);
  const mid = a.checkpoints.get(3)!;
  const part = vitSetup(SMALL, new Generator(8));
  const snap = copyState(mid.params, part.names, mid.state);
  const b = train(snap.params, part.names, part.stepFn, 6, part.lr, part.clip, 3, snap.state);
  assert.deepEqual(b.history.loss, a.history.loss.slice(3));
  assert.equal(stateDigest(snap.params, part.names, snap.state), stateDigest(whole.params, whole.names, a.checkpoints.get(6)!.state));
  assert.ok(a.history.gradNorm.some((n) => n > SMALL.clip), "threshold 0.5 should clip some of the six steps");
});

test("evaluate and report: held-out predictions, accuracy, <cls> rows that sum to 1, one image per class", () => {
  const run = vitSetup(SMALL, new Generator(8));
  const { history, checkpoints } = train(run.params, run.names, run.stepFn, run.steps, run.lr, run.clip, run.checkpointEvery);
  const rep = { ...run.evaluate(run.params), ...run.report!(run.params, history, checkpoints) };
  const pred = rep.predictions as IntTensor;
  assert.ok(pred.data instanceof Int32Array);
  assert.deepEqual(pred.shape, [10]);
  assert.equal(rep.accuracy.data[0], accuracy(pred, run.inputs.test_labels as IntTensor));
  assert.deepEqual(rep["accuracy.checkpoints"].shape, [3]); // steps 0, 3, 6
  const w = rep.cls_attention;
  assert.deepEqual(w.shape, [5, 2, 5]); // (classes, heads, 4 patches + <cls>)
  for (let r = 0; r < 10; r++) {
    let s = 0;
    for (let j = 0; j < 5; j++) s += w.data[r * 5 + j];
    assert.ok(Math.abs(s - 1) <= ROW_SUM);
  }
  const shown = rep["cls_attention.images"] as IntTensor;
  const labels = run.inputs.test_labels as IntTensor;
  assert.deepEqual(Array.from(shown.data, (i) => labels.data[i]), [0, 1, 2, 3, 4]);
  assert.deepEqual(run.inputs.attention_images.shape, [5, 1, 8, 8]);
  assert.ok(/^[0-9a-f]{64}$/.test(run.digests["data.train"]) && run.digests["data.train"] !== run.digests["data.test"]);
});

test("the run refuses dropout, a missing size and a non-positive rate", () => {
  assert.throws(() => vitSetup({ ...SMALL, dropout: 0.1 }, new Generator(1)), CaseError);
  const { batch: _batch, ...noBatch } = SMALL;
  assert.throws(() => vitSetup(noBatch, new Generator(1)), /batch/);
  assert.throws(() => vitSetup({ ...SMALL, lr: 0 }, new Generator(1)), /lr/);
});
