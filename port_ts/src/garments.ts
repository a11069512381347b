// The 8x8 garment data set and the ViT training run (twin: reference/garments.py).
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

import type { Generator } from "./rng.ts";
import type { IntTensor, Tensor } from "./ops.ts";

export const SIDE = 8;
export const GARMENTS = ["t-shirt", "trouser", "pullover", "dress", "sandal", "sneaker", "bag", "ankle boot"];

// Two templates per class, rows top to bottom; '#' 1.0, '+' 0.5, '.' 0.0.
export const TEMPLATES: string[][][] = [
  [["........", ".##..##.", "########", "########", "..####..", "..####..", "..####..", "........"],
   [".##..##.", "########", "########", ".######.", ".######.", ".######.", ".######.", "........"]],
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
    throw new RangeError(`garments: classes must be in [2, ${TEMPLATES.length}], got ${classes}`);
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
