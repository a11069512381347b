// Nadaraya-Watson: the strict boxcar at |u| = 1, the NaN of a query no key reaches (the
// catalogue's cases have none), and the argument errors. Values (the lab's data, every kernel,
// narrow and wide gaussians) are the cases nadaraya_watson.*, bit for bit against the reference,
// itself checked against torch and the mean in tests/test_lesson.py.
import { test } from "node:test";
import assert from "node:assert/strict";
import { tensor } from "../../src/core/ops.ts";
import { boxcar, nadarayaWatson, meanAbsError } from "../../src/nn/nadarayaWatson.ts";

// No case puts a key at exactly sigma from a query.
test("boxcar is strict at |u| = 1, as the book's code (its text says <= 1)", () => {
  assert.equal(boxcar(0.999), 1);
  assert.equal(boxcar(1), 0);
});

test("a query no key reaches gets NaN weights and estimate, as the book's 0/0", () => {
  const x = tensor([2], [0, 0.5]), y = tensor([2], [1, 2]);
  const { yHat, weights } = nadarayaWatson(x, y, tensor([2], [0.25, 3]), "boxcar", 1);
  assert.equal(yHat.data[0], 1.5);
  assert.ok(Number.isNaN(yHat.data[1]));
  assert.ok(Number.isNaN(weights.data[1]) && Number.isNaN(weights.data[3]));
  assert.ok(Number.isNaN(meanAbsError(yHat, tensor([2], [1.5, 3]))));
  assert.equal(meanAbsError(tensor([2], [1, 4]), tensor([2], [2, 2])), 1.5);
});

test("unknown kernels and non-positive widths are refused", () => {
  const x = tensor([1], [0]);
  assert.throws(() => nadarayaWatson(x, x, x, "cosine"), /unknown kernel 'cosine'/);
  assert.throws(() => nadarayaWatson(x, x, x, "gaussian", 0), /sigma must be positive/);
});
