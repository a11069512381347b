"""A failing run that leads to the fix (docs/runner.md, "What to do"): advice that follows from what
differs, in each of its situations, and the same in `verify regen`'s refusal; the root cause named
first; NaN in the headline; a closing summary; each case's line printed as soon as it is known,
through a pipe; a subset run that keeps the full run's report."""

import json
import math
import subprocess
import sys
import textwrap
import time

import numpy as np
import pytest

from helpers import run_verify
from test_runner import _rewrite_golden, case_ids, cases_dir, goldens, schemas, session_goldens  # noqa: F401

# An engine that answers from a directory of goldens (the port's or the reference's), each output
# multiplied by SCALE, optionally pausing after its first case; as a reference, it hands the port
# the golden's inputs (docs/protocol.md, "Handed inputs").
SCALED = textwrap.dedent('''
    import json, os, sys, time
    source, scale, pause = sys.argv[1], float(sys.argv[2]), float(sys.argv[3])
    request = json.load(sys.stdin)
    os.makedirs(request["out_dir"], exist_ok=True)
    for n, case in enumerate(request["cases"]):
        with open(os.path.join(source, case["id"] + ".json")) as fh:
            doc = json.load(fh)
        doc["case"] = case
        for t in doc["outputs"].values():
            if t["dtype"] == "float64":
                t["data"] = [float(v) * scale if not isinstance(v, str) else v for v in t["data"]]
        with open(os.path.join(request["out_dir"], case["id"] + ".json"), "w") as fh:
            json.dump(doc, fh)
        with open(os.path.join(request["out_dir"], case["id"] + ".handed.json"), "w") as fh:
            json.dump({"inputs": doc["inputs"], "position": 0}, fh)  # what a reference hands on (masked softmax draws nothing after)
        print(json.dumps({"id": case["id"], "ok": True, "seconds": 0}), flush=True)
        if n == 0:
            time.sleep(pause)
''')


@pytest.fixture
def scaled(tmp_path, session_goldens):  # noqa: F811
    script = tmp_path / "scaled.py"
    script.write_text(SCALED)
    return lambda engine, scale, pause=0.0: f"{sys.executable} {script} {session_goldens / engine} {scale!r} {pause!r}"


def _run(repo_root, cases, golden_dir, tmp_path, *args):
    report = tmp_path / "report.json"
    proc = run_verify(repo_root, "attention", "--cases-dir", cases, "--golden-dir", golden_dir, "--report", report, *args,
                      timeout=300)
    assert "Traceback" not in proc.stdout + proc.stderr, proc.stderr
    return proc, json.loads(report.read_text())


def _what_to_do(proc):
    return [line.strip() for line in proc.stdout.splitlines() if line.strip().startswith("what to do (")]


def test_a_port_that_differs_is_told_to_fix_the_port(repo_root, cases_dir, goldens, scaled, tmp_path):  # noqa: F811
    proc, report = _run(repo_root, cases_dir, goldens, tmp_path, "--port-cmd", scaled("port", 1.001))
    assert proc.returncode == 1
    advice = _what_to_do(proc)
    assert advice and all(a.startswith("what to do (port differs): the port disagrees with the reference: fix the port")
                          for a in advice), advice
    assert not any("verify regen" in a for a in advice)


def test_a_changed_reference_is_named_not_blamed_on_the_port(repo_root, cases_dir, goldens, scaled, tmp_path):  # noqa: F811
    proc, _ = _run(repo_root, cases_dir, goldens, tmp_path, "--reference-cmd", scaled("reference", 1.001))
    assert proc.returncode == 1
    advice = _what_to_do(proc)
    assert advice and all(a.startswith("what to do (reference changed): the reference no longer computes what its "
                                       "golden holds, the port still does") for a in advice), advice
    regen = run_verify(repo_root, "regen", "attention", "--cases-dir", cases_dir, "--golden-dir", goldens,
                       "--reference-cmd", scaled("reference", 1.001))
    assert regen.returncode == 1 and "nothing written" in regen.stdout
    assert "what to do (reference changed)" in regen.stdout and "fix the port" not in regen.stdout


def test_both_engines_changed_together_are_told_how_to_accept_it(repo_root, cases_dir, goldens, scaled, tmp_path):  # noqa: F811
    proc, _ = _run(repo_root, cases_dir, goldens, tmp_path, "--reference-cmd", scaled("reference", 1.001),
                   "--port-cmd", scaled("port", 1.001))
    assert proc.returncode == 1
    advice = _what_to_do(proc)
    assert advice and all(a.startswith("what to do (both changed): both engines changed and still agree") for a in advice)
    assert all("verify regen attention --case" in a and "rewrites" in a for a in advice)


def test_a_case_changed_in_the_catalogue_is_told_to_regen_that_case(repo_root, cases_dir, goldens, tmp_path, case_ids):  # noqa: F811
    catalogue = json.loads((cases_dir / "masked_softmax.json").read_text())
    catalogue["cases"][0]["description"] = "a new description"
    edited = tmp_path / "cases"
    edited.mkdir()
    (edited / "masked_softmax.json").write_text(json.dumps(catalogue))
    proc, _ = _run(repo_root, edited, goldens, tmp_path, "--case", case_ids[0])
    assert proc.returncode == 1
    assert _what_to_do(proc) == [f"what to do (case changed): the case changed in the catalogue since its goldens were "
                                 f"written: `verify regen attention --case {case_ids[0]}`"]


def test_a_golden_drifting_within_the_tolerance_needs_nothing(repo_root, cases_dir, goldens, tmp_path, case_ids):  # noqa: F811
    def nudge(doc):
        data = doc["outputs"]["out"]["data"]
        data[0] = float(np.nextafter(data[0], math.inf))
    _rewrite_golden(goldens / "port" / f"{case_ids[0]}.json", nudge)
    proc, report = _run(repo_root, cases_dir, goldens, tmp_path)
    assert proc.returncode == 0
    assert report["cases"][0]["goldens"]["port"] == "drift"
    assert "note: 1 passing case(s) have goldens that differ from their fresh outputs within the tolerance" in proc.stdout
    assert not _what_to_do(proc)


def test_nan_leads_the_headline(repo_root, cases_dir, goldens, tmp_path, case_ids):  # noqa: F811
    nan_port = tmp_path / "nan.py"
    nan_port.write_text(SCALED.replace("float(v) * scale", '"NaN"'))
    proc, _ = _run(repo_root, cases_dir, goldens, tmp_path, "--case", case_ids[0],
                   "--port-cmd", f"{sys.executable} {nan_port} {goldens / 'port'} 1.0 0.0")
    assert proc.returncode == 1
    line = next(line for line in proc.stdout.splitlines() if line.startswith("FAIL"))
    assert "max|diff|      NaN  max ULP  NaN" in line, line
    assert "of them non-finite" in proc.stdout and "Greatest absolute difference: NaN at index" in proc.stdout


def test_the_run_ends_with_a_short_summary_of_the_failing_cases(repo_root, cases_dir, goldens, scaled, tmp_path):  # noqa: F811
    proc, report = _run(repo_root, cases_dir, goldens, tmp_path, "--port-cmd", scaled("port", 1.001))
    lines = proc.stdout.strip().splitlines()
    failing = [c["id"] for c in report["cases"] if not c["passed"]]
    start = lines.index("short summary:")
    summary = lines[start + 1:start + 1 + len(failing)]
    assert [line.split()[2] for line in summary] == failing
    assert all(line.startswith("FAILED forward ") for line in summary)
    assert lines[-1] == f"{len(report['cases']) - len(failing)} passed, {len(failing)} failed"


def test_each_case_is_printed_as_soon_as_it_is_known_through_a_pipe(repo_root, cases_dir, goldens, scaled, case_ids):  # noqa: F811
    """The port pauses 6 s after its first case: that case's line must reach the pipe before then."""
    argv = [sys.executable, "-m", "verify", "attention", "--cases-dir", str(cases_dir), "--golden-dir", str(goldens),
            "--port-cmd", scaled("port", 1.0, 6.0)]
    proc = subprocess.Popen(argv, cwd=repo_root, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    started = time.monotonic()
    first = proc.stdout.readline()
    while first.startswith("reference: "):  # the reference cache's line before the cases, when it answers some
        first = proc.stdout.readline()
    seen_at = time.monotonic() - started
    rest, _ = proc.communicate(timeout=120)
    assert first.startswith("PASS forward  ") and case_ids[0] in first, first
    assert seen_at < 5.5 and proc.returncode == 0, (seen_at, rest[-2000:])


def test_a_subset_run_keeps_the_full_runs_report(repo_root, cases_dir, goldens, tmp_path, case_ids):  # noqa: F811
    full = repo_root / "reports" / "verify-attention.json"
    before = full.read_bytes() if full.exists() else None
    proc = run_verify(repo_root, "attention", "--cases-dir", cases_dir, "--golden-dir", goldens, "--case", case_ids[0])
    assert proc.returncode == 0
    assert (full.read_bytes() if full.exists() else None) == before
    assert "reports: reports/verify-attention.subset.json" in proc.stdout
    subset = json.loads((repo_root / "reports" / "verify-attention.subset.json").read_text())
    assert [c["id"] for c in subset["cases"]] == [case_ids[0]]


def test_the_primitive_that_explains_the_others_comes_first(repo_root, node, tmp_path):
    """Layer norm's epsilon wrong in the port: every block and model built on it fails too; the
    closing section lists the layer-norm cases first and says to start there."""
    from verify.tools import faults
    fault = {f.id: f for f in faults.load(None, repo_root, str)}["port.layer_norm.eps_1e-6"]
    faults.apply(fault, repo_root, tmp_path / "faulty")
    proc = run_verify(repo_root, "attention", "--case", "layer_norm", "--case", "encoder_block", "--case", "transformer.",
                      "--case", "masked_softmax.no_mask", "--port-cmd",
                      f"{node} {tmp_path / 'faulty' / 'port_ts' / 'src' / 'cli.ts'} run", timeout=600)
    assert proc.returncode == 1
    lines = proc.stdout.splitlines()
    start = next(n for n, line in enumerate(lines) if line.startswith("=== ") and "primitives first" in line)
    failing = [line.split()[2] for line in lines[start:] if line.startswith("FAIL ")]
    ln = [i for i in failing if i.startswith("layer_norm.")]
    assert ln and failing[:len(ln)] == ln, failing
    assert any(i.startswith("encoder_block.") for i in failing) and any(i.startswith("transformer.") for i in failing)
    where = next(line for line in lines if line.startswith("where to start: "))
    others = len(failing) - len(ln)
    assert where.startswith(f"where to start: {len(failing)} case(s) fail; layer_norm fails on its own, "
                            f"and {others} of the others use it: start there"), where
