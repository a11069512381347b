"""The fault catalogue and `verify faults` (docs/faults.md): every fault is a valid edit of today's
sources, every fault is caught, a harmless edit is reported missed, a broken catalogue is exit 2."""

import json

import pytest

from verify.faults import AREAS, load
from helpers import assert_one_line_error, run_verify


def test_the_catalogue_is_valid_and_covers_every_area(repo_root):
    faults = load(repo_root / "faults" / "attention.json", repo_root, str)
    port = [f for f in faults if f.engine == "port"]
    reference = [f for f in faults if f.engine == "reference"]
    assert len(port) >= 30 and len(reference) >= 5
    assert {f.area for f in port} == set(AREAS)
    assert all(f.description and "\n" not in f.description for f in faults)


def _catalogue(tmp_path, faults):
    path = tmp_path / "faults.json"
    path.write_text(json.dumps({"faults": faults}) if not isinstance(faults, str) else faults)
    return path


FAULT = {"id": "x", "engine": "port", "file": "port_ts/src/nn/layerNorm.ts", "find": "export const EPS = 1e-5;",
         "replace": "export const EPS = 1e-4;", "description": "d", "area": "forward"}


@pytest.mark.parametrize("faults,fragments", [
    ('{"faults": [', ["not valid JSON", "fix it"]),
    ([], ["non-empty list 'faults'"]),
    ([dict(FAULT, find="no such text")], ["occurs 0 times", "update the fault to today's sources"]),
    ([dict(FAULT, find="d")], ["occurs", "must be exactly once"]),
    ([dict(FAULT, area="elsewhere")], ["area one of"]),
    ([dict(FAULT, file="reference/nn/layer_norm.py")], ["not in the port's tree"]),
    ([FAULT, FAULT], ["the id is used twice"]),
    ([{"id": "x"}], ["must have exactly the string fields"]),
])
def test_a_broken_fault_catalogue_is_an_input_error(repo_root, tmp_path, faults, fragments):
    proc = run_verify(repo_root, "faults", "attention", "--catalogue", _catalogue(tmp_path, faults), timeout=60)
    assert_one_line_error(proc, *fragments)


def test_a_fault_pattern_without_a_match_is_an_input_error(repo_root):
    proc = run_verify(repo_root, "faults", "attention", "--fault", "no.such.fault", timeout=60)
    assert_one_line_error(proc, "no fault", "no.such.fault")


@pytest.mark.slow
def test_a_harmless_edit_is_reported_missed(repo_root, tmp_path):
    harmless = dict(FAULT, id="comment", find="// Layer normalisation over the last axis",
                    replace="// Layer normalization over the last axis")
    caught = dict(FAULT, id="eps")
    proc = run_verify(repo_root, "faults", "attention", "--catalogue", _catalogue(tmp_path, [harmless, caught]))
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert "MISSED port      forward   comment" in proc.stdout
    assert "CAUGHT port      forward   eps" in proc.stdout and "layer_norm." in proc.stdout
    assert proc.stdout.strip().splitlines()[-1].startswith("1 of 2 faults caught in ")


@pytest.mark.slow
def test_every_fault_of_the_catalogue_is_caught(repo_root):
    """The whole catalogue (a few minutes on two cores): exit 0, every fault caught, a report."""
    proc = run_verify(repo_root, "faults", "attention", "--jobs", "2")
    assert "Traceback" not in proc.stdout + proc.stderr
    assert proc.returncode == 0, proc.stdout[-4000:] + proc.stderr
    report = json.loads((repo_root / "reports" / "faults-attention.json").read_text())
    assert report["caught"] == report["total"] == len(load(repo_root / "faults" / "attention.json", repo_root, str))
    assert all(f["caught"] and (f["cases"] or f["engine_error"]) for f in report["faults"])
