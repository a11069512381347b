// The lesson's block: the lesson's parameter counts (49,984 and 7,087,872), PyTorch's init bounds,
// the causal mask (a later key never moves an earlier row, bit for bit), and the backward against
// finite differences of L = sum(out * dout).
import { test } from "node:test";
import assert from "node:assert/strict";
import { Generator } from "../../src/core/rng.ts";
import { causalKeep } from "../../src/nn/lessonAttention.ts";
import { NAMES, initLessonBlockParams, lessonBlockBackward, lessonBlockForward, lessonBlockParamCount } from "../../src/nn/lessonBlock.ts";
import { checkFd, dot, tolerance } from "../toolkit.ts";

const FD = tolerance("lesson_block", "fd_in_order");

test("parameter counts: 49,984 at d 64, F 256 and 7,087,872 at d 768, F 3072, as init draws them", () => {
  assert.equal(lessonBlockParamCount(64, 256), 49_984);
  assert.equal(lessonBlockParamCount(768, 3072), 7_087_872);
  const p = initLessonBlockParams(new Generator(0), 64, 256);
  assert.deepEqual(Object.keys(p), [...NAMES]);
  assert.equal(Object.values(p).reduce((n, t) => n + t.data.length, 0), 49_984);
});

test("init: W_in Xavier-uniform over (3d, d), W_o U(+-1/sqrt(d)), attention biases 0", () => {
  const d = 64, p = initLessonBlockParams(new Generator(1), d, 256);
  const max = (a: Float64Array) => a.reduce((m, x) => Math.max(m, Math.abs(x)), 0);
  assert.ok(max(p["attn.W_in"].data) <= Math.sqrt(6 / (4 * d)) && max(p["attn.W_in"].data) > 0.99 * Math.sqrt(6 / (4 * d)));
  assert.ok(max(p["attn.W_o"].data) <= 1 / Math.sqrt(d));
  assert.equal(max(p["attn.b_in"].data), 0);
  assert.equal(max(p["attn.b_o"].data), 0);
});

test("causal: the first rows are what the block computes on the prefix alone, bit for bit", () => {
  const rng = new Generator(2), d = 8;
  const p = initLessonBlockParams(rng, d, 16);
  const x = rng.normal([1, 6, d]);
  const { out } = lessonBlockForward(x, p, 2, causalKeep(6));
  const prefix = { shape: [1, 4, d], data: x.data.slice(0, 4 * d) };
  const { out: short } = lessonBlockForward(prefix, p, 2, causalKeep(4));
  assert.deepEqual(Array.from(out.data.slice(0, 4 * d)), Array.from(short.data));
});

test("backward against finite differences, every input and parameter", () => {
  const rng = new Generator(3), d = 4;
  const p = initLessonBlockParams(rng, d, 8);
  for (const name of ["attn.b_in", "attn.b_o", "ln1.beta"]) p[name] = rng.normal(p[name].shape, 0, 0.3);
  const x = rng.normal([2, 3, d]), dout = rng.normal([2, 3, d]);
  const keep = causalKeep(3);
  const loss = () => dot(lessonBlockForward(x, p, 2, keep).out, dout);
  const { dx, grads } = lessonBlockBackward(dout, lessonBlockForward(x, p, 2, keep).cache);
  checkFd("dx", loss, x, dx, FD);
  for (const name of NAMES) checkFd(name, loss, p[name], grads[name], FD);
});
