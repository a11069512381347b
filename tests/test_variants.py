"""A correct port passes and a wrong one fails, whatever its arithmetic (docs/runner.md, "The verdict").

- Each faithful variant of the port (tests/port_variants.py: the JavaScript built-in
  transcendentals, products summed in reverse order, both, a reciprocal softmax), built from the
  port's own sources at test time, passes `verify attention` as the catalogue stands, and fails
  under --bitwise (its report shown with `verify show --bitwise`; one variant also run afresh
  with `verify attention --bitwise`).
- Faults of the fault catalogue applied on top of the variant with both changes fail
  `verify attention`, one per stage: forward, backward, optimiser, initialisation, decoding.
- A small real training bug fails the free-run band of the training case it runs.

The reference runs once for the module (kept: verify/cached_engine.py answers from its run), so
each verification below runs the port (and its replay) only.
"""

import json
import shlex

import pytest

from verify import assets
from verify.tools import faults
from verify.catalogue import load
from verify.documents import Schemas
from helpers import keep_run, run_verify
import port_variants

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def catalogue_specs(repo_root):
    schemas = Schemas(repo_root / "golden" / "schemas")
    return [c.spec for c in load(repo_root / "ops" / "attention", schemas)]


@pytest.fixture(scope="module")
def kept_reference(repo_root, catalogue_specs, tmp_path_factory):
    """The command of a reference that answers every case from one kept run of the real one."""
    from verify.catalogue import Case
    extra, not_run = assets.plan([Case(s, None) for s in catalogue_specs])
    specs = [s for s in catalogue_specs if s["id"] not in not_run]
    assert not not_run, f"the model is not installed in the test environment: {not_run}"
    import sys
    return keep_run(repo_root, [sys.executable, "-m", "reference", "run"], specs,
                    tmp_path_factory.mktemp("kept-reference"), extra)


def _port_cmd(node, cli):
    return shlex.join([str(node), str(cli), "run"])


def _verify(repo_root, reference_cmd, port_cmd, tmp_path, *args):
    report = tmp_path / f"report-{len(list(tmp_path.glob('report-*.json')))}.json"
    proc = run_verify(repo_root, "attention", "--reference-cmd", reference_cmd, "--port-cmd", port_cmd,
                      "--report", report, *args, timeout=1200)
    assert "Traceback" not in proc.stdout + proc.stderr, proc.stdout[-3000:] + proc.stderr
    doc = json.loads(report.read_text()) if report.exists() else None
    return proc, doc, report


FRESH_BITWISE = "both"  # the variant also run afresh with --bitwise


@pytest.mark.parametrize("variant", sorted(port_variants.VARIANTS))
def test_a_faithful_variant_passes_and_fails_bitwise(variant, repo_root, node, kept_reference, catalogue_specs, tmp_path):
    cli = port_variants.build(repo_root, variant, tmp_path / "variant")
    proc, report, path = _verify(repo_root, kept_reference, _port_cmd(node, cli), tmp_path)
    total = len(catalogue_specs)
    assert proc.returncode == 0, proc.stdout[-6000:]
    assert proc.stdout.strip().splitlines()[-1] == f"{total} passed, 0 failed"
    assert report["summary"]["within_tolerance"] > 0, "a faithful variant that is bit-identical tests nothing"
    within = [c["id"] for c in report["cases"] if c["status"] == "within the tolerance"]
    # The same evidence judged under --bitwise: every case that was only within the tolerance fails.
    shown = run_verify(repo_root, "show", path, "--bitwise")
    assert shown.returncode == 1
    assert shown.stdout.strip().splitlines()[-1] == f"{total - len(within)} passed, {len(within)} failed"
    # And the flag itself, on a fresh run: once, on one variant (the flag decides from the same
    # evidence as `show --bitwise`, which every variant went through above).
    if variant == FRESH_BITWISE:
        proc, report, _ = _verify(repo_root, kept_reference, _port_cmd(node, cli), tmp_path, "--bitwise")
        assert proc.returncode == 1
        assert {c["id"] for c in report["cases"] if not c["passed"]} == set(within)


# One fault of the catalogue per stage, and the cases that must catch it on the variant.
FAULTS_ON_A_VARIANT = {
    "port.layer_norm.eps_1e-6": ("forward", "layer_norm"),
    "port.layer_norm_backward.missing_term": ("backward", "gradcheck."),
    "port.adam.eps_inside_sqrt": ("optimiser", "train.alignment"),
    "port.init.bound_fan_out": ("init", "train.vit"),
    "port.decode.reads_first_position": ("decoding", "train.reversal"),
}


@pytest.fixture(scope="module")
def fault_catalogue(repo_root):
    return {f.id: f for f in faults.load(None, repo_root, str)}


@pytest.mark.parametrize("fault_id", sorted(FAULTS_ON_A_VARIANT))
def test_a_fault_on_a_faithful_variant_fails(fault_id, repo_root, node, kept_reference, fault_catalogue, tmp_path):
    area, pattern = FAULTS_ON_A_VARIANT[fault_id]
    fault = fault_catalogue[fault_id]
    assert fault.area == area
    port_variants.build(repo_root, "both", tmp_path / "variant")
    faults.apply(fault, tmp_path / "variant", tmp_path / "faulty")  # copies the variant's tree, then the edit
    cli = tmp_path / "faulty" / "port_ts" / "src" / "cli.ts"
    proc, report, _ = _verify(repo_root, kept_reference, _port_cmd(node, cli), tmp_path, "--case", pattern)
    assert proc.returncode == 1, proc.stdout[-4000:]
    failing = [c for c in report["cases"] if not c["passed"]]
    assert failing and all(c["id"].startswith(pattern.rstrip(".")) or pattern in c["id"] for c in failing)
    assert all(c["failures"] for c in failing)


# A training bug small enough that the run still trains (the alignment is exact), caught by the
# free-run band of the alignment run: Adam without its bias correction (final loss 17 times too low).
TRAINING_BUG = "port.adam.no_bias_correction"


def test_a_small_training_bug_fails_the_free_run_band(repo_root, node, kept_reference, fault_catalogue, tmp_path):
    faults.apply(fault_catalogue[TRAINING_BUG], repo_root, tmp_path / "faulty")
    cli = tmp_path / "faulty" / "port_ts" / "src" / "cli.ts"
    proc, report, _ = _verify(repo_root, kept_reference, _port_cmd(node, cli), tmp_path, "--case", "train.alignment")
    assert proc.returncode == 1
    [case] = report["cases"]
    band = [c for c in case["checks"] if c["name"].startswith("free run ")]
    assert band and not all(c["passed"] for c in band), band
    assert any(f.startswith("check both: free run final_loss") for f in case["failures"]), case["failures"]
