// Act 3's statistic: dims must be positive. The biased variance, the draw order (q then k, per d
// in list order) and Var(q.k) ~ d raw but ~ 1 once divided by sqrt(d) are the case
// score_scaling.n1000, bit for bit against the reference, whose statistics tests/test_lesson.py
// checks.
import { test } from "node:test";
import assert from "node:assert/strict";
import { Generator } from "../../src/core/rng.ts";
import { scoreScaling } from "../../src/nn/scoreScaling.ts";

test("dims must be positive integers", () => {
  assert.throws(() => scoreScaling([4, 0], 10, new Generator(1)), /positive integer dims, got 0/);
});
