"""The arbiter (docs/runner.md, "The arbiter"): PyTorch float64 as a third engine on the failing
forward cases. Its twins agree with the reference on every dropout-free case of the ops they cover;
a real port fault is arbitrated "fix the port", a real reference fault "the reference changed";
without PyTorch the advice says how to install it, and `--oracle torch` is refused; a passing run
never starts it."""

import json
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

from helpers import assert_one_line_error, run_verify
from test_runner import cases_dir, goldens, session_goldens  # noqa: F401
from toolkit import catalogue_cases, tensor
from verify import arbiter
from verify.compare import compare_named
from verify.decoded import golden
from verify.documents import Schemas
from verify.tools import faults
from verify.verdict import Fresh, Policy

pytest.importorskip("torch")  # the test extra installs it; the arbiter's own tests need it

from oracle.__main__ import run_case  # noqa: E402
from oracle.ops import TWINS, refusal  # noqa: E402
from reference.cases.cases import run_case_with_states  # noqa: E402

INSTALL = "pip install -e '.[oracle]'"
HIDE_TORCH = "import sys; sys.modules['torch'] = None; from verify.cli import main; sys.exit(main())"


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
    assert refusal({"op": "cross_entropy", "config": {}}) == "PyTorch has no twin of op cross_entropy: not arbitrated"
    said = refusal({"op": "dot_product_attention", "config": {"dropout_p": 0.1}})
    assert said.startswith("dropout (p = 0.1)") and said.endswith(": not arbitrated")
    assert refusal({"op": "dropout", "config": {"p": 0.0}}) is None


def test_the_outcome_follows_from_the_figures():
    """arbiter.judge on made-up documents: each outcome, its figures, and a refusal said as the engine said it."""
    def fresh(*values):
        return Fresh(doc={}, tensors={"outputs": {"out": tensor(values)}})

    engines = {"reference": fresh(1.0, 2.0), "port": fresh(1.0, 2.5)}
    said = {values: arbiter.judge(fresh(*values), engines, 1e-6) for values in ((1.0, 2.0), (1.0, 2.5), (1.0, 3.0))}
    assert [r["outcome"] for r in said.values()] == ["reference", "port", "neither"]
    assert said[(1.0, 2.0)]["advice"] == ("PyTorch agrees with the reference (max|diff| 0.0e+00) and not with the port "
                                          "(max|diff| 5.0e-01) on out: fix the port")
    assert said[(1.0, 3.0)]["reference_max_abs"] == 1.0 and said[(1.0, 3.0)]["port_max_abs"] == 0.5
    both = arbiter.judge(fresh(1.0, 2.0), {"reference": fresh(1.0, 2.0), "port": fresh(1.0, 2.0 + 1e-9)}, 1e-6)
    assert both["outcome"] == "both"
    refused = arbiter.judge(Fresh(error="torch: PyTorch has no twin of op vit: not arbitrated"), engines, 1e-6)
    assert (refused["outcome"], refused["advice"]) == ("not arbitrated", "PyTorch has no twin of op vit: not arbitrated")
    crashed = arbiter.judge(Fresh(error="torch: gave no status line for this case"), engines, 1e-6)
    assert crashed["advice"] == "could not arbitrate: gave no status line for this case"


# --- end to end -------------------------------------------------------------------------------

def _faulty(fault_id, root, into):
    """The command running the engine of fault `fault_id` (a bundle's) applied to a copy."""
    [fault] = [f for f in faults.load(None, root, str) if f.id == fault_id]
    faults.apply(fault, root, into)
    if fault.engine == "port":
        from verify.engines import node_binary
        return f"{node_binary()} {into / 'port_ts/src/cli.ts'} run"
    return "sh -c " + shlex.quote(f"cd {shlex.quote(str(into))} && exec {shlex.quote(sys.executable)} -m reference run")


def _run(root, cases, golden_dir, tmp_path, *args, python=None):
    report = tmp_path / "report.json"
    argv = ["attention", "--cases-dir", cases, "--golden-dir", golden_dir, "--report", report, "--fresh", *args]
    if python is None:
        proc = run_verify(root, *argv, timeout=300)
    else:
        proc = subprocess.run([sys.executable, "-c", python, *map(str, argv)], cwd=root, capture_output=True,
                              text=True, timeout=300)
    assert "Traceback" not in proc.stdout + proc.stderr, proc.stdout + proc.stderr
    return proc, (json.loads(report.read_text()) if report.exists() else None)


def _arbiter_lines(proc):
    return [line.strip() for line in proc.stdout.splitlines() if line.strip().startswith("arbiter (")]


def _failing(report):
    return [c for c in report["cases"] if not c["passed"]]


@pytest.mark.parametrize("fault, option, side, other, advice", [
    ("port.softmax.mask_polarity", "--port-cmd", "reference", "port", ": fix the port"),
    ("reference.softmax.mask_polarity", "--reference-cmd", "port", "reference", ": the reference changed (git log reference/)"),
])
def test_a_real_fault_is_arbitrated_to_its_engine(repo_root, cases_dir, goldens, tmp_path,  # noqa: F811
                                                  fault, option, side, other, advice):
    """The faults of the bundles, applied to a copy of their engine: PyTorch sides with the other."""
    proc, report = _run(repo_root, cases_dir, goldens, tmp_path, option, _faulty(fault, repo_root, tmp_path / "faulty"))
    assert proc.returncode == 1
    failing = _failing(report)
    assert failing and all(c["arbitration"]["outcome"] == side for c in failing), failing
    lines = _arbiter_lines(proc)
    assert len(lines) == len(failing)
    assert all(line.startswith(f"arbiter ({side}): PyTorch agrees with the {side} (max|diff| ") and
               line.endswith(advice) for line in lines), lines
    figures = failing[0]["arbitration"]
    assert figures["tensors"] == ["out"] and figures[f"{side}_max_abs"] < 1e-12 < figures[f"{other}_max_abs"]
    shown = run_verify(repo_root, "show", tmp_path / "report.json")  # a saved report says the same
    assert _arbiter_lines(shown) == lines


def test_without_pytorch_the_advice_says_how_to_install_it(repo_root, cases_dir, goldens, tmp_path):  # noqa: F811
    port = _faulty("port.softmax.mask_polarity", repo_root, tmp_path / "faulty")
    proc, report = _run(repo_root, cases_dir, goldens, tmp_path, "--port-cmd", port, python=HIDE_TORCH)
    assert proc.returncode == 1
    lines = _arbiter_lines(proc)
    assert lines and all(line == f"arbiter (could not arbitrate): could not arbitrate: PyTorch is not installed "
                                 f"({INSTALL})" for line in lines), lines
    assert "arbiter: torch" not in report["timings"]["sections"]  # no engine was started
    refused = _run(repo_root, cases_dir, goldens, tmp_path, "--oracle", "torch", python=HIDE_TORCH)[0]
    assert_one_line_error(refused, "--oracle torch", INSTALL)


def test_only_a_failing_run_starts_the_arbiter(repo_root, cases_dir, goldens, tmp_path):  # noqa: F811
    proc, report = _run(repo_root, cases_dir, goldens, tmp_path, "--timings")
    assert proc.returncode == 0, proc.stdout
    assert "arbiter: torch" not in report["timings"]["sections"] and "arbiter" not in proc.stdout
    assert not any("arbitration" in c for c in report["cases"])
    port = _faulty("port.softmax.mask_polarity", repo_root, tmp_path / "faulty")
    failing = _run(repo_root, cases_dir, goldens, tmp_path, "--timings", "--port-cmd", port)[1]
    assert failing["timings"]["sections"]["arbiter: torch"] > 0  # the marker a failing run leaves
    off = _run(repo_root, cases_dir, goldens, tmp_path, "--port-cmd", port, "--oracle", "none")[1]
    assert "arbiter: torch" not in off["timings"]["sections"] and not any("arbitration" in c for c in off["cases"])


def test_the_runner_never_imports_pytorch_even_when_it_arbitrates(repo_root, cases_dir, goldens, tmp_path):  # noqa: F811
    """The arbiter is a process of its own: the runner's process holds no torch after a run that
    PyTorch arbitrated."""
    script = ("import sys; from verify.cli import main; code = main(); "
              "print('torch imported' if 'torch' in sys.modules else 'torch not imported'); sys.exit(code)")
    port = _faulty("port.softmax.mask_polarity", repo_root, tmp_path / "faulty")
    proc, report = _run(repo_root, cases_dir, goldens, tmp_path, "--port-cmd", port, python=script)
    assert proc.returncode == 1 and any("arbitration" in c for c in report["cases"])
    assert proc.stdout.splitlines()[-1] == "torch not imported", proc.stdout[-300:]
