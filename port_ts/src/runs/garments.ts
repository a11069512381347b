// The 8x8 garment data set and the ViT training run (twin: reference/runs/garments.py).
//
// No garment data set can be downloaded here, so both engines draw one from the shared generator.
// Eight classes, each with two hand-drawn 8x8 templates ('#' 1.0, '+' 0.5, '.' 0.0); see
// docs/garments.md for the pictures and the reasons. One split of n images is drawn in this order:
//   perm    = permutation(n)                          label[i] = perm[i] mod classes (balanced)
//   variant = integers((n,), 0, 2)                    which of the class's two templates
//   shift   = integers((n, 2), -1, 2)                 (dy, dx) in {-1, 0, 1}; pixels moved off the
//                                                     frame are lost, the uncovered ones are 0
//   scale   = uniform((n,), 0.6, 1.0)                 the garment's brightness
//   noise   = uniform((n, 8, 8), -0.15, 0.15)         per pixel
//   image   = min(max(scale * shifted + noise, 0), 1) one product, one add, two exact clamps
// Every step is exactly rounded (or exact), so the engines build bit-identical images.
//
// Shape legend: n images, C = 1 channel, S = 8 image side, K classes, B batch.

import type { Generator } from "../core/rng.ts";
import { type IntTensor, type Tensor, empty } from "../core/ops.ts";
import { inWorkspace, newWorkspace } from "../kernels/memory.ts";
import type { Named } from "../core/golden.ts";
import { type Params, copyParams } from "../core/params.ts";
import type { Run } from "./schedule.ts";
import { type Config, CaseError, get, positiveInt, positiveNumber } from "../core/caseConfig.ts";
import { float64Digest } from "../core/digest.ts";
import type { History, Snapshot, StepFn } from "./train.ts";
import { type VitCache, type VitConfig, initVitParams, vitForward, vitLoss, vitLossBackward } from "../models/vit.ts";

export const SIDE = 8;
export const GARMENTS = ["t-shirt", "trouser", "pullover", "dress", "sandal", "sneaker", "bag", "ankle boot"];

// Two templates per class, rows top to bottom; '#' 1.0, '+' 0.5, '.' 0.0.
export const TEMPLATES: string[][][] = [
  [["........", ".##..##.", "########", "########", "..####..", "..####..", "..####..", "........"],
   [".##..##.", "########", "########", "..####..", "..####..", "..####..", "..####..", "........"]],
  [["..####..", "..####..", "..#..#..", "..#..#..", "..#..#..", "..#..#..", "..#..#..", "........"],
   [".######.", ".######.", ".##..##.", ".##..##.", ".##..##.", ".##..##.", ".##..##.", "........"]],
  [["........", ".######.", "########", "#.####.#", "#.####.#", "#.####.#", "..####..", "........"],
   [".##..##.", "########", "########", "#.####.#", "#.####.#", "#.####.#", "#.####.#", "........"]],
  [["...##...", "..####..", "..####..", "..####..", ".######.", ".######.", "########", "........"],
   ["..####..", "..####..", "..####..", ".######.", ".######.", "########", "########", "........"]],
  [["........", "........", "........", "..#.#.#.", ".#.#.#..", "########", "........", "........"],
   ["........", "........", "...#.#..", "..#.#.#.", ".#.#.#..", "########", "........", "........"]],
  [["........", "........", "........", "........", "....##..", "..#####.", "########", "++++++++"],
   ["........", "........", "........", "...###..", "..#####.", "########", "++++++++", "........"]],
  [["........", "..++++..", ".+....+.", "########", "########", "########", "########", "........"],
   ["...++...", "..+..+..", ".######.", ".######.", ".######.", ".######.", ".######.", "........"]],
  [["....###.", "....###.", "....###.", "....###.", "...####.", ".#######", "########", "........"],
   ["........", "...###..", "...###..", "...####.", "..######", "########", "++++++++", "........"]],
];
const PIXEL: Record<string, number> = { ".": 0, "+": 0.5, "#": 1 };

export const SCALE_RANGE = [0.6, 1.0];
export const NOISE_RANGE = [-0.15, 0.15];

/** (8 classes, 2 variants, S, S) in {0, 0.5, 1}, from the ASCII pictures. */
export function garmentTemplates(): Tensor {
  const data = new Float64Array(TEMPLATES.length * 2 * SIDE * SIDE);
  TEMPLATES.forEach((variants, k) => variants.forEach((rows, v) => rows.forEach((row, y) => {
    for (let x = 0; x < SIDE; x++) data[((k * 2 + v) * SIDE + y) * SIDE + x] = PIXEL[row[x]];
  })));
  return { shape: [TEMPLATES.length, 2, SIDE, SIDE], data };
}

/** img (S, S) moved down by dy and right by dx: out[y, x] = img[y - dy, x - dx], 0 outside. */
export function shiftImage(img: Tensor, dy: number, dx: number): Tensor {
  const out = new Float64Array(SIDE * SIDE);
  for (let y = 0; y < SIDE; y++)
    for (let x = 0; x < SIDE; x++) {
      const sy = y - dy, sx = x - dx;
      if (sy >= 0 && sy < SIDE && sx >= 0 && sx < SIDE) out[y * SIDE + x] = img.data[sy * SIDE + sx];
    }
  return { shape: [SIDE, SIDE], data: out };
}

/** One split drawn in the module doc's order: images (n, 1, S, S) in [0, 1], labels (n,). */
export function makeGarments(rng: Generator, n: number, classes: number): { images: Tensor; labels: IntTensor } {
  if (!(Number.isInteger(classes) && classes >= 2 && classes <= TEMPLATES.length)) {
    throw new CaseError(`garments: classes must be in [2, ${TEMPLATES.length}], got ${classes}`);
  }
  const templates = garmentTemplates();
  const perm = rng.permutation(n);
  const labels = new Int32Array(n); // (n,)
  for (let i = 0; i < n; i++) labels[i] = perm[i] % classes;
  const variant = rng.integers([n], 0, 2).data; // (n,)
  const shift = rng.integers([n, 2], -1, 2).data; // (n, 2)  (dy, dx)
  const scale = rng.uniform([n], SCALE_RANGE[0], SCALE_RANGE[1]).data; // (n,)
  const noise = rng.uniform([n, SIDE, SIDE], NOISE_RANGE[0], NOISE_RANGE[1]).data; // (n, S, S)
  const P = SIDE * SIDE;
  const images = new Float64Array(n * P); // (n, 1, S, S)
  for (let i = 0; i < n; i++) {
    const start = (labels[i] * 2 + variant[i]) * P;
    const template = { shape: [SIDE, SIDE], data: templates.data.subarray(start, start + P) };
    const shifted = shiftImage(template, shift[2 * i], shift[2 * i + 1]).data;
    for (let k = 0; k < P; k++) images[i * P + k] = Math.min(Math.max(scale[i] * shifted[k] + noise[i * P + k], 0), 1);
  }
  return { images: { shape: [n, 1, SIDE, SIDE], data: images }, labels: { shape: [n], data: labels } };
}

export interface GarmentSplits { trainImages: Tensor; trainLabels: IntTensor; testImages: Tensor; testLabels: IntTensor }

/** The train split, then the held-out test split, from one generator. */
export function garmentSplits(rng: Generator, nTrain: number, nTest: number, classes: number): GarmentSplits {
  const train = makeGarments(rng, nTrain, classes);
  const test = makeGarments(rng, nTest, classes);
  return { trainImages: train.images, trainLabels: train.labels, testImages: test.images, testLabels: test.labels };
}

// ---- The ViT run (case train_vit, registered in casesTraining.RUNS) ----

/** The ViT's config (vit.ts) from a case config: image 8 and channels 1 are the data's. */
export function vitModelConfig(config: Config): VitConfig {
  if (get<unknown>(config, "dropout", 0) !== 0) {
    throw new CaseError(`train_vit: the baked run has dropout 0 (docs/training.md), got ${JSON.stringify(config.dropout)}`);
  }
  return {
    image: SIDE, channels: 1, dropout: 0,
    patch: positiveInt(config, "patch"), d: positiveInt(config, "d"), heads: positiveInt(config, "heads"),
    mlp_hidden: positiveInt(config, "mlp_hidden"), blocks: positiveInt(config, "blocks"), classes: positiveInt(config, "classes"),
  };
}

/** The training images of step t (1-based), a fixed cyclic order: ((t - 1) * batch + j) mod n. */
export function batchIndices(t: number, batch: number, n: number): Int32Array {
  const out = new Int32Array(batch);
  for (let j = 0; j < batch; j++) out[j] = ((t - 1) * batch + j) % n;
  return out;
}

/** Predictions (n,), logits (n, K) and the forward cache: the first largest logit wins a tie. */
export function predict(params: Params, model: VitConfig, images: Tensor): { predictions: IntTensor; logits: Tensor; cache: VitCache } {
  const { out: logits, cache } = vitForward(images, params, model);
  const K = logits.shape[1], n = logits.shape[0];
  const predictions = new Int32Array(n);
  for (let r = 0; r < n; r++) {
    let best = 0;
    for (let k = 1; k < K; k++) if (logits.data[r * K + k] > logits.data[r * K + best]) best = k;
    predictions[r] = best;
  }
  return { predictions: { shape: [n], data: predictions }, logits, cache };
}

/** The fraction of correct predictions: (number correct) / n, one rounded division. */
export function accuracy(predictions: IntTensor, labels: IntTensor): number {
  let correct = 0;
  for (let i = 0; i < labels.data.length; i++) if (predictions.data[i] === labels.data[i]) correct++;
  return correct / labels.data.length;
}

/** (classes,): the index of the first image of each class (the attention showcase). */
export function firstOfEachClass(labels: IntTensor, classes: number): IntTensor {
  const out = new Int32Array(classes);
  for (let k = 0; k < classes; k++) {
    const at = labels.data.indexOf(k);
    if (at < 0) throw new RangeError(`garments: the split has no image of class ${k} (${GARMENTS[k]})`);
    out[k] = at;
  }
  return { shape: [classes], data: out };
}

export interface VitRun extends Run { digests: Record<string, string> }

/** The train_vit run: draws the ViT's initial parameters (vit.initVitParams), then the train
 *  split, then the test split; returns the Run of casesTraining (names, params, stepFn, evaluate,
 *  report, inputs, digests, schedule). docs/garments.md has the configuration, the outputs and the reasons. */
export function vitSetup(config: Config, rng: Generator): VitRun {
  const model = vitModelConfig(config);
  const nTrain = positiveInt(config, "n_train"), nTest = positiveInt(config, "n_test"), batch = positiveInt(config, "batch");
  const params = initVitParams(rng, model);
  const names = Object.keys(params);
  const data = garmentSplits(rng, nTrain, nTest, model.classes);
  const { trainImages, trainLabels, testImages, testLabels } = data;
  const shown = firstOfEachClass(testLabels, model.classes); // (K,)
  const P = SIDE * SIDE;
  const ws = newWorkspace(); // the step's memory, reused by every step (core/ops.ts)
  const stepFn: StepFn = (p, t) => inWorkspace(ws, () => {
    const idx = batchIndices(t, batch, nTrain);
    const images = empty([batch, 1, SIDE, SIDE]); // every element written below
    const labels: IntTensor = { shape: [batch], data: new Int32Array(batch) };
    idx.forEach((i, j) => {
      images.data.set(trainImages.data.subarray(i * P, (i + 1) * P), j * P);
      labels.data[j] = trainLabels.data[i];
    });
    const { loss, cache } = vitLoss(p, model, images, labels);
    return { loss, grads: copyParams(vitLossBackward(cache)) };
  });
  const evaluate = (p: Params): Named => {
    const { predictions, cache } = predict(p, model, testImages);
    const { loss: finalLoss } = vitLoss(p, model, testImages, testLabels);
    const trainPred = predict(p, model, trainImages).predictions;
    const w = cache.weights[cache.weights.length - 1]; // (n_test, H, N+1, N+1)  the last block
    const [, H, T] = w.shape;
    const cls = new Float64Array(shown.data.length * H * T); // (K, H, N+1)  column 0 is <cls> itself
    shown.data.forEach((i, a) => {
      for (let h = 0; h < H; h++) cls.set(w.data.subarray(((i * H + h) * T) * T, ((i * H + h) * T) * T + T), (a * H + h) * T);
    });
    return {
      final_loss: { shape: [], data: Float64Array.of(finalLoss) },
      accuracy: { shape: [], data: Float64Array.of(accuracy(predictions, testLabels)) },
      train_accuracy: { shape: [], data: Float64Array.of(accuracy(trainPred, trainLabels)) },
      predictions, // (n_test,)
      cls_attention: { shape: [shown.data.length, H, T], data: cls },
      "cls_attention.images": shown, // (K,)  test indices, one per class
    };
  };
  const report = (_p: Params, _history: History, checkpoints: Map<number, Snapshot>): Named => {
    const steps = [...checkpoints.keys()].sort((a, b) => a - b);
    const story = Float64Array.from(steps, (t) => accuracy(predict(checkpoints.get(t)!.params, model, testImages).predictions, testLabels));
    return { "accuracy.checkpoints": { shape: [steps.length], data: story } }; // (C,)
  };
  const attentionImages: Tensor = { shape: [shown.data.length, 1, SIDE, SIDE], data: new Float64Array(shown.data.length * P) };
  shown.data.forEach((i, a) => attentionImages.data.set(testImages.data.subarray(i * P, (i + 1) * P), a * P));
  const clip = get<unknown>(config, "clip") === null ? null : positiveNumber(config, "clip");
  return {
    names, params, stepFn, evaluate, report,
    inputs: { attention_images: attentionImages, test_labels: testLabels },
    digests: { "data.train": dataDigest(trainImages, trainLabels), "data.test": dataDigest(testImages, testLabels) },
    steps: positiveInt(config, "steps"), lr: positiveNumber(config, "lr"), clip, checkpointEvery: positiveInt(config, "checkpoint_every"),
  };
}

/** SHA-256 of the images' then the labels' little-endian float64 bytes (float64Digest). */
function dataDigest(images: Tensor, labels: IntTensor): string {
  return float64Digest([images.data, labels.data]);
}
