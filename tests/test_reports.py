"""Issue 5's "done when": a one-character change in the port gives a terminal report, a JSON report,
an HTML report and JUnit XML that all point at the right tensor and index; `verify show`
re-renders it. Also the decode and training sections, from synthetic tensors (fast)."""

import json
import re
import xml.etree.ElementTree as ET

import numpy as np
import pytest

from helpers import split_output
from test_runner import (cases_dir, case_ids, goldens, mutated_port, run_verify, schemas,  # noqa: F401 (fixtures)
                         session_goldens)
from verify import views
from verify.axes import axis_names, label
from verify.compare import Tensor
from verify.documents import parse
from verify.records import Report
from verify.report import Style, decode_lines, render

OFF_BY_ONE = ("len > K ? K : len;", "len + 1 > K ? K : len + 1;")  # the mask keeps one key too many (k <= len)


@pytest.fixture(scope="module")
def failing_run(repo_root, node, cases_dir, session_goldens, tmp_path_factory):  # noqa: F811
    """verify attention with the mutated port: (process, report dict, paths)."""
    tmp = tmp_path_factory.mktemp("failing")
    paths = {k: tmp / f"report.{k}" for k in ("json", "html", "xml")}
    port = mutated_port(repo_root, node, tmp, *OFF_BY_ONE)
    proc = run_verify(repo_root, "attention", "--cases-dir", cases_dir, "--golden-dir", session_goldens,
                      "--port-cmd", port, "--report", paths["json"], "--html", paths["html"], "--junit", paths["xml"])
    return proc, parse(paths["json"].read_text()), paths


def _case(report, case_id):
    return next(c for c in report["cases"] if c["id"] == case_id)


def test_the_reports_point_at_the_right_tensor_and_index(failing_run, session_goldens, schemas):  # noqa: F811
    proc, report, paths = failing_run
    assert proc.returncode == 1, proc.stdout + proc.stderr
    schemas.check("report", report)
    case = _case(report, "masked_softmax.lens_1d")
    assert not case["passed"]
    [bad] = [t for t in case["tensors"] if not t["passed"]]
    assert (bad["role"], bad["name"], bad["axes"]) == ("output", "out", ["batch", "query", "key"])
    # the independent check: the kept extra key is key == valid_len of the batch row
    golden = json.loads((session_goldens / "reference" / "masked_softmax.lens_1d.json").read_text())
    lens = golden["inputs"]["valid_lens"]["data"]
    batch, query, key = bad["max_abs_index"]
    assert key == lens[batch], (bad["max_abs_index"], lens)
    where = label(bad["max_abs_index"], bad["axes"])
    assert where == f"(batch {batch}, query {query}, key {key})"
    # terminal
    assert "output 'out' (float64, shape (3, 2, 5) = (batch 3, query 2, key 5)): port differs from reference" in proc.stdout
    assert f"Greatest absolute difference: {bad['max_abs']:.6g} at index {where}" in proc.stdout
    assert re.search(r"Mismatched elements: \d+ / 30 \(\d+\.\d%\)", proc.stdout)
    # HTML: the case, the tensor, the index, the heatmaps of the weights
    page = paths["html"].read_text()
    section = page[page.index('id="case-masked_softmax.lens_1d"'):]
    section = section[: section.index("</details>")]
    assert "Greatest absolute difference" in section and where in section
    assert 'data-tensor="out"' in section and section.count('class="heatmap"') >= 3
    # JUnit: one testcase per case, the failure names tensor and index
    suite = ET.parse(paths["xml"]).getroot().find("testsuite")
    cases = {tc.get("name"): tc for tc in suite.findall("testcase")}
    assert sorted(cases) == sorted(c["id"] for c in report["cases"])
    failure = cases["masked_softmax.lens_1d"].find("failure")
    assert failure is not None and where in failure.text and "output 'out'" in failure.text
    assert int(suite.get("failures")) == report["summary"]["failed"]
    assert all(tc.find("failure") is None for name, tc in cases.items() if _case(report, name)["passed"])
    # the suite's time is the run's wall, not the engines' seconds added up (they run in parallel)
    assert abs(float(suite.get("time")) - report["timings"]["total"]) < 0.5  # written moments apart


def test_show_re_renders_the_failing_report_and_selects_cases(failing_run, repo_root, tmp_path):
    proc, report, paths = failing_run
    shown = run_verify(repo_root, "show", paths["json"])
    assert shown.returncode == 1 and split_output(shown.stdout) == split_output(proc.stdout)
    one = run_verify(repo_root, "show", paths["json"], "--case", "masked_softmax.lens_1d", "--html", tmp_path / "one.html",
                     "--junit", tmp_path / "one.xml")
    assert one.returncode == 1
    assert one.stdout.splitlines()[0].startswith("FAIL forward  masked_softmax.lens_1d")
    assert one.stdout.strip().splitlines()[-1] == "0 passed, 1 failed"
    assert 'data-case-id="masked_softmax.lens_1d"' in (tmp_path / "one.html").read_text()
    assert len(ET.parse(tmp_path / "one.xml").getroot().find("testsuite").findall("testcase")) == 1


def test_the_default_report_is_written_on_every_run(failing_run, repo_root, schemas):  # noqa: F811
    default = repo_root / "reports" / "verify-attention.json"
    assert default.is_file()
    report = parse(default.read_text())
    schemas.check("report", report)


# --- decodes, training curves, axes (synthetic, no engines) --------------------------------------

def _t(values, dtype="float64"):
    return Tensor(dtype=dtype, values=np.asarray(values, dtype=np.float64))


class _Case:
    op, kind, id = "train_reversal", "training", "train.reversal"


def test_a_diverging_decode_names_the_sequence_position_and_margins():
    ref = {"decode.tokens": _t([[3, 8, 0, 2, -1], [5, 1, 2, -1, -1]], "int64"),
           "decode.margin": _t([[2.0, 1.5, 0.7, 3.0, 0.0], [1.0, 1.0, 1.0, 0.0, 0.0]])}
    port = {"decode.tokens": _t([[3, 8, 0, 2, -1], [5, 1, 7, 2, -1]], "int64"),
            "decode.margin": _t([[2.0, 1.5, 0.7, 3.0, 0.0], [1.0, 1.0, 0.001, 0.5, 0.0]])}
    [d] = views.decodes(_Case, ref, port, free_run=set())
    assert (d["sequences"], d["differing"]) == (2, 1)
    first = d["first"]
    assert (first["sequence"], first["position"]) == (1, 2)
    assert first["reference"] == [5, 1, 2] and first["port"] == [5, 1, 7, 2]
    assert first["margin"] == {"reference": 1.0, "port": 0.001}
    text = "\n".join(decode_lines({"decodes": [d]}, Style(None)))
    assert "1 of 2 sequence(s) differ; first at sequence 1, position 2" in text
    assert "reference: 5 1 [2] <end>" in text and "port:      5 1 [7] 2 <end>" in text
    assert "at position 2 in decode.margin: reference 1, port 0.001" in text


def test_a_training_curve_records_where_the_engines_part():
    loss_ref = np.linspace(2.0, 0.1, 50)
    loss_port = loss_ref.copy()
    loss_port[9] = np.nextafter(loss_port[9], 10)  # step 10: one ULP
    loss_port[29:] += 1e-3  # step 30 on: beyond the tolerance
    [curve] = views.curves({"loss": _t(loss_ref)}, {"loss": _t(loss_port)}, 1e-6)
    assert (curve["first_step_different"], curve["first_step_beyond"]) == (10, 30)
    from verify.expectations import free_run
    run = free_run("loss", _t(loss_ref), _t(loss_port), 1e-6)
    assert (run["first_step_different"], run["first_step_beyond"], run["steps_beyond"]) == (10, 30, 21)
    case = {"checks": [], "replay": [], "decodes": [], "curves": [curve], "tensors": [], "free_runs": [run]}
    from verify.report import expectation_lines
    [line] = expectation_lines(case, Style(None))
    assert "the engines part at step 30" in line and "bit-identical through step 9" in line
    assert line.endswith("reported, not failed")


def test_axis_names():
    assert axis_names("multi_head_attention", "weights", 4) == ["batch", "head", "query", "key"]
    assert axis_names("transformer", "dec.blk0.cross_weights", 4) == ["batch", "head", "query", "key"]
    assert axis_names("masked_softmax", "out", 4) == ["batch", "head", "query", "key"]
    assert axis_names("train_alignment", "loss", 1) == ["step"]
    assert axis_names("linear", "out", 2) == ["row", "feature"]
    assert axis_names("no_such_op", "thing", 2) is None  # undeclared: bare indices
    assert label([1, 2], None) == "(1, 2)" and label([4], None) == "(4,)"


def test_a_report_renders_without_the_new_sections():
    """Reports saved before issue 5 (no axes, decodes, curves, heatmaps) still render."""
    tensor = {"name": "out", "role": "output", "sides": ["reference", "port"], "dtype": "float64", "shape": [2, 2],
              "passed": False, "mismatched": 1, "total": 4, "max_abs": 0.5, "max_abs_index": [0, 1],
              "allowed_at_max_abs": 1e-6, "max_rel": 1.0, "max_rel_index": [0, 1], "max_ulp": 10,
              "nan": {}, "inf": {}, "samples": [], "message": None}
    case = {"id": "x.y", "kind": "forward", "op": "x", "file": "f", "passed": False, "goldens": {},
            "golden_details": {}, "tensors": [tensor], "errors": [], "checks": [], "free_runs": [],
            "replay": []}
    report = Report(passed=False, suite="attention", tolerance=1e-6, rule="", summary={"passed": 0, "failed": 1},
                    engines={}, cases=[case])
    lines = render(report, Style(None))
    assert "Greatest absolute difference: 0.5 at index (0, 1) (up to 1e-06 allowed)" in "\n".join(lines)


def _segment(t0, t1, derived, passed=True, error=None):
    return {"segment": [t0, t1], "derived": derived, "passed": passed, "max_abs": 0.0, "max_ulp": 0, "worst": "opt",
            "bit_identical": passed, "error": error}


def test_the_replay_line_says_how_many_segments_were_derived_and_how_many_replayed(schemas):  # noqa: F811
    from verify.report import expectation_lines
    segments = [_segment(0, 2, True), _segment(2, 4, True), _segment(4, 6, False)]
    case = {"checks": [], "replay": segments, "decodes": [], "curves": [], "tensors": [], "free_runs": []}
    [line] = expectation_lines(case, Style(None))
    assert line == ("  replay: 3 segments from the reference's states, every one within the tolerance "
                    "(max |diff| 0; 3 bit-identical; 2 derived from the port's free run, 1 replayed)")
    segments[1] = _segment(2, 4, True, passed=False, error="the port's digest ... differs")
    lines = expectation_lines(dict(case, replay=segments), Style(None))
    assert lines == ["  replay: 3 segments from the reference's states (2 derived from the port's free run, "
                     "1 replayed), 1 failed",
                     "  replay failed [2, 4] (derived from the port's free run): the port's digest ... differs"]
    old = [{k: v for k, v in s.items() if k != "derived"} for s in segments[:1]]  # a report saved without the field
    [line] = expectation_lines(dict(case, replay=old), Style(None))
    assert line.endswith("(max |diff| 0; 1 bit-identical; 1 replayed)")


def test_the_report_schema_allows_a_segments_derived_flag_and_only_a_boolean(schemas):  # noqa: F811
    from report_samples import sample_report
    from verify.documents import DocumentError
    from verify.report import jsonable
    report = jsonable(sample_report("x").to_dict())
    schemas.check("report", report)  # the sample's segment is derived
    del report["cases"][0]["replay"][0]["derived"]
    schemas.check("report", report)  # a report saved without the field
    report["cases"][0]["replay"][0]["derived"] = "yes"
    with pytest.raises(DocumentError, match="derived"):
        schemas.check("report", report)
