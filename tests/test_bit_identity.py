"""The property the project holds, required: `verify attention --bitwise` on the whole catalogue, both
engines fresh, passes with every case bit-identical (docs/runner.md, "The verdict")."""

import json

import pytest

from helpers import run_verify

pytestmark = pytest.mark.slow


def test_the_projects_own_port_is_bit_identical_to_the_reference(repo_root, tmp_path):
    report = tmp_path / "report.json"
    proc = run_verify(repo_root, "attention", "--bitwise", "--report", report, timeout=1800)
    assert proc.returncode == 0, proc.stdout[-6000:] + proc.stderr
    doc = json.loads(report.read_text())
    assert doc["bitwise"] is True
    total = len(doc["cases"])
    assert doc["summary"] == {"passed": total, "failed": 0, "bit_identical": total, "within_tolerance": 0, "not_run": 0}
    lines = proc.stdout.strip().splitlines()
    assert lines[-2] == f"bit identity: {total} of {total} passing case(s) bit-identical to the reference, 0 within the tolerance"
    assert lines[-1] == f"{total} passed, 0 failed"
