// Reverse-the-digits data: vocabulary, sequences, the two sets and the batch of each step
// (twin: reference/runs/digits.py).
//
// Vocabulary (one, shared by source and target; V = 13):
//   0 <pad>   1 <bos>   2 <eos>   3..12 the digits 0..9 (digit k has id k + 3)
// An input of L digits (1 <= L <= maxDigits) becomes, with P = maxDigits + 1 columns:
//   src    = digits + <eos>, then <pad>                 srcLen = L + 1 (<eos> counted)
//   tgtIn  = <bos> + reversed digits, then <pad>        (the decoder's input, shifted right)
//   tgtOut = reversed digits + <eos>, then <pad>        tgtLen = L + 1 (<eos> counted)
//
// Drawing (docs/reversal.md), from the case's generator after the initial parameters:
//   one candidate = 1 + maxDigits consecutive doubles u: u[0] gives the length
//     L = minDigits + floor(u[0] * (maxDigits - minDigits + 1)), u[1..L] the digits
//     floor(u[k] * 10); the other doubles are unused (every candidate costs the same
//     1 + maxDigits counters);
//   the training set first, then the held-out set, each filled candidate by candidate; a
//   candidate is rejected (and the next one drawn) when it is already in the set being filled,
//   in the training set (held-out only), or in `reserved` (the lab's example, kept unseen).
// Batch of step t (t = 1, 2, ...): rows (t - 1) * B + i modulo the training set's size,
// i = 0..B-1, in the order the training set was drawn: a fixed cyclic order, a function of t.

import type { Generator } from "../core/rng.ts";
import type { IntTensor, Tensor } from "../core/ops.ts";
import { float64Digest } from "../core/digest.ts";

export const PAD = 0, BOS = 1, EOS = 2;
export const DIGIT0 = 3; // id of the digit 0
export const VOCAB = 13;

/** Encoded inputs: src, tgtIn, tgtOut (N, P); srcLens, tgtLens (N,). */
export interface DigitArrays {
  src: IntTensor;
  srcLens: IntTensor;
  tgtIn: IntTensor;
  tgtOut: IntTensor;
  tgtLens: IntTensor;
}

export interface DigitsData {
  train: DigitArrays;
  test: DigitArrays;
  trainInputs: number[][];
  testInputs: number[][];
}

/** Digit lists from a block of doubles u (n, 1 + maxDigits), one candidate per row. */
export function candidates(u: Tensor, minDigits: number, maxDigits: number): number[][] {
  const W = 1 + maxDigits, n = u.data.length / W;
  const out: number[][] = [];
  for (let r = 0; r < n; r++) {
    const L = minDigits + Math.floor(u.data[r * W] * (maxDigits - minDigits + 1));
    const digits: number[] = [];
    for (let k = 1; k <= L; k++) digits.push(Math.floor(u.data[r * W + k] * 10));
    out.push(digits);
  }
  return out;
}

/** n distinct inputs, in draw order; a candidate found in the set so far or in `exclude` is
 *  rejected. Candidates are drawn in rounds of as many as are still missing, so every candidate
 *  drawn is examined and the stream is the same as drawing one at a time. */
export function drawDigitSet(
  rng: Generator, n: number, minDigits: number, maxDigits: number, exclude: readonly (readonly number[])[] = [],
): number[][] {
  const seen = new Set(exclude.map((x) => x.join(",")));
  let possible = 0;
  for (let L = minDigits; L <= maxDigits; L++) possible += 10 ** L;
  if (n > possible - seen.size) {
    throw new RangeError(`drawDigitSet: fewer than ${n} distinct inputs of ${minDigits}..${maxDigits} digits`);
  }
  const out: number[][] = [];
  while (out.length < n) {
    for (const cand of candidates(rng.uniform([n - out.length, 1 + maxDigits]), minDigits, maxDigits)) {
      const key = cand.join(",");
      if (!seen.has(key)) {
        seen.add(key);
        out.push(cand);
      }
    }
  }
  return out;
}

/** Token arrays of a list of digit lists (P = maxDigits + 1 columns, <pad> = 0 after the end). */
export function encodeInputs(inputs: readonly (readonly number[])[], maxDigits: number): DigitArrays {
  const N = inputs.length, P = maxDigits + 1;
  const src = new Int32Array(N * P), tgtIn = new Int32Array(N * P), tgtOut = new Int32Array(N * P);
  const lens = new Int32Array(N);
  for (let n = 0; n < N; n++) {
    const digits = inputs[n], L = digits.length;
    for (let k = 0; k < L; k++) {
      src[n * P + k] = DIGIT0 + digits[k];
      tgtIn[n * P + k + 1] = DIGIT0 + digits[L - 1 - k];
      tgtOut[n * P + k] = DIGIT0 + digits[L - 1 - k];
    }
    src[n * P + L] = EOS;
    tgtIn[n * P] = BOS;
    tgtOut[n * P + L] = EOS;
    lens[n] = L + 1;
  }
  return {
    src: { shape: [N, P], data: src }, srcLens: { shape: [N], data: lens },
    tgtIn: { shape: [N, P], data: tgtIn }, tgtOut: { shape: [N, P], data: tgtOut },
    tgtLens: { shape: [N], data: Int32Array.from(lens) },
  };
}

/** The training set, then the held-out set (disjoint), drawn in that order. */
export function digitsData(
  rng: Generator, nTrain: number, nTest: number, minDigits: number, maxDigits: number,
  reserved: readonly (readonly number[])[] = [],
): DigitsData {
  const train = drawDigitSet(rng, nTrain, minDigits, maxDigits, reserved);
  const test = drawDigitSet(rng, nTest, minDigits, maxDigits, [...reserved, ...train]);
  return { train: encodeInputs(train, maxDigits), test: encodeInputs(test, maxDigits), trainInputs: train, testInputs: test };
}

/** Rows of the training set in the batch of step t >= 1: (t - 1) * batch + i mod nTrain. */
export function batchRows(nTrain: number, batch: number, t: number): Int32Array {
  const rows = new Int32Array(batch);
  for (let i = 0; i < batch; i++) rows[i] = ((t - 1) * batch + i) % nTrain;
  return rows;
}

function rowsOf(x: IntTensor, rows: Int32Array): IntTensor {
  const W = x.shape.length > 1 ? x.shape[1] : 1;
  const data = new Int32Array(rows.length * W);
  for (let r = 0; r < rows.length; r++) data.set(x.data.subarray(rows[r] * W, rows[r] * W + W), r * W);
  return { shape: [rows.length, ...x.shape.slice(1)], data };
}

/** The same rows of every array of a set of encoded inputs. */
export function takeRows(arrays: DigitArrays, rows: Int32Array): DigitArrays {
  return {
    src: rowsOf(arrays.src, rows), srcLens: rowsOf(arrays.srcLens, rows), tgtIn: rowsOf(arrays.tgtIn, rows),
    tgtOut: rowsOf(arrays.tgtOut, rows), tgtLens: rowsOf(arrays.tgtLens, rows),
  };
}

/** SHA-256 (hex) of the encoded arrays, each as little-endian float64 (ids are exact), in the
 *  order src, srcLens, tgtIn, tgtOut, tgtLens: equal digests prove both engines drew the same
 *  data (float64Digest). */
export function dataDigest(arrays: DigitArrays): string {
  return float64Digest([arrays.src.data, arrays.srcLens.data, arrays.tgtIn.data, arrays.tgtOut.data, arrays.tgtLens.data]);
}
