// Sinusoidal positions: an odd model dim and a missing generator are refused. Values (the table,
// its frequencies and unit-circle pairs, the forward's add with and without dropout, the cosine
// similarity) are the cases sinusoidal_table.*, positional_encoding.* and position_similarity.*,
// bit for bit against the reference, itself checked against torch and the closed form in
// tests/test_lesson.py; the backward is compared with the reference's in
// tests/test_backward_layers.py.
import { test } from "node:test";
import assert from "node:assert/strict";
import { tensor } from "../../src/core/ops.ts";
import { sinusoidalTable, positionalEncodingForward } from "../../src/nn/positionalEncoding.ts";

test("an odd model dim is refused with a message naming d", () => {
  assert.throws(() => sinusoidalTable(10, 5), /even, positive model dim d .* got d = 5/);
});

test("dropout without a generator is refused", () => {
  assert.throws(() => positionalEncodingForward(tensor([1, 2, 2], [1, -2, 3, -4]), 0.25, null), /needs a generator/);
});
