"""The verdict (verify/verdict.py, docs/runner.md "The verdict"): what each kind of evidence makes of
a case with and without --bitwise, the near ties of an evaluation's decodes, and a saved report
whose stored verdict does not follow from its evidence."""

import copy

import numpy as np
import pytest

from reference.core import golden as golden_text
from verify import replay, verdict
from verify.compare import Tensor, compare_tensor

LOOSE, STRICT = verdict.Policy(1e-6), verdict.Policy(1e-6, bitwise=True)


def _tensor(name, expected, actual, part="strict", tol=1e-6):
    e = Tensor("float64", np.asarray(expected, dtype=np.float64))
    a = Tensor("float64", np.asarray(actual, dtype=np.float64))
    return dict(compare_tensor(name, "output", e, a, tol).to_dict(), part=part)


def _entry(tensors=(), checks=(), replay_segments=(), goldens=None, evaluation=None):
    details = goldens or {"reference": {"status": "fresh", "label": "fresh", "file": "g/r.json", "detail": "", "max_ulp": 0},
                          "port": {"status": "fresh", "label": "fresh", "file": "g/p.json", "detail": "", "max_ulp": 0}}
    return {"id": "x.y", "kind": "forward", "op": "x", "file": "f", "passed": False, "status": "failed",
            "tensors": list(tensors), "checks": list(checks), "replay": list(replay_segments), "evaluation": evaluation,
            "errors": [], "failures": [], "golden_details": details,
            "goldens": {r: d["status"] for r, d in details.items()}}


def _decide(entry, policy):
    return verdict.decide(copy.deepcopy(entry), policy)


ONE_ULP = np.nextafter(0.5, 1.0)


def test_bit_identical_tensors_pass_either_way():
    entry = _entry([_tensor("out", [0.5, 2.0], [0.5, 2.0])])
    for policy in (LOOSE, STRICT):
        got = _decide(entry, policy)
        assert got["passed"] and got["status"] == verdict.BIT_IDENTICAL and got["tensors"][0]["status"] == verdict.BIT_IDENTICAL


def test_a_last_bit_difference_passes_within_the_tolerance_and_fails_bitwise():
    entry = _entry([_tensor("out", [0.5, 2.0], [ONE_ULP, 2.0])])
    loose = _decide(entry, LOOSE)
    assert loose["passed"] and loose["status"] == verdict.WITHIN and loose["tensors"][0]["status"] == verdict.WITHIN
    strict = _decide(entry, STRICT)
    assert not strict["passed"] and strict["status"] == verdict.FAILED
    assert "not bit-identical" in strict["failures"][0] and "--bitwise" in strict["failures"][0]


def test_a_strict_tensor_beyond_the_tolerance_fails():
    got = _decide(_entry([_tensor("out", [0.5, 2.0], [0.5, 2.1])]), LOOSE)
    assert not got["passed"] and got["failures"] == ["output 'out': 1 / 2 elements beyond the tolerance"]


def test_a_free_run_that_parts_is_reported_not_failed_unless_bitwise():
    entry = _entry([_tensor("loss", [1.0, 0.5], [1.0, 0.6], part="free_run"), _tensor("out", [1.0], [1.0])])
    loose = _decide(entry, LOOSE)
    assert loose["passed"] and loose["status"] == verdict.WITHIN
    assert loose["tensors"][0]["status"] == verdict.PARTED
    strict = _decide(entry, STRICT)
    assert not strict["passed"]
    assert strict["failures"][0] == "output 'loss' (free run): 1 / 2 elements beyond the tolerance (--bitwise)"


def test_a_free_run_output_of_another_shape_fails_even_without_bitwise():
    e = Tensor("float64", np.zeros(3))
    a = Tensor("float64", np.zeros(4))
    t = dict(compare_tensor("loss", "output", e, a, 1e-6).to_dict(), part="free_run")
    assert not _decide(_entry([t]), LOOSE)["passed"]


def _check(required, passed=False):
    return {"engine": "both", "name": "digest d", "rule": "identical across engines", "passed": passed,
            "detail": "r 00…; p 11…", "value": None, "required": required}


def test_a_bitwise_digest_counts_only_under_bitwise():
    entry = _entry([_tensor("out", [1.0], [1.0])], checks=[_check("bitwise")])
    loose = _decide(entry, LOOSE)
    assert loose["passed"] and loose["status"] == verdict.WITHIN  # not bit-identical: its digest differs
    assert not _decide(entry, STRICT)["passed"]
    assert not _decide(_entry(checks=[_check("always")]), LOOSE)["passed"]


def test_a_replay_within_the_tolerance_passes_and_fails_bitwise():
    segment = {"segment": [0, 50], "passed": True, "max_abs": 1e-12, "max_ulp": 3, "worst": "param.W",
               "bit_identical": False, "error": None}
    entry = _entry(replay_segments=[segment])
    assert _decide(entry, LOOSE)["passed"] and _decide(entry, LOOSE)["status"] == verdict.WITHIN
    assert not _decide(entry, STRICT)["passed"]
    failed = dict(segment, passed=False, error="1 state tensor(s) beyond the tolerance, first param.W")
    assert not _decide(_entry(replay_segments=[failed]), LOOSE)["passed"]


@pytest.mark.parametrize("status,max_ulp", [("drift", 0), ("drift", 2), ("parted", None)])
def test_an_engines_own_golden_drifting_is_reported_and_fails_only_bitwise(status, max_ulp):
    """Any drift fails --bitwise, at 0 ULP too (the text or a digest differs: not byte-identical)."""
    goldens = {"reference": {"status": "fresh", "label": "fresh", "file": "g/r.json", "detail": "", "max_ulp": 0},
               "port": {"status": status, "label": status, "file": "g/p.json", "detail": "", "max_ulp": max_ulp}}
    entry = _entry([_tensor("out", [1.0], [1.0])], goldens=goldens)
    assert _decide(entry, LOOSE)["passed"]
    assert _decide(entry, STRICT)["passed"] is False


def test_regen_asks_whether_the_engines_agree_whatever_the_goldens():
    detail = "outputs.out: 1 / 1 elements beyond the tolerance; run `verify regen attention`"
    goldens = {"reference": {"status": "fresh", "label": "fresh", "file": "g/r.json", "detail": "", "max_ulp": 0},
               "port": {"status": "stale", "label": "stale", "file": "g/p.json", "detail": detail, "max_ulp": None}}
    entry = _entry([_tensor("out", [1.0], [1.0])], goldens=goldens)
    entry["errors"] = [f"golden g/p.json is stale: {detail}"]
    assert not _decide(entry, LOOSE)["passed"]
    assert verdict.decide(copy.deepcopy(entry), LOOSE, include_goldens=False)["passed"]


def test_an_error_is_a_goldens_by_the_entrys_golden_details_not_by_its_wording():
    """The golden error is the one golden_details make; an engine's error that happens to begin
    with "golden " still fails the case when goldens do not count (verify regen)."""
    entry = _entry([_tensor("out", [1.0], [1.0])])
    entry["errors"] = ["golden: an engine named golden gave no status line for this case"]
    decided = verdict.decide(copy.deepcopy(entry), LOOSE, include_goldens=False)
    assert not decided["passed"] and decided["failures"] == entry["errors"]


def test_a_tampered_verdict_is_named_and_the_evidence_wins():
    entry = _decide(_entry([_tensor("out", [0.5], [0.7])]), LOOSE)
    assert verdict.consistency(entry, LOOSE) is None
    entry["passed"], entry["status"] = True, verdict.BIT_IDENTICAL
    problem = verdict.consistency(entry, LOOSE)
    assert problem == "stored PASS (bit-identical), its evidence gives FAIL (failed)"


def test_an_engine_may_not_take_another_engines_golden_directory():
    assert verdict.engine_name_problem("reference", "reference") is None
    assert verdict.engine_name_problem("port", "port-webgpu") is None
    assert "must not name itself 'reference'" in verdict.engine_name_problem("port", "reference")
    assert "cannot name a golden directory" in verdict.engine_name_problem("port", "../port")
    assert "must name itself 'reference'" in verdict.engine_name_problem("reference", "port")


# --- near ties in an evaluation's greedy decodes ---------------------------------------------------

def _ints(rows):
    return Tensor("int64", np.asarray(rows, dtype=np.float64))


def _floats(rows):
    return Tensor("float64", np.asarray(rows, dtype=np.float64))


def test_a_decode_that_parts_where_the_margin_is_tiny_is_a_near_tie():
    ref = {"t.tokens": _ints([[3, 4, 2, -1], [5, 6, 7, 2]]), "t.margin": _floats([[2.0, 1e-9, 1.0, 0.0], [2.0, 2.0, 2.0, 2.0]])}
    port = {"t.tokens": _ints([[3, 9, 9, 2], [5, 6, 7, 2]]), "t.margin": _floats([[2.0, 1e-9, 0.5, 3.0], [2.0, 2.0, 2.0, 2.0]])}
    [tie] = replay.near_ties("t.tokens", {"margin": "t.margin"}, ref, port, 1e-6)
    assert (tie["sequence"], tie["position"], tie["margin"]) == (0, 1, 1e-9)
    assert tie["bound"] == replay.NEAR_TIE_FACTOR * 1e-6
    wide = {"t.tokens": ref["t.tokens"], "t.margin": _floats([[2.0, 0.5, 1.0, 0.0], [2.0, 2.0, 2.0, 2.0]])}
    assert replay.near_ties("t.tokens", {"margin": "t.margin"}, wide, port, 1e-6) == []  # a real difference


class _Run:
    def __init__(self, out_dir, status):
        self.out_dir, self.statuses = out_dir, {"train.t": status}


class _Case:
    id, kind, op = "train.t", "training", "train_t"

    def __init__(self, expect):
        self.spec = {"id": "train.t", "kind": "training", "op": "train_t", "seed": 1, "config": {"steps": 2},
                     "expect": expect}


def _evaluate(tmp_path, schemas, ref_out, port_out, expect):
    case = _Case(dict(expect, replay_segments=[[0, 2]]))
    (tmp_path / "train.t.replay").mkdir()
    doc = golden_text.case_document(case.spec, {}, port_out)
    golden_text.write(tmp_path / "train.t.replay" / "evaluate_2.json", doc)
    ref_doc = golden_text.case_document(case.spec, {}, ref_out)
    ref_fresh = verdict.Fresh(doc=ref_doc, tensors={"inputs": {}, "outputs": {
        n: Tensor("int64" if v.dtype.kind == "i" else "float64", np.asarray(v, dtype=np.float64)) for n, v in ref_out.items()}})
    part = replay.compare(case, ref_fresh, tmp_path, _Run(tmp_path, {"id": "train.t", "ok": True}), 1e-6, schemas)
    return dict(part, segments=[])  # no states here: these tests are about the evaluation


@pytest.fixture(scope="module")
def schemas(repo_root):
    from verify.documents import Schemas
    return Schemas(repo_root / "golden" / "schemas")


EXPECT = {"evaluation": {"outputs": ["d.tokens", "d.margin", "score"],
                         "decodes": {"d.tokens": {"margin": "d.margin", "follow": ["score"]}}}}


def test_an_evaluation_that_parts_at_a_near_tie_is_reported_not_failed(tmp_path, schemas):
    ref = {"d.tokens": np.array([[3, 4, 2], [5, 6, 2]]), "d.margin": np.array([[2.0, 1e-9, 1.0], [2.0, 2.0, 2.0]]),
           "score": np.array(1.0)}
    port = {"d.tokens": np.array([[3, 9, 2], [5, 6, 2]]), "d.margin": np.array([[2.0, 1e-9, 0.5], [2.0, 2.0, 2.0]]),
            "score": np.array(0.5)}
    part = _evaluate(tmp_path, schemas, ref, port, EXPECT)
    entry = verdict.add_replay(_entry(), part, LOOSE)
    assert entry["passed"], entry["failures"]
    assert [t["sequence"] for t in entry["evaluation"]["near_ties"]] == [0]
    score = next(t for t in entry["evaluation"]["tensors"] if t["name"] == "score")
    assert score["near_tie"] and score["status"] == verdict.FAILED  # shown as differing, not counted
    assert not verdict.add_replay(_entry(), part, STRICT)["passed"]


def test_an_evaluation_that_parts_with_a_wide_margin_fails(tmp_path, schemas):
    ref = {"d.tokens": np.array([[3, 4, 2]]), "d.margin": np.array([[2.0, 0.3, 1.0]]), "score": np.array(1.0)}
    port = {"d.tokens": np.array([[3, 9, 2]]), "d.margin": np.array([[2.0, 0.3, 0.5]]), "score": np.array(0.5)}
    entry = verdict.add_replay(_entry(), _evaluate(tmp_path, schemas, ref, port, EXPECT), LOOSE)
    assert not entry["passed"]
    assert any("'d.tokens'" in f for f in entry["failures"])


def test_an_evaluation_missing_an_output_fails(tmp_path, schemas):
    ref = {"d.tokens": np.array([[3, 4, 2]]), "d.margin": np.array([[2.0, 0.3, 1.0]]), "score": np.array(1.0)}
    port = {"d.tokens": np.array([[3, 4, 2]]), "d.margin": np.array([[2.0, 0.3, 1.0]])}
    entry = verdict.add_replay(_entry(), _evaluate(tmp_path, schemas, ref, port, EXPECT), LOOSE)
    assert not entry["passed"]
    assert any("'score'" in f and "reference only" in f for f in entry["failures"]), entry["failures"]
