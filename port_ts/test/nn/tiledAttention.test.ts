// Tiled attention: the online softmax against the plain dot-product attention (within 1e-13, and
// not bit-identical: the two forms round differently), the band and the tiles a query block
// reaches, the backward against finite differences, and the errors.
import { test } from "node:test";
import assert from "node:assert/strict";
import { Generator } from "../../src/core/rng.ts";
import type { Tensor } from "../../src/core/ops.ts";
import { dotProductAttentionForward } from "../../src/nn/dotProductAttention.ts";
import { slidingWindowForward, slidingWindowPlainForward } from "../../src/nn/slidingWindow.ts";
import { bandKeep, keyTiles, tiledAttentionBackward, tiledAttentionForward } from "../../src/nn/tiledAttention.ts";
import { checkFd, dot, tolerance } from "../toolkit.ts";

const FD = tolerance("tiled_attention", "fd_in_order");

const FORMS = 1e-13; // tiled against plain: the same maths, a few ulp apart on values of size ~1

function maxDiff(a: Tensor, b: Tensor): number {
  let m = 0;
  for (let i = 0; i < a.data.length; i++) m = Math.max(m, Math.abs(a.data[i] - b.data[i]));
  return m;
}

test("tiled equals the plain form within a few ulp, not bit for bit", () => {
  const rng = new Generator(4);
  const q = rng.normal([2, 2, 9, 4], 0, 2), k = rng.normal([2, 2, 11, 4], 0, 2), v = rng.normal([2, 2, 11, 3]);
  const { out } = tiledAttentionForward(q, k, v, 4);
  const { out: plain } = dotProductAttentionForward(q, k, v);
  assert.ok(maxDiff(out, plain) <= FORMS, `max |diff| ${maxDiff(out, plain)}`);
  assert.notDeepEqual(Array.from(out.data), Array.from(plain.data));
});

test("sliding window: tiled over the reached tiles equals the mask written out", () => {
  const rng = new Generator(5);
  const q = rng.normal([1, 2, 13, 4], 0, 2), k = rng.normal([1, 2, 13, 4], 0, 2), v = rng.normal([1, 2, 13, 3]);
  for (const [w, tile] of [[1, 4], [3, 4], [5, 2], [20, 3]]) {
    const d = maxDiff(slidingWindowForward(q, k, v, w, tile).out, slidingWindowPlainForward(q, k, v, w).out);
    assert.ok(d <= FORMS, `window ${w}, tile ${tile}: max |diff| ${d}`);
  }
});

test("the band and the key tiles a query block reaches", () => {
  assert.equal(bandKeep(4, 5, true, null), false);
  assert.equal(bandKeep(4, 2, true, 3), true);
  assert.equal(bandKeep(4, 1, true, 3), false);
  assert.deepEqual(keyTiles(8, 12, 13, 4, true, 3), [[4, 8], [8, 12]]);
  assert.deepEqual(keyTiles(0, 4, 13, 4, false, null), [[0, 4], [4, 8], [8, 12], [12, 13]]);
});

test("backward from the stored log-sum-exp against finite differences", () => {
  const rng = new Generator(6);
  const q = rng.normal([1, 1, 5, 2]), k = rng.normal([1, 1, 5, 2]), v = rng.normal([1, 1, 5, 3]), dout = rng.normal([1, 1, 5, 3]);
  for (const window of [null, 2]) {
    const loss = () => dot(tiledAttentionForward(q, k, v, 2, true, window).out, dout);
    const { dq, dk, dv } = tiledAttentionBackward(dout, tiledAttentionForward(q, k, v, 2, true, window).cache);
    checkFd("dq", loss, q, dq, FD);
    checkFd("dk", loss, k, dk, FD);
    checkFd("dv", loss, v, dv, FD);
  }
});

test("errors say what was expected", () => {
  const rng = new Generator(7);
  const q = rng.normal([1, 1, 3, 2]), k = rng.normal([1, 1, 4, 2]);
  assert.throws(() => tiledAttentionForward(q, k, k, 2, true), /needs as many queries as keys/);
  assert.throws(() => tiledAttentionForward(q, k, k, 0), /tile must be a positive integer/);
  assert.throws(() => tiledAttentionForward(q, q, q, 2, false, 2), /window must be a positive integer on a causal mask/);
});
