"""A verdict nobody can fool (issue 30, items 1 and 4, and "the deploy gate named"):

- `verify show REPORT` decides a saved report from its evidence as the run did: failed browsers,
  an emptied case list, tensors edited to `passed: true` against their own figures, a stored
  failure, unused goldens: never exit 0;
- a case's own tolerance is bounded and needs a reason, and a looser one is named on its line, in
  the closing section, in JUnit and in HTML; `--tol` is parsed strictly, bounded, and warned of;
- every report (JSON, JUnit, HTML, the closing section) says whether the reference was computed
  fresh or taken from the reference cache.

Real runs of `verify` (subprocesses, or cli.main in-process for the hostile rows) on one
masked-softmax case against the committed goldens; the wrong port is a wrapper around the real one
that doubles every float output."""

import copy
import json
import os
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from helpers import main_in_process, run_verify
from hostile_kinds import _claim_pass, params  # the failing report edited to say pass
from toolkit import catalogue_case
from verify import cli
from verify.engines import node_binary

CASE_ID = "masked_softmax.lens_1d"
ROOT = Path(__file__).resolve().parent.parent

DOUBLING = r'''
"""The real port, every float64 output of every document it writes doubled."""
import json, os, subprocess, sys
node, port_cli = sys.argv[1], sys.argv[2]
request = sys.stdin.read()
out_dir = json.loads(request)["out_dir"]
proc = subprocess.run([node, port_cli, "run"], input=request, capture_output=True, text=True)
sys.stderr.write(proc.stderr)
for line in proc.stdout.splitlines():
    try:
        status = json.loads(line)
    except ValueError:
        status = None
    if isinstance(status, dict) and status.get("ok"):
        path = os.path.join(out_dir, status["id"] + ".json")
        with open(path) as fh:
            doc = json.load(fh)
        for t in doc["outputs"].values():
            if t["dtype"] == "float64":
                t["data"] = [2 * v if isinstance(v, (int, float)) else v for v in t["data"]]
        with open(path, "w") as fh:
            json.dump(doc, fh)
    print(line, flush=True)
sys.exit(proc.returncode)
'''


def _catalogue(directory, tolerance=None):
    """directory/one.json: the committed CASE_ID, with expect.tolerance when given."""
    case = catalogue_case(CASE_ID)
    case = copy.deepcopy(case)
    if tolerance is not None:
        case.setdefault("expect", {})["tolerance"] = tolerance
    directory.mkdir(parents=True, exist_ok=True)
    (directory / "one.json").write_text(json.dumps({"cases": [case]}))
    return directory


@pytest.fixture(scope="module")
def doubling(tmp_path_factory):
    script = tmp_path_factory.mktemp("doubling") / "doubling.py"
    script.write_text(DOUBLING)
    return f"{sys.executable} {script} {node_binary()} {ROOT / 'port_ts' / 'src' / 'cli.ts'}"


def _verify(*args, env=None, timeout=300):
    """verify attention --case CASE_ID against the committed goldens (read only; --case: no unused
    goldens, and the checkout's full-run report is left alone)."""
    import subprocess
    return subprocess.run([sys.executable, "-m", "verify", "attention", "--case", CASE_ID, *map(str, args)], cwd=ROOT,
                          capture_output=True, text=True, timeout=timeout, env=env)


@pytest.fixture(scope="module")
def passing_report(tmp_path_factory):
    """(the text of) a real passing report of CASE_ID, the reference computed fresh."""
    path = tmp_path_factory.mktemp("passing") / "report.json"
    proc = _verify("--fresh", "--report", path)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    return path.read_text()


@pytest.fixture(scope="module")
def doubled_report(tmp_path_factory, doubling):
    """A real failing report of CASE_ID: the doubling port."""
    path = tmp_path_factory.mktemp("doubled") / "report.json"
    proc = _verify("--port-cmd", doubling, "--report", path)
    assert proc.returncode == 1, proc.stdout + proc.stderr
    return path.read_text()


def _show(path, *args):
    return run_verify(ROOT, "show", path, *args)


# --- verify show decides from the evidence (item 1) ------------------------------------------------

def test_show_of_a_run_whose_browser_failed_exits_1(tmp_path):
    report = tmp_path / "R.json"
    env = dict(os.environ, BROWSER_CHROMIUM="/bin/false")  # there, so past the check before the run; it cannot start
    run = _verify("--browser", "chromium", "--report", report, env=env)
    assert run.returncode == 1, run.stdout + run.stderr
    assert json.loads(report.read_text())["passed"] is False
    shown = _show(report)
    assert shown.returncode == 1, shown.stdout + shown.stderr
    assert "NOT RUN browser chromium" in shown.stdout
    assert shown.stdout.strip().splitlines()[-1] == "0 passed, 1 failed"


def test_show_of_a_report_with_its_cases_emptied_is_refused(tmp_path, doubled_report):
    doc = json.loads(doubled_report)
    doc.update(cases=[], summary={"passed": 0, "failed": 0})
    path = tmp_path / "empty.json"
    path.write_text(json.dumps(doc))
    shown = _show(path)
    assert shown.returncode == 2, shown.stdout + shown.stderr
    assert "holds no case" in shown.stderr and len(shown.stderr.strip().splitlines()) == 1
    assert "Traceback" not in shown.stderr


def test_show_judges_tensors_by_their_figures_not_their_stored_verdict(tmp_path, doubled_report):
    doc = _claim_pass(json.loads(doubled_report))
    out = next(t for t in doc["cases"][0]["tensors"] if t["name"] == "out")
    assert out["mismatched"] > 0 and out["max_abs"] > out["allowed_at_max_abs"]  # the figures of the doubling port
    path = tmp_path / "edited.json"
    path.write_text(json.dumps(doc))
    shown = _show(path)
    assert shown.returncode == 1, shown.stdout
    assert f"output 'out': recorded as passed, but mismatched {out['mismatched']} of {out['total']}" in shown.stdout
    assert shown.stdout.strip().splitlines()[-1] == "0 passed, 1 failed"


def test_show_never_turns_a_stored_failure_into_a_pass(tmp_path, passing_report):
    for where in ("case", "report"):
        doc = json.loads(passing_report)
        if where == "case":
            doc["cases"][0]["passed"] = False
        doc["passed"] = False
        path = tmp_path / f"{where}.json"
        path.write_text(json.dumps(doc))
        shown = _show(path)
        assert shown.returncode == 1, (where, shown.stdout)
        assert ("stored as failed in the report" if where == "case" else "not a pass: the report's stored verdict is FAIL") \
            in shown.stdout


def test_show_fails_on_unused_goldens(tmp_path, passing_report):
    doc = json.loads(passing_report)
    doc["unused_goldens"] = ["golden/attention/port/gone.json"]
    path = tmp_path / "unused.json"
    path.write_text(json.dumps(doc))
    shown = _show(path)
    assert shown.returncode == 1 and "unused golden golden/attention/port/gone.json" in shown.stdout


def test_the_faithful_report_still_shows_as_a_pass(tmp_path, passing_report):
    path = tmp_path / "good.json"
    path.write_text(passing_report)
    shown = _show(path)
    assert shown.returncode == 0, shown.stdout + shown.stderr
    assert shown.stdout.strip().splitlines()[-1] == "1 passed, 0 failed"


# --- tolerances visible and bounded (item 4) ------------------------------------------------------

@pytest.mark.parametrize("tolerance, says", [
    ({"value": 1, "reason": "the port is close enough"}, "1 is greater than the maximum of 0.001"),
    ({"value": 1e-4, "reason": "   "}, "does not match"),
    ({"value": 1e-4}, "'reason' is a required property"),
])
def test_a_case_tolerance_beyond_the_bound_or_without_a_reason_is_refused(tmp_path, tolerance, says):
    cases = _catalogue(tmp_path / "cases", tolerance)
    proc = run_verify(ROOT, "attention", "--list", "--cases-dir", cases)
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert says in proc.stderr and len(proc.stderr.strip().splitlines()) == 1 and proc.stdout == ""


def test_a_case_tolerance_of_1_no_longer_passes_the_doubling_port(tmp_path, doubling):
    """The issue's hole: goldens that echo the case as it stands (written from the plain case,
    then given its expect, as a regen of it would), and a port doubling every output passed."""
    tolerance = {"value": 1, "reason": "the port is close enough"}
    goldens = tmp_path / "golden"
    regen = run_verify(ROOT, "regen", "attention", "--cases-dir", _catalogue(tmp_path / "plain"), "--golden-dir", goldens)
    assert regen.returncode == 0, regen.stdout + regen.stderr
    for path in goldens.glob("*/*.json"):
        doc = json.loads(path.read_text())
        doc["case"]["expect"] = {"tolerance": tolerance}
        path.write_text(json.dumps(doc, sort_keys=True) + "\n")
    cases = _catalogue(tmp_path / "cases", tolerance)
    proc = _verify("--cases-dir", cases, "--golden-dir", goldens, "--port-cmd", doubling)
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert "greater than the maximum of 0.001" in proc.stderr


def test_a_looser_case_tolerance_is_named_on_its_line_in_the_closing_section_junit_and_html(tmp_path, doubling):
    reason = "a looser rule for this test"
    cases = _catalogue(tmp_path / "cases", {"value": 1e-3, "reason": reason})
    junit, html = tmp_path / "r.xml", tmp_path / "r.html"
    proc = _verify("--cases-dir", cases, "--port-cmd", doubling, "--junit", junit, "--html", html)
    assert proc.returncode == 1, proc.stdout + proc.stderr  # doubled outputs fail even at the bound
    named = f"tolerance 0.001, looser than the default 1e-06 ({reason})"
    lines = proc.stdout.splitlines()
    assert any(line.startswith(f"FAIL forward  {CASE_ID}") and line.endswith(named) for line in lines), proc.stdout
    assert f"looser tolerance {CASE_ID}: {named}" in lines
    tc = next(t for t in ET.parse(junit).getroot().iter("testcase") if t.get("name") == CASE_ID)
    assert {p.get("name"): p.get("value") for p in tc.iter("property")}["tolerance"] == named
    assert 'id="looser-tolerances"' in html.read_text() and named in html.read_text()


def test_a_looser_case_tolerance_is_named_on_a_passing_case_too(tmp_path):
    cases = _catalogue(tmp_path / "cases", {"value": 1e-5, "reason": "shown when it passes"})
    goldens = tmp_path / "golden"  # the case echoes its expect: goldens of its own
    regen = run_verify(ROOT, "regen", "attention", "--cases-dir", cases, "--golden-dir", goldens)
    assert regen.returncode == 0, regen.stdout + regen.stderr
    proc = _verify("--cases-dir", cases, "--golden-dir", goldens)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert f"looser tolerance {CASE_ID}: tolerance 1e-05, looser than the default 1e-06 (shown when it passes)" \
        in proc.stdout.splitlines()


@pytest.mark.parametrize("command", [["attention", "--list"], ["regen", "attention"], ["inspect", "the cat"],
                                     ["faults", "attention"], ["diff", "a.json", "b.json"]],
                         ids=["attention", "regen", "inspect", "faults", "diff"])
@pytest.mark.parametrize("value", ["1_0", " 1", "nan", "inf", "0x1p-3", "1", "1e6", "1e308"])
def test_tol_is_parsed_strictly_and_bounded_by_every_command(command, value, capsys):
    with pytest.raises(SystemExit) as exit_:
        cli.main([*command, "--tol", value])
    err = capsys.readouterr().err
    assert exit_.value.code == 2, err
    assert "argument --tol: expected a positive number" in err.strip().splitlines()[-1]
    assert "RuntimeWarning" not in err and "Traceback" not in err


def test_a_looser_tol_is_warned_of_once_and_named_in_the_closing_section(tmp_path):
    proc = _verify("--tol", "1e-5")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    warnings = [line for line in proc.stderr.splitlines() if "warning" in line]
    assert warnings == ["verify: warning: --tol 1e-05 is looser than the default 1e-06: every case that does not "
                        "declare its own tolerance is judged at it"]
    assert any(line.startswith("tolerance: |port - reference| <= 1e-05 * (1 + |reference|) per element "
                               "(--tol, looser than the default 1e-06)") for line in proc.stdout.splitlines())
    quiet = run_verify(ROOT, "attention", "--list", "--case", CASE_ID, "--tol", "1e-7")  # tighter: nothing said
    assert quiet.returncode == 0 and quiet.stderr == ""


# --- fresh or cached, stated in every output (the deploy gate) -------------------------------------

def _outputs(tmp_path, name, *args, env=None):
    paths = {k: tmp_path / f"{name}.{k}" for k in ("json", "xml", "html")}
    proc = _verify("--report", paths["json"], "--junit", paths["xml"], "--html", paths["html"], *args,
                   env=env)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    junit = {p.get("name"): p.get("value") for p in ET.parse(paths["xml"]).getroot().find("testsuite").find("properties")}
    return proc.stdout, json.loads(paths["json"].read_text()), junit, paths["html"].read_text()


def test_every_output_says_the_reference_was_computed_fresh_or_taken_from_the_cache(tmp_path):
    out, doc, junit, html = _outputs(tmp_path, "fresh", "--fresh")
    assert doc["reference"] == {"fresh": True, "from_cache": 0, "cases": 1}
    assert junit["reference.fresh"] == "true" and junit["reference.cases_from_cache"] == "0"
    assert 'id="reference" data-fresh="true"' in html
    assert "reference: run afresh on every case (the reference cache was not used)" in out.splitlines()

    env = {k: v for k, v in os.environ.items() if k != "VERIFY_FRESH"}
    env["VERIFY_REFERENCE_CACHE"] = str(tmp_path / "cache")
    _outputs(tmp_path, "cold", env=env)  # fills the cache
    out, doc, junit, html = _outputs(tmp_path, "warm", env=env)
    assert doc["reference"] == {"fresh": False, "from_cache": 1, "cases": 1}
    assert junit["reference.fresh"] == "false" and junit["reference.cases_from_cache"] == "1"
    assert 'id="reference" data-fresh="false"' in html
    assert any(line.startswith("reference: 1 of 1 case(s) from cache") for line in out.splitlines())


def test_show_derives_the_reference_field_and_reads_reports_written_before_it(tmp_path, passing_report):
    doc = json.loads(passing_report)
    del doc["reference"]  # a report from before the field
    old = tmp_path / "old.json"
    old.write_text(json.dumps(doc))
    junit = tmp_path / "old.xml"
    shown = _show(old, "--junit", junit)
    assert shown.returncode == 0, shown.stdout + shown.stderr
    assert {p.get("name"): p.get("value") for p in ET.parse(junit).getroot().iter("property")}["reference.fresh"] == "true"


# --- the hostile rows of this area ------------------------------------------------------------------

@pytest.mark.parametrize("kind", params("saved report"))
def test_a_hostile_saved_report(kind, passing_report, doubled_report, tmp_path, capsys):
    edit, extra = kind.data
    doc = edit(json.loads(passing_report), json.loads(doubled_report))
    path = tmp_path / "report.json"
    path.write_text(doc if isinstance(doc, str) else json.dumps(doc))
    code, out, err = main_in_process(capsys, ["show", path, *extra])
    assert code == kind.exit, out + err
    assert "Traceback" not in out + err
    if kind.exit == 2:
        assert len(err.strip().splitlines()) == 1 and kind.says in err, err
    else:
        assert kind.says in out, out


@pytest.mark.parametrize("kind", params("tolerance"))
def test_a_tolerance_condition(kind, tmp_path, capsys):
    tolerance, argv = kind.data
    cases = _catalogue(tmp_path / "cases", tolerance)
    code, out, err = main_in_process(capsys, [a.format(cases=cases, tmp=tmp_path) for a in argv])
    assert code == kind.exit, out + err
    assert "Traceback" not in err and "RuntimeWarning" not in err
    lines = err.strip().splitlines()
    if kind.exit == 2:
        assert kind.says in lines[-1], err
        assert len(lines) == 1 or "usage:" in err, err
    elif kind.says:
        assert [line for line in lines if kind.says in line] and len(lines) == 1, err  # one warning line
    else:
        assert err == "" and CASE_ID in out
