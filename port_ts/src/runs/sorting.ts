// Sort-the-digits data for the decoder-only model: vocabulary, sequences, the two sets
// (twin: reference/runs/sorting.py; docs/decoder_lm.md).
//
// Vocabulary for an alphabet of A digits (V = A + 2):
//   0..A-1 the digits   A '>' (the prompt's end)   A + 1 <eos>
// An input of L digits (minLen <= L <= maxLen) x_1..x_L is the sequence
//   x_1 .. x_L  >  y_1 .. y_L  <eos>           y = the digits sorted, ascending      (2L + 2 tokens)
// and its prompt is x_1 .. x_L > (L + 1 tokens): the model writes the rest. Training rows, with
// T = 2 maxLen + 1 columns (the sequence shifted by one, right-padded with <eos>):
//   tokens[t] = s[t]      targets[t] = s[t + 1]      weights[t] = 1 for L <= t <= 2L, else 0
// so the loss counts only the tokens the model writes, and a row's positions are 0..T-1.
//
// Drawing, from the case's generator after the initial parameters:
//   one candidate = 1 + maxLen consecutive doubles u: L = minLen + floor(u[0] * (maxLen -
//       minLen + 1)), digits floor(u[k] * A), k = 1..L; the others unused
//   the training set first, then the held-out set, each filled candidate by candidate; a
//   candidate is rejected when it is already in the set being filled, in the training set
//   (held-out only), or in `reserved` (the lab's example, kept unseen)
// in rounds of as many candidates as are still missing (the same stream as one at a time).
// Batch of step t: digits.ts's batchRows, a fixed cyclic order over the training set.

import type { IntTensor, Tensor } from "../core/ops.ts";
import type { Generator } from "../core/rng.ts";
import { float64Digest } from "../core/digest.ts";

export interface SortArrays { tokens: IntTensor; targets: IntTensor; weights: Tensor }

export interface SortingData { train: SortArrays; test: SortArrays; trainInputs: number[][]; testInputs: number[][] }

/** The prompt's end '>'. */
export function sepId(A: number): number {
  return A;
}

/** <eos>. */
export function eosId(A: number): number {
  return A + 1;
}

/** Digit lists from a block of doubles u (n, 1 + maxLen), one candidate per row. */
export function candidates(u: Tensor, minLen: number, maxLen: number, A: number): number[][] {
  const W = 1 + maxLen, n = u.data.length / W;
  const out: number[][] = [];
  for (let r = 0; r < n; r++) {
    const L = minLen + Math.floor(u.data[r * W] * (maxLen - minLen + 1));
    const digits: number[] = [];
    for (let k = 1; k <= L; k++) digits.push(Math.floor(u.data[r * W + k] * A));
    out.push(digits);
  }
  return out;
}

/** n distinct inputs, in draw order. */
export function drawSortSet(
  rng: Generator, n: number, minLen: number, maxLen: number, A: number, exclude: readonly (readonly number[])[] = [],
): number[][] {
  const seen = new Set(exclude.map((x) => x.join(",")));
  let possible = 0;
  for (let L = minLen; L <= maxLen; L++) possible += A ** L;
  if (n > possible - seen.size) throw new RangeError(`drawSortSet: fewer than ${n} distinct inputs of ${minLen}..${maxLen} digits below ${A}`);
  const out: number[][] = [];
  while (out.length < n) {
    for (const cand of candidates(rng.uniform([n - out.length, 1 + maxLen]), minLen, maxLen, A)) {
      const key = cand.join(",");
      if (!seen.has(key)) {
        seen.add(key);
        out.push(cand);
      }
    }
  }
  return out;
}

/** The full sequence of an input: digits, '>', sorted digits, <eos>. */
export function sequenceOf(digits: readonly number[], A: number): number[] {
  return [...digits, sepId(A), ...[...digits].sort((a, b) => a - b), eosId(A)];
}

/** Training arrays of a list of inputs: tokens, targets (N, T), weights (N, T), T = 2 maxLen + 1. */
export function encodeSequences(inputs: readonly (readonly number[])[], maxLen: number, A: number): SortArrays {
  const N = inputs.length, T = 2 * maxLen + 1;
  const tokens = new Int32Array(N * T).fill(eosId(A)), targets = new Int32Array(N * T).fill(eosId(A));
  const weights = new Float64Array(N * T);
  inputs.forEach((digits, n) => {
    const s = sequenceOf(digits, A), L = digits.length;
    for (let t = 0; t < 2 * L + 1; t++) {
      tokens[n * T + t] = s[t];
      targets[n * T + t] = s[t + 1];
      if (t >= L) weights[n * T + t] = 1;
    }
  });
  return { tokens: { shape: [N, T], data: tokens }, targets: { shape: [N, T], data: targets }, weights: { shape: [N, T], data: weights } };
}

/** The prompt of an input: its digits, then '>'. */
export function promptOf(digits: readonly number[], A: number): number[] {
  return [...digits, sepId(A)];
}

/** The training set, then the held-out set (disjoint), drawn in that order. */
export function sortingData(
  rng: Generator, nTrain: number, nTest: number, minLen: number, maxLen: number, A: number,
  reserved: readonly (readonly number[])[] = [],
): SortingData {
  const train = drawSortSet(rng, nTrain, minLen, maxLen, A, reserved);
  const test = drawSortSet(rng, nTest, minLen, maxLen, A, [...reserved, ...train]);
  return { train: encodeSequences(train, maxLen, A), test: encodeSequences(test, maxLen, A), trainInputs: train, testInputs: test };
}

/** The same rows of tokens, targets and weights. */
export function takeSortRows(arrays: SortArrays, rows: Int32Array): SortArrays {
  const T = arrays.tokens.shape[1], R = rows.length;
  const tokens = new Int32Array(R * T), targets = new Int32Array(R * T), weights = new Float64Array(R * T);
  for (let r = 0; r < R; r++) {
    tokens.set(arrays.tokens.data.subarray(rows[r] * T, (rows[r] + 1) * T), r * T);
    targets.set(arrays.targets.data.subarray(rows[r] * T, (rows[r] + 1) * T), r * T);
    weights.set(arrays.weights.data.subarray(rows[r] * T, (rows[r] + 1) * T), r * T);
  }
  return { tokens: { shape: [R, T], data: tokens }, targets: { shape: [R, T], data: targets }, weights: { shape: [R, T], data: weights } };
}

/** SHA-256 (hex) of tokens, targets, weights as little-endian float64 (ids are exact). */
export function sortingDigest(arrays: SortArrays): string {
  return float64Digest([arrays.tokens.data, arrays.targets.data, arrays.weights.data]);
}
