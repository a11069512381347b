// A case's configuration: every builder rejects a malformed config with a CaseError whose message
// names the key, before it computes anything; the helpers of caseConfig.ts say what was expected
// and what was found. (The runner turns a CaseError into one line and exit 2: tests/test_hostile.py.)
import { test } from "node:test";
import assert from "node:assert/strict";
import { CaseError, floatArray, get, intArray, shape } from "../../src/core/caseConfig.ts";
import { COMPUTE, runCase, runCaseWithStates, type CaseSpec } from "../../src/cases/cases.ts";
import { fixture } from "../toolkit.ts";

/** A validator for assert.throws: a CaseError whose message matches. */
function caseError(pattern: RegExp): (err: unknown) => boolean {
  return (err: unknown) => err instanceof CaseError && pattern.test(err.message);
}

function rejects(spec: CaseSpec, pattern: RegExp): void {
  assert.throws(() => runCase(spec), (err: unknown) => {
    assert.ok(err instanceof CaseError, `${spec.op}: expected a CaseError, got ${String(err)}`);
    assert.match((err as Error).message, pattern);
    return true;
  });
}

// One small, valid config per op, shared with the reference's twin test (tests/test_case_config.py).
interface BadNumber { op: string; set: { [key: string]: unknown }; error: string }
const SHARED = fixture<{ cases: CaseSpec[]; bad_numbers: BadNumber[] }>("small-configs.json");
const BASE = SHARED.cases;

const isCount = (v: unknown) => typeof v === "number" && Number.isInteger(v) && v >= 1;
const FLOAT_KEYS = new Set(["lr", "clip"]); // numbers that may happen to be whole (clip 1.0)
const escape = (s: string) => s.replace(/[.*+?^${}()|[\]\\]/g, "\\$&");

// An op that computes from handed inputs reads only what its compute needs (eps, heads); the keys
// that shape its inputs are read by the engine that draws them, the reference
// (tests/test_case_config.py). Here: the ops the port draws itself.
for (const base of BASE.filter((b) => !Object.hasOwn(COMPUTE, b.op))) {
  test(`${base.op}: its small config is valid`, () => {
    assert.equal(typeof runCaseWithStates(base).doc, "object");
  });
  for (const [key, value] of Object.entries(base.config ?? {})) {
    if (!isCount(value) || FLOAT_KEYS.has(key)) continue;
    test(`${base.op}: '${key}' must be a positive integer (0, -1, 2.5, "3", true are rejected, naming it)`, () => {
      for (const bad of [0, -1, 2.5, "3", true]) {
        rejects({ ...base, config: { ...base.config, [key]: bad } }, new RegExp(`\\b${escape(key)}\\b`));
      }
    });
  }
}

for (const base of BASE.filter((b) => b.kind === "training")) {
  for (const key of ["lr", "clip"]) {
    test(`${base.op}: '${key}' must be a positive number`, () => {
      for (const bad of [0, -0.5, "0.1", true]) {
        rejects({ ...base, config: { ...base.config, [key]: bad } }, new RegExp(`'${key}' must be a positive number, got ${escape(JSON.stringify(bad))}`));
      }
    });
  }
}

test("a handed op without its inputs, or with a document that lacks a tensor or the position, says what is missing", () => {
  const spec: CaseSpec = { id: "t", kind: "forward", op: "layer_norm", seed: 1, config: {} };
  rejects(spec, /case 't' of op 'layer_norm' needs its inputs handed in the request/);
  const x = { dtype: "float64", shape: [1, 2], data: [1, "NaN"] };
  const handed = (inputs: unknown, position: unknown = 0) => ({ inputs, position });
  assert.throws(() => runCase(spec, undefined, handed({ x })), caseError(/^the handed inputs lack \[gamma, beta\]; they hold \[x\]$/));
  assert.throws(() => runCase(spec, undefined, handed({ x: { ...x, data: [1] } })), caseError(/'x' without a shape and as many items/));
  assert.throws(() => runCase(spec, undefined, handed({ x: { ...x, dtype: "float32" } })), caseError(/'x' of dtype "float32"; the dtypes are float64 and int64/));
  assert.throws(() => runCase(spec, undefined, handed({ x: { ...x, data: [1, "nan"] } })), caseError(/'x', float64, with the item "nan"/));
  for (const position of [undefined, -1, 2.5, "3"]) {
    assert.throws(() => runCase(spec, undefined, { inputs: { x }, position }), caseError(/^the document handed to 't' needs 'position', the generator's counter/));
  }
  assert.throws(() => runCase(spec, undefined, [x]), caseError(/^the document handed to 't' must be an object/));
  const check: CaseSpec = { id: "g", kind: "gradcheck", op: "gradcheck_rope", seed: 1, config: {} };
  const dout = { dtype: "float64", shape: [1, 1, 2], data: [1, 2] };
  assert.throws(() => runCase(check, undefined, handed({ dout })), caseError(/^a gradient check needs the 'parameters' of its handed document$/));
});

test("an unknown op names the ops the engine knows", () => {
  rejects({ id: "t", kind: "forward", op: "softmax_typo", seed: 1 }, /unknown op 'softmax_typo'; this engine knows \[.*masked_softmax.*\]/);
});

test("a missing key is named, with the keys that were given", () => {
  rejects({ id: "t", kind: "forward", op: "sinusoidal_table", seed: 1, config: { max_len: 5, bias: true } }, /config needs 'd'; found keys \[bias, max_len\]/);
  assert.throws(() => get({ b: 1, a: 2 }, "c"), caseError(/^config needs 'c'; found keys \[a, b\]$/));
  assert.equal(get({ a: 0 }, "a", 5), 0);
  assert.equal(get({}, "a", 5), 5);
});

test("shape: a list of non-negative integers of the given rank", () => {
  assert.deepEqual(shape({ s: [2, 0, 3] }, "s", 3), [2, 0, 3]);
  assert.throws(() => shape({ s: 3 }, "s"), caseError(/^config 's' must be a list of non-negative integers, got 3$/));
  assert.throws(() => shape({ s: [2, -1] }, "s"), caseError(/^config 's' must be a list of non-negative integers, got \[2,-1\]$/));
  assert.throws(() => shape({ s: [2, 1.5] }, "s"), caseError(/must be a list of non-negative integers/));
  assert.throws(() => shape({ s: [2, 3] }, "s", 3), caseError(/^config 's' must have 3 entries, got \[2,3\]$/));
});

test("explicit arrays: nested lists of numbers (integers where asked), not ragged", () => {
  assert.deepEqual(intArray([[1, 2], [3, 4]], "v"), { shape: [2, 2], data: Int32Array.from([1, 2, 3, 4]) });
  assert.deepEqual(intArray([], "v"), { shape: [0], data: new Int32Array(0) });
  assert.deepEqual(floatArray(2.5, "v"), { shape: [], data: Float64Array.from([2.5]) });
  assert.throws(() => intArray([[1, 2], [3]], "v"), caseError(/^config 'v' is ragged: \[\[1,2\],\[3\]\]$/));
  assert.throws(() => intArray([1, 2.5], "v"), caseError(/^config 'v' must hold integers, got \[1,2.5\]$/));
  assert.throws(() => floatArray([1, "x"], "v"), caseError(/^config 'v' must hold numbers, got "x"$/));
});

test("case-specific checks say what is allowed", () => {
  const reversal = BASE.find((b) => b.op === "train_reversal")!;
  rejects({ ...reversal, config: { ...reversal.config, d: 9, heads: 2 } }, /config d = 9 must be a multiple of heads = 2/);
  rejects({ ...reversal, config: { ...reversal.config, min_digits: 6, max_digits: 5 } }, /config digits 6\.\.5: need min_digits <= max_digits and max_digits >= 6/);
  const garments = BASE.find((b) => b.op === "garments_data")!;
  for (const classes of [1, 9]) rejects({ ...garments, config: { n: 16, classes } }, new RegExp(`garments: classes must be in \\[2, 8\\], got ${classes}`));
  const vit = BASE.find((b) => b.op === "train_vit")!;
  rejects({ ...vit, config: { ...vit.config, dropout: 0.1 } }, /train_vit: the baked run has dropout 0 \(docs\/training\.md\), got 0\.1/);
  rejects({ id: "t", kind: "forward", op: "sinusoidal_table", seed: 1, config: { max_len: 50, d: 16, rows: [0, 50] } }, /config 'rows' must list positions in \[0, 50\), got \[0,50\]/);
  rejects({ id: "t", kind: "forward", op: "score_scaling", seed: 1, config: { dims: [4, 0], n: 10 } }, /config 'dims' must be a list of positive integers, got \[4,0\]/);
});
