// Reverse-the-digits data: the token layout written out by hand, the documented draw (one
// candidate of 1 + maxDigits doubles at a time), distinct and disjoint sets without the lab's
// example, variable lengths, the cyclic batches, and a digest that sees one changed token.
import { test } from "node:test";
import assert from "node:assert/strict";
import { Generator } from "../../src/core/rng.ts";
import { BOS, EOS, PAD, VOCAB, batchRows, dataDigest, digitsData, drawDigitSet, encodeInputs, takeRows } from "../../src/runs/digits.ts";

const LAB = [3, 8, 0, 5, 2, 7];

test("ids: <pad> 0, <bos> 1, <eos> 2, digit k is k + 3, 13 in all", () => {
  assert.deepEqual([PAD, BOS, EOS, VOCAB], [0, 1, 2, 13]);
});

test("src = digits + <eos>, tgtIn = <bos> + reversed, tgtOut = reversed + <eos>, padded; lengths count <eos>", () => {
  const a = encodeInputs([[3, 8, 0], [5]], 4);
  assert.deepEqual(a.src.shape, [2, 5]);
  assert.deepEqual(Array.from(a.src.data), [6, 11, 3, 2, 0, 8, 2, 0, 0, 0]);
  assert.deepEqual(Array.from(a.tgtIn.data), [1, 3, 11, 6, 0, 1, 8, 0, 0, 0]);
  assert.deepEqual(Array.from(a.tgtOut.data), [3, 11, 6, 2, 0, 8, 2, 0, 0, 0]);
  assert.deepEqual(Array.from(a.srcLens.data), [4, 2]);
  assert.deepEqual(Array.from(a.tgtLens.data), [4, 2]);
});

test("the set is the stream of one candidate at a time, duplicates rejected", () => {
  const got = drawDigitSet(new Generator(31), 300, 1, 6);
  const g = new Generator(31);
  const want: number[][] = [];
  const seen = new Set<string>();
  while (want.length < 300) {
    const u = g.uniform([7]).data;
    const L = 1 + Math.floor(u[0] * 6);
    const cand = Array.from(u.subarray(1, L + 1), (x) => Math.floor(x * 10));
    if (!seen.has(cand.join())) { seen.add(cand.join()); want.push(cand); }
  }
  assert.deepEqual(got, want);
});

test("training and held-out sets: distinct, disjoint, no lab example, all lengths 1..6", () => {
  const data = digitsData(new Generator(5), 400, 250, 1, 6, [LAB]);
  const train = new Set(data.trainInputs.map((x) => x.join()));
  const test_ = new Set(data.testInputs.map((x) => x.join()));
  assert.equal(train.size, 400);
  assert.equal(test_.size, 250);
  for (const k of test_) assert.ok(!train.has(k), `held-out ${k} is also a training input`);
  assert.ok(!train.has(LAB.join()) && !test_.has(LAB.join()));
  assert.deepEqual([...new Set(data.trainInputs.map((x) => x.length))].sort(), [1, 2, 3, 4, 5, 6]);
});

test("too few distinct inputs is an error, not an endless loop", () => {
  assert.throws(() => drawDigitSet(new Generator(1), 11, 1, 1), /fewer than 11 distinct/);
});

test("step t's batch: rows (t-1)B .. tB-1 modulo the set, a function of t alone", () => {
  assert.deepEqual(Array.from(batchRows(10, 4, 1)), [0, 1, 2, 3]);
  assert.deepEqual(Array.from(batchRows(10, 4, 3)), [8, 9, 0, 1]);
  const data = digitsData(new Generator(2), 10, 3, 6, 6);
  const b = takeRows(data.train, batchRows(10, 4, 3));
  assert.deepEqual(Array.from(b.src.data.subarray(0, 7)), Array.from(data.train.src.data.subarray(56, 63)));
  assert.deepEqual(Array.from(b.tgtLens.data), [7, 7, 7, 7]);
});

test("the data digest changes with one token", () => {
  const data = digitsData(new Generator(5), 50, 20, 6, 6);
  const before = dataDigest(data.test);
  assert.match(before, /^[0-9a-f]{64}$/);
  data.test.tgtOut.data[17] += 1;
  assert.notEqual(dataDigest(data.test), before);
});
