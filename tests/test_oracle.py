"""The torch engine (oracle/): PyTorch float64 as a third engine. Its twins agree with the reference
on every dropout-free case of the ops they cover, and what it refuses is said."""

import json
from pathlib import Path

import pytest

from toolkit import catalogue_cases
from verify.compare import compare_named
from verify.decoded import golden
from verify.documents import Schemas
from verify.verdict import Policy

pytest.importorskip("torch")  # the test extra installs it; the arbiter's own tests need it

from oracle.__main__ import run_case  # noqa: E402
from oracle.ops import TWINS, refusal  # noqa: E402
from reference.cases.cases import run_case_with_states  # noqa: E402


def twin_cases():
    return [c for c in catalogue_cases(kind="forward") if c["op"] in TWINS and refusal(c) is None]


@pytest.mark.parametrize("case", twin_cases(), ids=lambda c: c["id"])
def test_each_twin_agrees_with_the_reference_on_its_cases(case, tmp_path):
    """The reference's document and PyTorch's, from the inputs the reference hands on, by the case's
    rule and tolerance; every output PyTorch computes is one the reference names."""
    doc, _, handed = run_case_with_states(case)
    path = tmp_path / "handed.json"
    path.write_text(json.dumps(handed))
    theirs = run_case(case, path)
    assert theirs["engine"]["name"] == "torch" and theirs["inputs"] == doc["inputs"]
    assert set(theirs["outputs"]) <= set(doc["outputs"]), (set(theirs["outputs"]), set(doc["outputs"]))
    schemas = Schemas(Path(__file__).resolve().parents[1] / "golden" / "schemas")  # read as the runner reads them
    ref = golden(json.dumps(doc).encode(), schemas)[1]["outputs"]
    mine = golden(json.dumps(theirs).encode(), schemas)[1]["outputs"]
    results = compare_named("output", {n: ref[n] for n in mine}, mine, Policy().tol_of(case), ("reference", "torch"))
    bad = [(t.name, t.max_abs, t.message) for t in results if not t.passed]
    assert not bad, f"{case['id']}: PyTorch disagrees with the reference on {bad}"


def test_what_the_twins_refuse_is_said():
    assert refusal({"op": "decoder_lm", "config": {}}) == "PyTorch has no twin of op decoder_lm: not arbitrated"
    said = refusal({"op": "dot_product_attention", "config": {"dropout_p": 0.1}})
    assert said.startswith("dropout (p = 0.1)") and said.endswith(": not arbitrated")
    assert refusal({"op": "dropout", "config": {"p": 0.0}}) is None
