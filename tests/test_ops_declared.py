"""Each op declared once (ops/attention.json, verify/ops.py): every catalogue op has its declaration
and every declaration its cases; what an op builds on names declared ops, without a cycle; every
tensor of every committed golden has its axis names."""

import json

import pytest
from jsonschema import Draft202012Validator

from verify.catalogue import load
from verify.documents import Schemas
from verify.ops import Declarations


@pytest.fixture(scope="module")
def declared(repo_root):
    doc = json.loads((repo_root / "ops" / "attention.json").read_text())
    schema = json.loads((repo_root / "golden" / "schemas" / "ops.schema.json").read_text())
    errors = sorted(Draft202012Validator(schema).iter_errors(doc), key=lambda e: list(e.absolute_path))
    assert not errors, f"ops/attention.json breaks ops.schema.json at {list(errors[0].absolute_path)}: {errors[0].message}"
    return Declarations(doc)


@pytest.fixture(scope="module")
def catalogue_ops(repo_root):
    return {c.op for c in load(repo_root / "cases" / "attention", Schemas(repo_root / "golden" / "schemas"))}


def test_every_op_of_the_catalogue_is_declared_and_every_declaration_has_cases(declared, catalogue_ops):
    undeclared = sorted(catalogue_ops - set(declared.ops))
    assert not undeclared, f"ops without a declaration in ops/attention.json: {undeclared}"
    unused = sorted(set(declared.ops) - catalogue_ops)
    assert not unused, f"declarations of ops that no case of the catalogue runs: {unused}"


def test_what_an_op_builds_on_is_declared_and_acyclic(declared):
    for op, entry in declared.ops.items():
        unknown = [u for u in entry["uses"] if u not in declared.ops]
        assert not unknown, f"{op} uses undeclared ops {unknown}"
        assert op not in declared.uses(op), f"{op} builds on itself through {sorted(declared.uses(op))}"


def test_primitives_come_before_what_builds_on_them(declared):
    assert declared.depth("layer_norm") == 0
    assert declared.depth("layer_norm") < declared.depth("encoder_block") < declared.depth("transformer")
    assert declared.depth("transformer") < declared.depth("greedy_decode") < declared.depth("train_reversal")
    assert "layer_norm" in declared.uses("train_reversal") and "train_reversal" not in declared.uses("layer_norm")


@pytest.mark.parametrize("engine", ["reference", "port"])
def test_every_tensor_of_every_golden_has_axis_names(declared, repo_root, engine):
    missing = []
    for path in sorted((repo_root / "golden" / "attention" / engine).glob("*.json")):
        doc = json.loads(path.read_text())
        for part in ("inputs", "outputs"):
            for name, tensor in doc[part].items():
                ndim = len(tensor["shape"])
                if ndim and declared.axes(doc["case"]["op"], name, ndim) is None:
                    missing.append(f"{doc['case']['op']}: {part}.{name} ({ndim} axes)")
    assert not missing, (f"{len(missing)} tensors have no axis names; declare them in ops/attention.json "
                         f"(the op's axes or a rule), first: {sorted(set(missing))[:10]}")
