"""The runner's checks beyond agreement: gradcheck bounds and coverage, quality bars, digests,
and the step-by-step comparison of free training runs."""

import numpy as np

from verify.expectations import bound_checks, digest_checks, free_run, gradcheck_checks
from toolkit import tensor, tolerance

OP = "gradcheck_transformer"
BOUND = tolerance(OP, "gradcheck")  # the op's declared bound (its bundle, ops/attention/<op>.json)


def test_gradcheck_passes_at_the_bound_and_fails_beyond():
    ok = gradcheck_checks("port", {"grad.W": tensor([1.0]), "check.W.rel_err": tensor([BOUND, 1e-12])}, OP)
    assert all(c["passed"] for c in ok)
    bad = gradcheck_checks("port", {"grad.W": tensor([1.0]), "check.W.rel_err": tensor([1e-12, BOUND * 1.01])}, OP)
    failed = [c for c in bad if not c["passed"]]
    assert [c["name"] for c in failed] == ["check.W.rel_err"] and "(1,)" in failed[0]["detail"]


def test_gradcheck_of_an_op_without_a_declared_bound_fails_saying_so():
    checks = gradcheck_checks("port", {"grad.W": tensor([1.0]), "check.W.rel_err": tensor([0.0])}, "new_op")
    failed = [c for c in checks if not c["passed"]]
    assert [c["name"] for c in failed] == ["rel_err"], checks
    assert "'new_op' is not declared" in failed[0]["detail"] and "docs/adding-an-op.md" in failed[0]["detail"]


def test_gradcheck_nan_and_missing_records_fail():
    nan = gradcheck_checks("reference", {"grad.W": tensor([1.0]), "check.W.rel_err": tensor([np.nan])}, OP)
    assert not all(c["passed"] for c in nan)
    none = gradcheck_checks("reference", {"grad.W": tensor([1.0])}, OP)
    assert not all(c["passed"] for c in none)


def test_gradcheck_requires_every_parameter_covered():
    checks = gradcheck_checks("port", {"grad.W": tensor([1.0]), "grad.b": tensor([1.0]), "check.W.rel_err": tensor([0.0])}, OP)
    coverage = next(c for c in checks if c["name"] == "coverage")
    assert not coverage["passed"] and "unchecked: b" in coverage["detail"]


def test_quality_bars():
    expect = {"at_least": {"accuracy": 0.98}, "at_most": {"final_loss": 0.1}}
    good = bound_checks("port", {"accuracy": tensor(0.985), "final_loss": tensor(0.05)}, expect)
    assert all(c["passed"] for c in good)
    bad = bound_checks("port", {"accuracy": tensor(0.975), "final_loss": tensor(0.2)}, expect)
    assert not any(c["passed"] for c in bad)
    missing = bound_checks("port", {}, expect)
    assert not any(c["passed"] for c in missing)


def test_digests_must_be_identical_and_present():
    a, b = "0" * 64, "1" * 64
    expect = {"equal_digests": ["init_params"]}
    assert digest_checks({"reference": {"digests": {"init_params": a}}, "port": {"digests": {"init_params": a}}}, expect)[0]["passed"]
    assert not digest_checks({"reference": {"digests": {"init_params": a}}, "port": {"digests": {"init_params": b}}}, expect)[0]["passed"]
    assert not digest_checks({"reference": {"digests": {"init_params": a}}, "port": {}}, expect)[0]["passed"]


def test_free_run_names_the_first_step_beyond_and_the_growth():
    steps = 100
    ref = np.linspace(2.0, 0.1, steps)
    port = ref.copy()
    port[40:] += 1e-9 * 10.0 ** np.linspace(0, 6, steps - 40)  # a difference that grows
    run = free_run("loss", tensor(ref), tensor(port), 1e-6)
    first = int(np.flatnonzero(np.abs(port - ref) > 1e-6 * (1 + np.abs(ref)))[0]) + 1
    assert run["first_step_beyond"] == first
    assert run["growth"][-1] == [steps, run["max_abs"]]
    diffs = [d for _, d in run["growth"]]
    assert diffs == sorted(diffs) and diffs[-1] > 1e-4


def test_free_run_within_tolerance():
    ref = np.linspace(2.0, 0.1, 50)
    run = free_run("loss", tensor(ref), tensor(ref + 1e-12), 1e-6)
    assert run["first_step_beyond"] is None and run["steps_beyond"] == 0
