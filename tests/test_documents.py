"""Schemas.check's quick path for golden documents (verify/documents.py, _GoldenQuick) accepts
exactly the documents the full JSON Schema validator accepts, and a refused document gets the full
validator's message. Fuzzed over mutations of a real golden: data items of every JSON type, dtypes,
shapes, tensor names, extra keys, and broken structure above the tensors."""

import json
import math
import random

import pytest

from verify.documents import DocumentError, Schemas, _items_valid

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
    elif r < 0.96:
        doc[rng.choice(["schema_version", "generator", "extra", "case"])] = rng.choice([2, "", None, {}, 1])
    else:
        doc.pop(rng.choice(["inputs", "outputs", "case", "engine"]), None)
    return doc


def test_the_quick_path_accepts_exactly_what_the_schema_accepts(schemas, base):
    full = schemas._validators["golden"]
    rng = random.Random(20261129)
    seen = {True: 0, False: 0}
    for _ in range(4000):
        doc = _mutate(json.loads(json.dumps(base)), rng)
        if rng.random() < 0.3:
            doc = _mutate(doc, rng)
        expected = full.is_valid(doc)
        assert schemas._golden_quick.valid(doc) == expected, json.dumps(doc)[:400]
        seen[expected] += 1
    assert min(seen.values()) > 400, seen  # both verdicts well exercised


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
def test_items_rule(dtype, data, valid):
    assert _items_valid(dtype, data) is valid
