"""A report (verify/records.py's Report, golden/schemas/report.schema.json) with a chosen text in every string a case, an
engine or a golden can put there: ids, files, errors, tensor names and messages, golden details,
check names and details, replay errors, free-run and decode names, the arbiter's advice, engine
commands, unused goldens. The tensors are compared by verify/compare.py, so their figures are real. Used by the
sanitising tests (tests/test_text.py) and the report writers' fuzzing (tests/test_fuzz_reports.py)."""

import numpy as np

from verify.compare import Tensor, compare_tensor
from verify.records import Report


def _tensor(name, message=None):
    expected = Tensor("float64", np.array([[0.25, 0.5], [1.0, np.nan]]))
    actual = Tensor("float64", np.array([[0.25, 0.75], [np.inf, np.nan]]))
    t = compare_tensor(name, "output", expected, actual, 1e-6).to_dict()
    t["axes"] = ["query", "key"]
    if message is not None:
        t["message"] = message
    return t


def sample_case(text, case_id=None, passed=False):
    """One failing case whose every free string holds `text` (the id too, unless given)."""
    case_id = text if case_id is None else case_id
    detail = {"status": "stale", "label": text, "file": text, "detail": text, "max_ulp": None}
    return {
        "id": case_id, "kind": "forward", "op": "masked_softmax", "file": text, "passed": passed,
        "goldens": {"reference": "fresh", "port": "stale"},
        "golden_details": {"reference": dict(detail, status="fresh", label="fresh"), "port": detail},
        "tensors": [_tensor(text, message=text), _tensor("out")],
        "status": "within the tolerance" if passed else "failed",
        "errors": [text, f"port: {text}"],
        "failures": [text, f"check port: {text}"],
        "checks": [{"engine": "port", "name": text, "rule": f"<= {text}", "detail": text, "passed": False,
                    "value": 0.5}],
        "free_runs": [{"tensor": text, "steps": 3, "first_step_beyond": 2, "steps_beyond": 1, "max_abs": 0.5,
                       "growth": [[1, 0.0], [2, 0.5]]}],
        "replay": [{"segment": [0, 1], "derived": True, "passed": False, "max_abs": None, "max_ulp": None, "worst": text,
                    "bit_identical": False, "error": text}],
        "evaluation": {"step": 1, "tensors": [_tensor(text, message=text)], "error": text,
                       "near_ties": [{"tensor": text, "sequence": 0, "position": 1, "margin": 1e-9, "bound": 1e-4,
                                      "reference": [1, 2], "port": [1, 3]}]},
        "seconds": {"reference": 0.01, "port": 0.02},
        "decodes": [{"tensor": text, "margin_tensor": text, "sequences": 1, "differing": 1, "free_run": False,
                     "first": {"sequence": 0, "reference": [1, 2], "port": [1, 3], "position": 1,
                               "margin": {"reference": 1.5, "port": 0.5},
                               "margins": {"reference": [2.0, 1.5], "port": [2.0, 0.5]}},
                     "rows": [{"sequence": 0, "reference": [1, 2], "port": [1, 3], "position": 1,
                               "margin": {"reference": 1.5, "port": 0.5},
                               "margins": {"reference": [2.0, 1.5], "port": [2.0, 0.5]}}]}],
        "curves": [{"tensor": text, "steps": 3, "first_step_different": 2, "first_step_beyond": 2,
                    "reference": [1.0, 0.5, 0.25], "port": [1.0, 0.5, 0.75]}],
        "arbitration": {"engine": text, "outcome": "could not arbitrate", "advice": f"could not arbitrate: {text}",
                        "tensors": [text], "reference_max_abs": None, "port_max_abs": 0.5},
    }


def sample_report(text, cases=None):
    """A failing report around sample_case(text), with `text` in the engines and unused goldens."""
    cases = [sample_case(text)] if cases is None else cases
    return Report(passed=False, suite="attention", tolerance=1e-6, rule="|port - reference| <= tol * (1 + |reference|)",
                  summary={"passed": sum(c["passed"] for c in cases), "failed": sum(not c["passed"] for c in cases)},
                  engines={"reference": f"python -m reference run {text}", "port": text},
                  cases=cases, unused_goldens=[text])
