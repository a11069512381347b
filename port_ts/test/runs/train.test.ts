// The training loop and its plumbing: the loop on a quadratic (records before the update, a
// checkpoint at an end off the grid), state documents through their text and their errors, and
// the refusals to resume or replay past the last step. The state digest, resuming from a
// checkpoint bit for bit and the alignment run (exact at the end, each segment's replay equal to
// the next checkpoint) are the training cases' digests, free runs and replays, bit for bit against
// the reference (tests/test_optim.py, tests/test_training_alignment.py; core/digest.test.ts checks
// the SHA-256 itself).
import { test } from "node:test";
import assert from "node:assert/strict";
import { tensor } from "../../src/core/ops.ts";
import { Generator } from "../../src/core/rng.ts";
import { dumps } from "../../src/core/golden.ts";
import type { Params } from "../../src/core/params.ts";
import { copyState, stateDocument, stateFromDocument, train, type StepFn } from "../../src/runs/train.ts";
import { BUILDERS, replaySegment } from "../../src/cases/casesTraining.ts";

// f(x) = 0.5 * sum (x - c)^2 with gradient x - c: Adam walks x to c
function quadratic(c: number[]): StepFn {
  return (p) => {
    const x = p.x.data;
    let loss = 0;
    const grad = new Float64Array(x.length);
    for (let i = 0; i < x.length; i++) {
      grad[i] = x[i] - c[i];
      loss += 0.5 * grad[i] * grad[i];
    }
    return { loss, grads: { x: { shape: [x.length], data: grad } } };
  };
}

// Every training case runs a multiple of its checkpoint interval: none checkpoints off the grid at the end.
test("train records loss and norm before each update, checkpoints every K and at the end", () => {
  const c = [1, -2, 3];
  const params: Params = { x: tensor([3], [0, 0, 0]) };
  const { history, checkpoints } = train(params, ["x"], quadratic(c), 250, 0.05, 1, 40);
  assert.equal(history.loss.length, 250);
  assert.equal(history.loss[0], 7); // 0.5 * (1 + 4 + 9) at x = 0
  assert.equal(history.gradNorm[0], Math.sqrt(14));
  assert.deepEqual([...checkpoints.keys()], [0, 40, 80, 120, 160, 200, 240, 250]);
  assert.deepEqual(Array.from(checkpoints.get(0)!.params.x.data), [0, 0, 0]);
  assert.equal(checkpoints.get(250)!.state.t, 250);
  assert.deepEqual(checkpoints.get(250)!.params.x.data, params.x.data);
  for (let i = 0; i < 3; i++) assert.ok(Math.abs(params.x.data[i] - c[i]) < 1e-2, `x[${i}] = ${params.x.data[i]}`);
  assert.ok(history.loss[249] < 1e-4);
  // early steps are clipped to norm 1, so the first update moves x by lr along -sign(g)
  assert.ok(history.gradNorm[0] > 1);
});

test("resuming past the run's last step is refused", () => {
  const c = [0.5, 2, -1, 4];
  const whole = train({ x: tensor([4], [1, 1, 1, 1]) }, ["x"], quadratic(c), 30, 0.1, 2, 30);
  const snap = whole.checkpoints.get(30)!;
  const resumed = copyState(snap.params, ["x"], snap.state);
  assert.throws(() => train(resumed.params, ["x"], quadratic(c), 10, 0.1, 2, 30, resumed.state), /steps/);
});

test("a state document reads back exactly through its text, and a changed value is caught", () => {
  const g = new Generator(43);
  const params: Params = { W: g.normal([3, 2]), b: g.normal([2]) };
  const names = ["W", "b"];
  const state = { t: 7, b1t: 0.9 ** 7, b2t: 0.999 ** 7, m: { W: g.normal([3, 2]), b: g.normal([2]) }, v: { W: g.uniform([3, 2]), b: g.uniform([2]) } };
  const doc = JSON.parse(dumps(stateDocument(params, names, state)));
  const back = stateFromDocument(doc, names);
  assert.deepEqual(back.params.W, params.W);
  assert.deepEqual(back.state.v.b, state.v.b);
  assert.deepEqual([back.state.t, back.state.b1t, back.state.b2t], [state.t, state.b1t, state.b2t]);
  doc.outputs["m.W"].data[4] = doc.outputs["m.W"].data[4] + 1e-12;
  assert.throws(() => stateFromDocument(doc, names), /digest/);
  delete doc.outputs["v.b"];
  assert.throws(() => stateFromDocument(doc, names), /missing tensor 'v.b'/);
});

test("a replay past the run's last step is refused", () => {
  const spec = {
    id: "train.alignment.small", op: "train_alignment", seed: 600,
    config: { E: 8, H: 8, pairs: 1, lr: 0.01, clip: 0.25, steps: 4, checkpoint_every: 2 },
  };
  const result = BUILDERS.train_alignment(spec.config, new Generator(spec.seed));
  assert.throws(() => replaySegment(spec, result.states.get(4)!, 5), /last step/);
});
