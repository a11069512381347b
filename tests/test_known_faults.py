"""The closest known fault (verify/known_faults.py, docs/faults.md): `verify faults` records what
each fault breaks, and a failing `verify attention` whose failures match one of them names it;
a bug the catalogue does not hold, or a passing run, names nothing."""

import json

import pytest

from helpers import project_copy, run_verify
from toolkit import catalogue_cases
from verify import known_faults
from verify.tools.faults import apply, load

# ---- the match, on accounts written here ---------------------------------------------------


def entry(case_id, tensors=(), checks=()):
    """A failing report entry: tensors {name: failing elements}, checks the names of failed ones."""
    return {"id": case_id, "passed": False,
            "tensors": [{"name": n, "status": "failed", "mismatched": m} for n, m in dict(tensors).items()],
            "checks": [{"name": c, "passed": False, "engine": "port"} for c in checks], "replay": [], "errors": []}


def recorded(fault_id, cases, stage="fast"):
    """An account's fault: cases [(id, {tensor: failing elements}, [kinds])]."""
    return {"id": fault_id, "description": f"the fault {fault_id}", "caught": True, "stage": stage,
            "cases": [{"id": i, "how": ["tensor mismatch", "golden", *kinds], "tensors": t} for i, t, kinds in cases]}


def account(*faults, stages=None):
    return {"faults": list(faults), "stages": stages or {"fast": ["a", "b", "c", "d"], "training": ["t"]}}


A_AND_B = [("a", {"out": 4}, []), ("b", {"out": 2, "weights": 6}, [])]


def test_the_fault_that_breaks_the_same_tensors_the_same_way_is_named():
    failing = [entry("a", {"out": 4}), entry("b", {"out": 2, "weights": 6})]
    found = known_faults.closest(failing, account(recorded("near", [("a", {"out": 5}, []), ("b", {"out": 2, "weights": 6}, [])]),
                                                  recorded("same", A_AND_B), recorded("other", [("c", {"out": 1}, [])])))
    faults, near, exact, _, _ = found
    assert [f["id"] for f in faults] == ["same"] and near == exact == 1
    assert "closest known fault: same (the fault same): the same 2 failing case(s)" in known_faults.line(found)


def test_faults_that_break_the_same_elements_are_named_together():
    failing = [entry("a", {"out": 4}), entry("b", {"out": 2, "weights": 6})]
    found = known_faults.closest(failing, account(recorded("one", A_AND_B), recorded("two", A_AND_B)))
    assert [f["id"] for f in found[0]] == ["one", "two"]
    assert known_faults.line(found).startswith("closest known faults, 2 alike: one (the fault one); two (the fault two)")


def test_nothing_is_said_when_no_fault_matches_well():
    failing = [entry("a", {"out": 4}), entry("c", {"out": 1}), entry("d", {"out": 1})]  # a third of "same" at best
    assert known_faults.closest(failing, account(recorded("same", A_AND_B))) is None
    assert known_faults.closest(failing, None) is None
    assert known_faults.closest([], account(recorded("same", A_AND_B))) is None
    assert known_faults.closest(failing, {"faults": "not a list", "stages": {}}) is None


def test_a_fault_is_compared_on_the_stages_it_ran_and_on_evidence_not_goldens():
    # the training run t fails too, but a fault caught in the fast stage never ran it; a golden
    # that differs is no evidence of which bug it is, a failed check is
    failing = [entry("a", {"out": 4}), entry("b", {"out": 2, "weights": 6}), entry("t", {"loss": 9})]
    assert known_faults.closest(failing, account(recorded("same", A_AND_B)))[2] == 1
    with_bound = [entry("a", {"out": 4}, checks=["grad.W.rel_err"]), entry("b", {"out": 2, "weights": 6})]
    assert known_faults.closest(with_bound, account(recorded("same", A_AND_B))) is None  # 3 of 4: below CLOSE
    assert known_faults.closest(failing, account(recorded("same", A_AND_B), stages={"fast": ["a", "b", "t"]})) is None


# ---- end to end: `verify faults` records, `verify attention` names ---------------------------

RECORDED = ("port.softmax.valid_len_off_by_one", "port.softmax.mask_polarity", "port.softmax.no_max_subtraction")


@pytest.fixture(scope="module")
def checkout(tmp_path_factory):
    """A copy of the project whose `verify faults` has recorded RECORDED on the masked-softmax
    cases, and those cases as a catalogue of their own."""
    tmp = tmp_path_factory.mktemp("known")
    copy = project_copy(tmp)
    cases = tmp / "cases"
    cases.mkdir()
    (cases / "masked_softmax.json").write_text(json.dumps({"cases": catalogue_cases(op="masked_softmax")}))
    proc = run_verify(copy, "faults", "attention", "--cases-dir", cases, *[a for f in RECORDED for a in ("--fault", f)],
                      timeout=600)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    account = json.loads((copy / "reports" / "faults-attention.json").read_text())
    assert list(account["stages"]) == ["fast"] and all(c["tensors"] for f in account["faults"] for c in f["cases"])
    return copy, cases


def _run_with(checkout, node, tmp_path, fault_id):
    """`verify attention` on the masked-softmax cases with the fault applied to the port."""
    copy, cases = checkout
    [fault] = [f for f in load(None, copy, str) if f.id == fault_id]
    apply(fault, copy, tmp_path / "faulty")
    return run_verify(copy, "attention", "--cases-dir", cases, "--report", tmp_path / "report.json",
                      "--port-cmd", f"{node} {tmp_path / 'faulty' / 'port_ts' / 'src' / 'cli.ts'} run", timeout=600)


@pytest.mark.parametrize("fault_id", RECORDED[:2])
def test_a_run_that_breaks_what_a_recorded_fault_breaks_names_it(checkout, node, tmp_path, fault_id):
    proc = _run_with(checkout, node, tmp_path, fault_id)
    assert proc.returncode == 1, proc.stdout[-3000:] + proc.stderr
    [named] = [line for line in proc.stdout.splitlines() if line.startswith("closest known fault")]
    assert f"closest known fault: {fault_id} (" in named and "the same elements of each" in named, named
    shown = run_verify(checkout[0], "show", tmp_path / "report.json", timeout=300)  # the saved report says it too
    assert named in shown.stdout


def test_a_bug_the_catalogue_did_not_record_names_nothing(checkout, node, tmp_path):
    proc = _run_with(checkout, node, tmp_path, "port.softmax.two_d_lens_by_batch")
    assert proc.returncode == 1, proc.stdout[-3000:] + proc.stderr
    assert "closest known fault" not in proc.stdout


def test_a_passing_run_names_nothing(checkout, tmp_path):
    copy, cases = checkout
    proc = run_verify(copy, "attention", "--cases-dir", cases, "--report", tmp_path / "report.json", timeout=600)
    # every case passes (the other cases' goldens are unused here, which alone makes the exit 1)
    assert proc.stdout.strip().endswith(f"{len(catalogue_cases(op='masked_softmax'))} passed, 0 failed"), proc.stdout[-3000:]
    assert "closest known fault" not in proc.stdout


def test_the_account_names_the_case_ids_of_the_stage_it_ran(checkout):
    account = json.loads((checkout[0] / "reports" / "faults-attention.json").read_text())
    assert set(account["stages"]["fast"]) == {c["id"] for c in catalogue_cases(op="masked_softmax")}
