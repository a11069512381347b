// erf at the values no case can hold (JSON has no -0, infinities or NaN). Values (erf, GELU and
// GELU' on a grid through every piece of erf, at the pieces' edges and at tiny and subnormal
// values) are the cases gelu.* and erf_bits.*, bit for bit against the reference, whose erf
// tests/test_layers.py checks against math.erf on a dense grid; the backward is compared with the
// reference's in tests/test_backward_layers.py.
import { test } from "node:test";
import assert from "node:assert/strict";
import { erf } from "../../src/nn/gelu.ts";

test("erf keeps -0, and goes to +-1 and NaN at the ends", () => {
  assert.ok(Object.is(erf(0), 0) && Object.is(erf(-0), -0));
  assert.equal(erf(Infinity), 1);
  assert.equal(erf(-Infinity), -1);
  assert.ok(Number.isNaN(erf(NaN)));
});
