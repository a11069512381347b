// erf and GELU: known values from outside this code, oddness, the pieces' edges, the limits,
// and the gap to the tanh approximation (so using it instead would fail here). Backward: the
// derivative at known points and finite differences across the erf pieces.
import { test } from "node:test";
import assert from "node:assert/strict";
import { tensor } from "../../src/core/ops.ts";
import { erf, geluBackward, geluForward } from "../../src/nn/gelu.ts";
import { checkFd, dot, tolerance } from "../toolkit.ts";

/** One unit in the last place of |v| (v normal, non-zero). */
function ulp(v: number): number {
  return 2 ** (Math.floor(Math.log2(Math.abs(v))) - 52);
}

// erf values from CPython's math.erf (the C library's erf), not from this code.
// Our fdlibm-scheme erf stays within 1 ulp of them; allowed 2 ulp (either side may be off by 1).
const ERF_KNOWN: [number, number][] = [
  [0.5, 0.5204998778130465],
  [1, 0.8427007929497149],
  [2, 0.9953222650189527],
  [-3, -0.9999779095030014],
  [0.1, 0.1124629160182849],
  [1.5, 0.9661051464753108],
  [0.84375, 0.7672256612323416], // the first piece boundary
  [1.25, 0.9229001282564582], // the second
  [3, 0.9999779095030014],
  [4, 0.9999999845827421],
];
const ERF_ULPS = tolerance("gelu", "erf_ulps").value;

test("erf matches known values to within 2 ulp", () => {
  for (const [x, want] of ERF_KNOWN) {
    const got = erf(x);
    assert.ok(Math.abs(got - want) <= ERF_ULPS * ulp(want), `erf(${x}) = ${got}, want ${want}`);
  }
});

test("erf is odd to the bit, keeps -0, and goes to +-1 and NaN at the ends", () => {
  for (let i = 0; i <= 4000; i++) {
    const x = i * 0.0025 + 1e-7; // 0..10, off the grid points of the pieces
    assert.equal(erf(-x), -erf(x), `erf(-${x})`);
  }
  assert.ok(Object.is(erf(0), 0) && Object.is(erf(-0), -0));
  assert.equal(erf(Infinity), 1);
  assert.equal(erf(-Infinity), -1);
  assert.equal(erf(6), 1);
  assert.ok(Number.isNaN(erf(NaN)));
  assert.equal(erf(1e-300), 1e-300 + 1e-300 * 0.12837916709551259); // x (1 + (2/sqrt(pi) - 1))
});

test("erf is monotone and bounded on a dense grid across every piece", () => {
  let prev = -1;
  for (let i = 0; i <= 200000; i++) {
    const v = erf(-10 + i * 1e-4);
    assert.ok(v >= prev && v >= -1 && v <= 1, `erf not monotone at ${-10 + i * 1e-4}: ${v} after ${prev}`);
    prev = v;
  }
});

test("GELU is x * Phi(x): known values, 0, and the limits", () => {
  // Phi(1) = 0.8413447460685429, Phi(-1) = 0.15865525393145707 (normal tables)
  const { out } = geluForward(tensor([6], [1, -1, 0, 10, -10, 3]));
  assert.ok(Math.abs(out.data[0] - 0.8413447460685429) <= 2e-16);
  // 1 + erf(-1/sqrt 2) = 0.317... cancels: erf's ulp (1.1e-16) survives, halved by x * 0.5
  assert.ok(Math.abs(out.data[1] - -0.15865525393145707) <= 6e-17);
  assert.equal(out.data[2], 0);
  assert.equal(out.data[3], 10); // erf(10 / sqrt 2) = 1 exactly
  assert.ok(out.data[4] <= 0 && out.data[4] > -1e-22); // -10 * Phi(-10) = -7.6e-23
  assert.ok(Math.abs(out.data[5] - 3 * 0.9986501019683699) <= 4.5e-16); // Phi(3)
});

test("the tanh approximation is 4.7e-4 away near x = -2.7: this GELU is not it", () => {
  const n = 20001;
  const x = tensor([n], Array.from({ length: n }, (_, i) => -10 + i * 1e-3));
  const { out } = geluForward(x);
  let worst = 0, at = 0;
  for (let i = 0; i < n; i++) {
    const v = x.data[i];
    const approx = 0.5 * v * (1 + Math.tanh(Math.sqrt(2 / Math.PI) * (v + 0.044715 * v ** 3)));
    const gap = Math.abs(out.data[i] - approx);
    if (gap > worst) { worst = gap; at = v; }
  }
  assert.ok(worst > 4.5e-4 && worst < 4.9e-4, `largest gap ${worst}`);
  assert.ok(Math.abs(at - -2.7) < 0.2, `largest gap at ${at}`);
});

// ---- backward ----

test("the derivative Phi(x) + x phi(x) at known points", () => {
  const x = tensor([5], [0, 1, -1, 10, -10]);
  const dx = geluBackward(tensor([5], [1, 1, 1, 1, 1]), geluForward(x).cache);
  // Phi(1) = 0.8413447460685429, phi(1) = 0.24197072451914337 (normal tables)
  assert.equal(dx.data[0], 0.5);
  assert.ok(Math.abs(dx.data[1] - (0.8413447460685429 + 0.24197072451914337)) <= 4.5e-16);
  assert.ok(Math.abs(dx.data[2] - (0.15865525393145707 - 0.24197072451914337)) <= 2.3e-16);
  assert.equal(dx.data[3], 1);
  assert.ok(Math.abs(dx.data[4]) < 1e-20);
});

test("backward matches finite differences across every erf piece", () => {
  const n = 57;
  const x = tensor([n], Array.from({ length: n }, (_, i) => -7 + i * 0.25 + 0.013)); // off the piece edges
  const dout = tensor([n], Array.from({ length: n }, (_, i) => 1 + (i % 5) * 0.3 - 0.7));
  const dx = geluBackward(dout, geluForward(x).cache);
  checkFd("dx", () => dot(geluForward(x).out, dout), x, dx, tolerance("gelu", "fd_in_order"));
});
