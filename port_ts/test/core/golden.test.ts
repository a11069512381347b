// golden: the text of a golden document, by the layout docs/goldens.md gives (keys sorted, two-space
// indent, a list of scalars on one line, -0 as -0.0, NaN and the infinities as strings), byte for
// byte; the document's fields. tests/test_documents.py checks that the reference writes the same
// bytes for the same example.
import { test } from "node:test";
import assert from "node:assert/strict";
import { type Json, caseDocument, dumps, ENGINE, SCHEMA_VERSION, tensorDoc } from "../../src/core/golden.ts";
import { GENERATOR } from "../../src/core/rng.ts";
import { intTensor, tensor } from "../../src/core/ops.ts";

/** The example both engines must write the same way (tests/test_documents.py builds it too). */
const EXAMPLE: Json = {
  z: [1.5, -0, 0, NaN, Infinity, -Infinity, 1e-300, 123456789012345680000, 0.1],
  a: { nested: [[1, 2], [3]], empty: {}, none: [], text: "caf\u00e9 \"q\"", flags: [true, false, null] },
  m: [{ b: 2, a: 1 }, [], "s"],
};

test("dumps writes the documented layout, byte for byte", () => {
  const want = [
    "{",
    '  "a": {',
    '    "empty": {},',
    '    "flags": [true, false, null],',
    '    "nested": [',
    "      [1, 2],",
    "      [3]",
    "    ],",
    '    "none": [],',
    '    "text": "caf\u00e9 \\"q\\""',
    "  },",
    '  "m": [',
    "    {",
    '      "a": 1,',
    '      "b": 2',
    "    },",
    "    [],",
    '    "s"',
    "  ],",
    '  "z": [1.5, -0.0, 0, "NaN", "Infinity", "-Infinity", 1e-300, 123456789012345680000, 0.1]',
    "}",
  ].join("\n");
  assert.equal(dumps(EXAMPLE), want);
});

test("scalars alone; a nested value is no scalar", () => {
  assert.equal(dumps(-0), "-0.0");
  assert.equal(dumps(NaN), '"NaN"');
  assert.equal(dumps(null), "null");
  assert.equal(dumps("x"), '"x"');
  assert.equal(dumps([]), "[]");
  assert.equal(dumps({}), "{}");
});

test("a case document: its fields, tensors as dtype, shape and data; digests only when given", () => {
  const spec: Json = { id: "t", kind: "forward", op: "x", seed: 1 };
  const doc = caseDocument(spec, { x: tensor([2], [1, -0]) }, { ids: intTensor([1, 2], [3, 4]) });
  assert.deepEqual(Object.keys(doc).sort(), ["case", "engine", "generator", "inputs", "outputs", "schema_version"]);
  assert.equal(doc.schema_version, SCHEMA_VERSION);
  assert.deepEqual(doc.engine, { ...ENGINE });
  assert.equal(doc.generator, GENERATOR);
  assert.deepEqual(doc.case, spec);
  assert.deepEqual(doc.inputs, { x: { dtype: "float64", shape: [2], data: [1, -0] } });
  assert.deepEqual(doc.outputs, { ids: tensorDoc(intTensor([1, 2], [3, 4])) });
  assert.deepEqual(tensorDoc(intTensor([1, 2], [3, 4])), { dtype: "int64", shape: [1, 2], data: [3, 4] });
  const withDigests = caseDocument(spec, {}, {}, { "init.params": "ab" });
  assert.deepEqual(withDigests.digests, { "init.params": "ab" });
});
