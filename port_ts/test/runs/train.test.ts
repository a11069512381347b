// The training loop and its plumbing: the state digest against node:crypto's SHA-256 and two
// hashlib values, the loop on a quadratic (records before the update, checkpoints, resuming
// from a checkpoint bit for bit), state documents through their text, and the alignment run:
// exact at the end, replay of a segment equal to the next checkpoint.
import { test } from "node:test";
import assert from "node:assert/strict";
import { createHash } from "node:crypto";
import { tensor } from "../../src/core/ops.ts";
import { Generator } from "../../src/core/rng.ts";
import { dumps } from "../../src/core/golden.ts";
import type { Params } from "../../src/core/params.ts";
import { copyState, stateDigest, stateDocument, stateFromDocument, train, type StepFn } from "../../src/runs/train.ts";
import { BUILDERS, replaySegment } from "../../src/cases/casesTraining.ts";

function nodeDigest(values: number[]): string {
  const bytes = Buffer.alloc(values.length * 8);
  values.forEach((v, i) => bytes.writeDoubleLE(v, i * 8));
  return createHash("sha256").update(bytes).digest("hex");
}

test("stateDigest is SHA-256 of little-endian float64 bytes (every padding length)", () => {
  assert.equal(stateDigest({}, []), "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
  // hashlib.sha256(struct.pack('<d', 1.0))
  assert.equal(stateDigest({ x: tensor([1], [1]) }, ["x"]), "6c3c396ed6b5c36dcae172271f462051b1266b851e92df3deea8ac65478fd712");
  const g = new Generator(41);
  for (const n of [1, 6, 7, 8, 9, 15, 16, 17, 1000]) {
    const x = g.normal([n]);
    assert.equal(stateDigest({ x }, ["x"]), nodeDigest(Array.from(x.data)), `${n} doubles`);
  }
});

test("the full state digest walks params, then m, then v, then [t, b1t, b2t]", () => {
  const g = new Generator(42);
  const params: Params = { a: g.normal([2, 3]), b: g.normal([4]) };
  const names = ["a", "b"];
  const state = { t: 3, b1t: 0.729, b2t: 0.997002999, m: { a: g.normal([2, 3]), b: g.normal([4]) }, v: { a: g.uniform([2, 3]), b: g.uniform([4]) } };
  const flat = [params.a, params.b, state.m.a, state.m.b, state.v.a, state.v.b].flatMap((t) => Array.from(t.data));
  assert.equal(stateDigest(params, names, state), nodeDigest([...flat, 3, 0.729, 0.997002999]));
  assert.notEqual(stateDigest(params, ["b", "a"], state), stateDigest(params, names, state));
  const other = copyState(params, names, state);
  other.state.v.b.data[3] = other.state.v.b.data[3] * (1 + 2 ** -52);
  assert.notEqual(stateDigest(other.params, names, other.state), stateDigest(params, names, state));
  assert.equal(stateDigest(params, names, state), stateDigest(params, names, copyState(params, names, state).state));
});

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

test("resuming from a checkpoint reproduces the uninterrupted run bit for bit", () => {
  const c = [0.5, 2, -1, 4];
  const fresh: Params = { x: tensor([4], [1, 1, 1, 1]) };
  const whole = train(fresh, ["x"], quadratic(c), 90, 0.1, 2, 30);
  const snap = whole.checkpoints.get(30)!;
  const resumed = copyState(snap.params, ["x"], snap.state);
  const rest = train(resumed.params, ["x"], quadratic(c), 90, 0.1, 2, 30, resumed.state);
  assert.deepEqual(rest.history.loss, whole.history.loss.slice(30));
  assert.deepEqual(resumed.params.x.data, fresh.x.data);
  assert.equal(stateDigest(resumed.params, ["x"], resumed.state), stateDigest(fresh, ["x"], whole.checkpoints.get(90)!.state));
  assert.deepEqual([...rest.checkpoints.keys()], [30, 60, 90]);
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

test("the alignment run ends exact, and replaying a segment gives the next checkpoint", () => {
  const spec = {
    id: "train.alignment.small", op: "train_alignment", seed: 600,
    config: { E: 8, H: 8, pairs: 1, lr: 0.01, clip: 0.25, steps: 60, checkpoint_every: 20 },
  };
  const result = BUILDERS.train_alignment(spec.config, new Generator(spec.seed));
  assert.deepEqual(Array.from(result.outputs["alignment.argmax"].data), [0, 2, 1, 3]);
  assert.deepEqual(Array.from(result.outputs["checkpoint_steps"].data), [0, 20, 40, 60]);
  assert.deepEqual([...result.states.keys()], [0, 20, 40, 60]);
  assert.equal(result.outputs.loss.shape[0], 60);
  for (const t of [20, 40, 60]) {
    const replayed = replaySegment(spec, result.states.get(t - 20)!, t);
    assert.equal(dumps({ ...replayed, case: null }), dumps({ ...result.states.get(t)!, case: null }), `segment ending at ${t}`);
    assert.equal((replayed.digests as Record<string, string>).state, result.digests[`state.${t}`]);
  }
  assert.throws(() => replaySegment(spec, result.states.get(60)!, 61), /last step/);
});
