// FFN: ReLU gives +0 for -0 and negatives and its gate is closed at 0, a missing parameter, the
// fused layer against Linear, relu, Linear composed, and the row kernels. Values on random inputs
// are the cases ffn.*, bit for bit against the reference; the backward is compared with the
// reference's in tests/test_backward_layers.py. No case has a pre-activation of exactly 0 or -0.
import { test } from "node:test";
import assert from "node:assert/strict";
import { tensor } from "../../src/core/ops.ts";
import { Generator } from "../../src/core/rng.ts";
import { ffnBackward, ffnForward, relu, reluBackward } from "../../src/nn/ffn.ts";
import { linearBackward, linearForward } from "../../src/nn/linear.ts";
import { sameBitsInKernels } from "../toolkit.ts";

test("relu keeps positives and maps negatives, -0 and +0 to +0", () => {
  const h = relu(tensor([5], [2.5, -3, -0, 0, 1e-300])).data;
  assert.deepEqual(Array.from(h), [2.5, 0, 0, 0, 1e-300]);
  assert.ok(Object.is(h[1], 0) && Object.is(h[2], 0), "negatives and -0 give +0");
});

test("a missing parameter is an error naming it", () => {
  assert.throws(() => ffnForward(tensor([1, 1], [1]), { W1: tensor([1, 1], [1]) }), /params needs 'b1'/);
});

// ---- backward ----

test("reluBackward passes dout where x > 0 and gives +0 at x <= 0 (0 and -0 included)", () => {
  const d = reluBackward(tensor([5], [1, 2, 3, 4, -5]), tensor([5], [0.5, 0, -0, -1, 2]));
  assert.deepEqual(Array.from(d.data), [1, 0, 0, 0, -5]);
  assert.ok(Object.is(d.data[1], 0) && Object.is(d.data[2], 0));
});

test("forward and backward give the bits of Linear, relu, Linear composed (the ReLU in place, its gate read off h)", () => {
  const g = new Generator(36);
  const x = g.normal([3, 4, 4]), dout = g.normal([3, 4, 4]);
  const params = { W1: g.uniform([6, 4], -0.5, 0.5), b1: g.uniform([6], -0.5, 0.5), W2: g.uniform([4, 6], -0.4, 0.4), b2: g.uniform([4], -0.4, 0.4) };
  // hidden units 0 and 1 get exact 0 and -0 pre-activations: W1's rows 0, b1's entries 0 and -0
  params.W1.data.fill(0, 0, 8);
  params.b1.data[0] = 0;
  params.b1.data[1] = -0;
  const { out: hPre, cache: lin1 } = linearForward(x, params.W1, params.b1);
  const h = relu(hPre);
  const { out: want, cache: lin2 } = linearForward(h, params.W2, params.b2);
  const { dx: dh, dW: dW2, db: db2 } = linearBackward(dout, lin2);
  const { dx: wantDx, dW: dW1, db: db1 } = linearBackward(reluBackward(dh, hPre), lin1);
  const { out, cache } = ffnForward(x, params);
  assert.ok(Array.from(hPre.data).some((v) => v < 0) && Array.from(hPre.data).some((v) => v > 0), "both sides of the ReLU");
  assert.deepEqual(Array.from(out.data), Array.from(want.data));
  const { dx, grads } = ffnBackward(dout, cache);
  assert.deepEqual(Array.from(dx.data), Array.from(wantDx.data));
  for (const [k, w] of [["W1", dW1], ["b1", db1!], ["W2", dW2], ["b2", db2!]] as const) {
    assert.deepEqual(Array.from(grads[k].data), Array.from(w.data), `d${k}`);
  }
});

test("[wasm] forward and backward with the bias-and-ReLU pass and its gate in the row kernels give the loops' bits", () => {
  const g = new Generator(37);
  for (const [rows, d, F] of [[37, 4, 6], [1, 3, 2], [12, 5, 64], [9, 4, 5]]) {
    const x = g.normal([rows, d]), dout = g.normal([rows, d]);
    const W1 = g.uniform([F, d], -0.5, 0.5);
    W1.data.fill(0, 0, d); // hidden unit 0: x W1^T = +0 exactly, so hPre = b1[0] + 0
    const b1 = g.uniform([F], -0.5, 0.5);
    b1.data[0] = -0; // hPre = +0: the ReLU's +0 and its gate closed at 0
    if (F > 2) b1.data[1] = NaN; // relu(NaN) = +0, and its gate closed
    if (F > 3) b1.data[2] = Infinity;
    if (F > 4) b1.data[3] = -Infinity;
    dout.data[0] = -0;
    const params = { W1, b1, W2: g.uniform([d, F], -0.45, 0.45), b2: g.uniform([d], -0.45, 0.45) };
    // F odd: the loops themselves (the kernels take two columns at a time)
    sameBitsInKernels(`rows ${rows}, d ${d}, F ${F}`, (inWs) => {
      const { out, cache } = ffnForward(inWs(x), params);
      const { dx, grads } = ffnBackward(inWs(dout), cache);
      return [out.data.slice(), cache.h.data.slice(), dx.data.slice(), ...["W1", "b1", "W2", "b2"].map((k) => grads[k].data.slice())];
    }, F % 2 === 0 ? 2 : 0);
  }
});
