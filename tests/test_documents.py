"""Schemas.check's quick path for golden documents (verify/documents.py) accepts exactly the
documents the full JSON Schema validator accepts (what Schemas.check does with VERIFY_PLAIN=1), and
a refused document gets the full validator's message. Fuzzed over mutations of a real golden: data
items of every JSON type, dtypes, shapes, tensor names, extra keys, and broken structure above the
tensors."""

import json
import math
import os
import random
from unittest import mock

import pytest

from verify.documents import DocumentError, Schemas

CASE_VALUES = [0, 1, 2.0, 2.5, -1, True, False, None, "", "x", "forward", "9bad id", [], {}, {"a": 1}, math.nan, 2 ** 60]
ITEMS = [0, 1, -3, 2.0, 2.5, -0.0, math.inf, -math.inf, math.nan, True, False, None, "NaN", "Infinity",
         "-Infinity", "nan", "", [], {}, 10**30, 1e300]


@pytest.fixture(scope="module")
def schemas(repo_root):
    return Schemas(repo_root / "golden" / "schemas")


@pytest.fixture(scope="module")
def base(repo_root):
    path = next(iter(sorted((repo_root / "golden" / "attention" / "reference").glob("masked_softmax.*.json"))))
    return json.loads(path.read_text())


def _mutate(doc, rng):
    part = rng.choice(["inputs", "outputs"])
    if not (isinstance(doc, dict) and isinstance(doc.get(part), dict) and doc[part]
            and all(isinstance(t, dict) for t in doc[part].values())):
        return doc  # already broken above the tensors by an earlier mutation
    name = rng.choice(list(doc[part]))
    t = doc[part][name]
    r = rng.random()
    if r < 0.15:
        t["dtype"] = rng.choice(["int64", "float64", "float32", 1, None])
    if r < 0.6:
        t["data"] = [rng.choice(ITEMS) for _ in range(rng.randint(0, 4))]
    elif r < 0.65:
        t["data"] = rng.choice([None, "x", {}, 3])
    elif r < 0.72:
        t["shape"] = rng.choice([[2, 3], [], [-1], [1.0], [1.5], [True], "x", None, [[1]]])
    elif r < 0.77:
        t[rng.choice(["extra", "dtype2"])] = 1
    elif r < 0.8:
        del t[rng.choice(["dtype", "shape", "data"])]
    elif r < 0.86:
        doc[part][rng.choice(["9bad", "a b", "ok.name_2", "_x", "", "é"])] = dict(t)
    elif r < 0.9:
        doc[part][name] = rng.choice([None, [], "x", 3])
    elif r < 0.93:
        doc[part] = rng.choice([None, [], "x", {}])
    elif r < 0.945:
        doc[rng.choice(["schema_version", "generator", "extra", "case"])] = rng.choice([2, "", None, {}, 1])
    elif r < 0.96 and isinstance(doc.get("case"), dict):  # inside the echoed case
        case = doc["case"]
        case[rng.choice(["seed", "kind", "id", "config", "extra", "op"])] = rng.choice(CASE_VALUES)
    else:
        doc.pop(rng.choice(["inputs", "outputs", "case", "engine"]), None)
    return doc


def _checked(schemas, doc, plain):
    """What Schemas.check says of a golden document: None when valid, else its message; with
    VERIFY_PLAIN set to `plain` ("1": the full validator alone)."""
    with mock.patch.dict(os.environ, {"VERIFY_PLAIN": plain}):
        try:
            schemas.check("golden", doc)
        except DocumentError as exc:
            return str(exc)
    return None


def test_the_quick_path_accepts_exactly_what_the_schema_accepts(schemas, base):
    rng = random.Random(20261129)
    seen = {True: 0, False: 0}
    for _ in range(4000):
        doc = _mutate(json.loads(json.dumps(base)), rng)
        if rng.random() < 0.3:
            doc = _mutate(doc, rng)
        expected = _checked(schemas, doc, "1")
        assert _checked(schemas, doc, "") == expected, json.dumps(doc)[:400]
        seen[expected is None] += 1
    assert min(seen.values()) > 400, seen  # both verdicts well exercised


def test_what_the_quick_path_remembers_is_told_apart_by_value_and_type(repo_root, base):
    # A fresh Schemas, so what it remembers of tensor bodies (dtype, shape, keys) is this test's: a
    # body valid with shape [2] (or [2.0], an integer to JSON Schema) says nothing of shape [true]
    # or [2.5], which differ from it only in type or by a fraction (a key comparing by Python
    # equality would take true == 1); the echoed case likewise.
    schemas = Schemas(repo_root / "golden" / "schemas")
    name = next(iter(base["outputs"]))
    for value in [2, True, 2.0, 2.5, 2, False, 0, None, 2]:
        doc = json.loads(json.dumps(base))
        doc["outputs"][name] = {"dtype": "float64", "shape": [value], "data": [0.5, 1.5]}
        doc["case"]["seed"] = value
        valid = type(value) is not bool and value is not None and float(value).is_integer()
        assert (_checked(schemas, doc, "") is None) == (_checked(schemas, doc, "1") is None) == valid, value


def test_a_refused_document_gets_the_full_validators_message(schemas, base):
    doc = json.loads(json.dumps(base))
    name = next(iter(doc["outputs"]))
    doc["outputs"][name]["data"][-1] = "nan"  # a misspelt non-finite string deep in the data
    with pytest.raises(DocumentError) as info:
        schemas.check("golden", doc)
    where = len(doc["outputs"][name]["data"]) - 1
    assert f"at outputs.{name}.data[{where}]" in str(info.value) and "golden.schema.json" in str(info.value)


@pytest.mark.parametrize("dtype, data, valid", [
    ("float64", [1, 2.5, "NaN", "-Infinity"], True),
    ("float64", [1, True], False),  # a boolean is not a number
    ("float64", [1, "nan"], False),
    ("int64", [1, 2.0, -0.0], True),  # jsonschema: a float without a fraction is an integer
    ("int64", [1, 2.5], False),
    ("int64", [1, "NaN"], False),
    ("int64", [math.inf], False),
])
@pytest.mark.parametrize("plain", ["", "1"])  # the quick check, then VERIFY_PLAIN's full validator alone
def test_items_rule(dtype, data, valid, plain, schemas, base, monkeypatch):
    monkeypatch.setenv("VERIFY_PLAIN", plain)
    doc = json.loads(json.dumps(base))
    doc["outputs"][next(iter(doc["outputs"]))] = {"dtype": dtype, "shape": [len(data)], "data": data}
    if valid:
        schemas.check("golden", doc)
    else:
        with pytest.raises(DocumentError, match="golden.schema.json"):
            schemas.check("golden", doc)


# --- the golden text: both writers give the same layout ------------------------------------------

# The example port_ts/test/core/golden.test.ts writes and pins byte for byte; here it is built in both
# languages. docs/goldens.md: the same layout, the same values; scalars may be spelled differently
# (Python's repr 1.2345678901234568e+20 is JavaScript's 123456789012345680000; json.dumps escapes
# non-ASCII), which is why each engine keeps its own golden directory and the two are compared by
# value.
GOLDEN_TEXT_JS = """
import { dumps } from './port_ts/src/core/golden.ts';
const example = {
  z: [1.5, -0, 0, NaN, Infinity, -Infinity, 1e-300, 123456789012345680000, 0.1],
  a: { nested: [[1, 2], [3]], empty: {}, none: [], text: "caf\\u00e9 \\"q\\"", flags: [true, false, null] },
  m: [{ b: 2, a: 1 }, [], "s"],
};
process.stdout.write(dumps(example));
"""


def _layout(text):
    """The text with every string and number token replaced by one placeholder each."""
    import re

    # strings left to right, each whole; a key (followed by ':') stays as it is
    text = re.sub(r'"(?:[^"\\]|\\.)*"(:?)', lambda m: m.group(0) if m.group(1) else "S", text)
    return re.sub(r"(?<![\w\"])-?\d+(?:\.\d+)?(?:[eE][+-]?\d+)?", "N", text)


def test_both_engines_write_the_same_golden_layout_and_values(node, repo_root):
    import subprocess

    from reference.core.golden import dumps

    example = {
        "z": [1.5, -0.0, 0, math.nan, math.inf, -math.inf, 1e-300, 123456789012345680000.0, 0.1],
        "a": {"nested": [[1, 2], [3]], "empty": {}, "none": [], "text": "caf\u00e9 \"q\"", "flags": [True, False, None]},
        "m": [{"b": 2, "a": 1}, [], "s"],
    }
    port = subprocess.run([str(node), "--input-type=module", "-e", GOLDEN_TEXT_JS], cwd=repo_root,
                          capture_output=True, text=True, encoding="utf-8")
    assert port.returncode == 0, port.stderr
    ref = dumps(example)
    assert _layout(port.stdout) == _layout(ref)
    as_doubles = {"parse_int": float}  # numbers read as doubles, as the port and the runner read them
    assert json.loads(port.stdout, **as_doubles) == json.loads(ref, **as_doubles)  # "NaN" etc. are strings
    assert '"NaN", "Infinity", "-Infinity"' in port.stdout and ", -0.0, " in port.stdout and ", -0.0, " in ref


def test_a_list_of_scalars_is_written_as_each_scalar_would_be(repo_root):
    """The reference writes a list of plain scalars with json in one call (reference/core/golden.py,
    _scalars): the same text as scalar by scalar (_scalar), NaN and the infinities still as
    strings, a NumPy scalar still as its repr (neither is json's to write), on random doubles
    across the whole range, subnormals and signed zeros included."""
    import numpy as np

    from reference.core import golden
    rng = random.Random(7)
    doubles = [rng.random() * 10.0 ** rng.randint(-320, 307) * rng.choice((1, -1)) for _ in range(2000)]
    plain = doubles + [0.0, -0.0, 5e-324, 1e16, 1e22, 2.0 ** 53 + 1, 0.1, 3, -7, 2 ** 70, True, False, None,
                       "caf\u00e9 \"q\"", "\x7f\u2028"]
    by_scalar = lambda values: "[" + ", ".join(golden._scalar(v) for v in values) + "]"  # noqa: E731
    assert golden._scalars(plain) == by_scalar(plain)
    for odd in ([math.nan], [math.inf, 1.0], [-math.inf], [np.float64(1.5)], [1.0, np.float64(-0.0)]):
        assert golden._scalars(plain + odd) == by_scalar(plain + odd), odd
    for n in range(golden._LONG + 2):  # either side of where json takes over
        assert golden._scalars(plain[:n]) == by_scalar(plain[:n])
    assert golden.dumps({"a": [math.nan, 1.0]}) == '{\n  "a": ["NaN", 1.0]\n}'
    for odd in (object(), np.int64(3)):  # refused, as scalar by scalar
        with pytest.raises(TypeError, match="into a golden"):
            golden._scalars([1.0, odd])


def test_a_golden_is_written_whole_or_not_at_all(tmp_path):
    """The runner reads a training run's states while the reference still writes them
    (docs/runner.md, "Scheduling"): a reader finds the old document or the new one, never a
    truncated one, and a failed write leaves no temporary file behind."""
    from reference.core import golden
    target = tmp_path / "step_5.json"
    golden.write(target, {"a": [1.0, 2.0]})
    before = target.read_text(encoding="utf-8")
    with pytest.raises(TypeError, match="cannot write object into a golden"):
        golden.write(target, {"a": [1.0], "b": object()})
    assert target.read_text(encoding="utf-8") == before  # opened in place, it would be empty now
    assert sorted(p.name for p in tmp_path.iterdir()) == ["step_5.json"]
    golden.write(target, {"a": [3.0]})
    assert json.loads(target.read_text(encoding="utf-8")) == {"a": [3.0]}
    assert sorted(p.name for p in tmp_path.iterdir()) == ["step_5.json"]
