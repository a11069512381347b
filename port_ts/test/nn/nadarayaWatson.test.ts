// Nadaraya-Watson: the book's kernels (strict boxcar, triangular "epanechikov"), weights that are
// a softmax of -u^2/2 for the gaussian, the constant kernel's mean, the lab's data, and the NaN
// of a query no key reaches.
import { test } from "node:test";
import assert from "node:assert/strict";
import { Generator } from "../../src/core/rng.ts";
import { tensor } from "../../src/core/ops.ts";
import { gaussian, boxcar, constant, epanechikov, regressionData, nadarayaWatson, meanAbsError } from "../../src/nn/nadarayaWatson.ts";
import { tolerance } from "../toolkit.ts";

const COLUMN = tolerance("nadaraya_watson", "column").value;
const DIRECT = tolerance("nadaraya_watson", "direct").value;

test("kernels as the book codes them", () => {
  assert.equal(gaussian(0), 1);
  assert.equal(gaussian(2), Math.exp(-2));
  assert.equal(boxcar(0.999), 1);
  assert.equal(boxcar(1), 0); // strict <, as the book's code (its text says <= 1)
  assert.equal(boxcar(-1.5), 0);
  assert.equal(constant(123), 1);
  assert.equal(epanechikov(0.5), 0.5); // triangular max(1 - |u|, 0), not 3/4 (1 - u^2)
  assert.equal(epanechikov(-0.25), 0.75);
  assert.equal(epanechikov(3), 0);
});

test("the lab's data: 40 sorted positions in [0, 5), 40 noisy targets, x_val = j / 10", () => {
  const g = new Generator(430);
  const data = regressionData(g);
  const x = data.xTrain.data;
  for (let i = 0; i < 40; i++) {
    assert.ok(x[i] >= 0 && x[i] < 5);
    if (i > 0) assert.ok(x[i - 1] <= x[i]);
  }
  assert.equal(data.xVal.data.length, 50);
  assert.equal(data.xVal.data[49], 4.9);
  assert.equal(data.xVal.data[3], 0.3); // 3 / 10, not 0.1 + 0.1 + 0.1
  assert.equal(data.yTrue.data[10], 2 * Math.sin(1) + 1);
  // uniforms first (40 counters), then the polar method's pairs for 40 normals
  const check = new Generator(430);
  const u = Array.from(check.uniform([40], 0, 5).data).sort((a, b) => a - b);
  assert.deepEqual(Array.from(x), u);
  const noise = check.normal([40]).data;
  for (let i = 0; i < 40; i++) assert.equal(data.yTrain.data[i], 2 * Math.sin(u[i]) + u[i] + noise[i]);
  assert.equal(g.counter, check.counter);
});

test("every column of weights sums to 1, for every kernel", () => {
  const data = regressionData(new Generator(431));
  for (const k of ["gaussian", "boxcar", "constant", "epanechikov"]) {
    const { weights } = nadarayaWatson(data.xTrain, data.yTrain, data.xVal, k, 1);
    for (let j = 0; j < 50; j++) {
      let s = 0;
      for (let i = 0; i < 40; i++) s += weights.data[i * 50 + j];
      assert.ok(Math.abs(s - 1) <= COLUMN, `${k}, query ${j}: column sums to ${s}`);
    }
  }
});

test("the constant kernel predicts the mean of y_train everywhere", () => {
  const data = regressionData(new Generator(432));
  const { yHat } = nadarayaWatson(data.xTrain, data.yTrain, data.xVal, "constant");
  let mean = 0;
  for (const y of data.yTrain.data) mean += y / 40;
  for (const v of yHat.data) assert.ok(Math.abs(v - mean) <= 1e-14, `${v} vs ${mean}`);
});

test("gaussian weights are a softmax over keys of -(distance / sigma)^2 / 2", () => {
  const data = regressionData(new Generator(433));
  const sigma = 0.5;
  const { yHat, weights } = nadarayaWatson(data.xTrain, data.yTrain, data.xVal, "gaussian", sigma);
  for (let j = 0; j < 50; j++) {
    const a = Array.from(data.xTrain.data, (xi) => -(((xi - data.xVal.data[j]) / sigma) ** 2) / 2);
    const m = Math.max(...a);
    const e = a.map((s) => Math.exp(s - m));
    const z = e.reduce((s, v) => s + v, 0);
    let want = 0;
    for (let i = 0; i < 40; i++) {
      assert.ok(Math.abs(weights.data[i * 50 + j] - e[i] / z) <= DIRECT);
      want += data.yTrain.data[i] * (e[i] / z);
    }
    assert.ok(Math.abs(yHat.data[j] - want) <= DIRECT);
  }
});

test("a very narrow gaussian returns the value of the nearest key", () => {
  const x = tensor([3], [0, 1, 2]), y = tensor([3], [5, -1, 3]);
  const { yHat } = nadarayaWatson(x, y, tensor([2], [1, 1.9]), "gaussian", 0.05);
  assert.ok(Math.abs(yHat.data[0] - -1) < 1e-80); // the others weigh exp(-200) relative
  assert.ok(Math.abs(yHat.data[1] - 3) < 1e-8); // exp(-(0.9/0.05)^2/2 + (0.1/0.05)^2/2) = exp(-160)
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
