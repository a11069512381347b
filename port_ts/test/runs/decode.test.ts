// Greedy decoding: topTwo on hand-made rows (first index on ties, margin 0; no case has a tie)
// and its V >= 2 check. Decodes (step t seeing positions 0..t, a batch decoding as its rows, the
// end at <eos> or the length limit, the -1 / 0 padding after it) are the cases
// greedy_decode.untrained and .all_end_early and train.reversal's evaluation, bit for bit against
// the reference, which tests/test_reversal.py checks for each of those facts.
import { test } from "node:test";
import assert from "node:assert/strict";
import { topTwo } from "../../src/runs/decode.ts";

test("topTwo: first maximal index, margin to the best other logit, 0 on a tie", () => {
  const { best, margin } = topTwo({ shape: [3, 4], data: Float64Array.from([1, 5, 2, 4.5, -1, -3, -1, -2, 0, 0, 0, 7]) });
  assert.deepEqual(Array.from(best.data), [1, 0, 3]);
  assert.deepEqual(Array.from(margin.data), [0.5, 0, 7]);
  assert.throws(() => topTwo({ shape: [2, 1], data: Float64Array.from([1, 2]) }), /V >= 2/);
});
