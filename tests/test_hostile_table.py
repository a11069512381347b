"""The hostile inputs of tests/hostile_kinds.py, each through the real command line (`cli.main`,
in this process, as `verify` runs it), each with the exit code and message fragment of its row:
a catalogue, a golden file, the port's process and what it writes (a scripted engine; the
reference is scripted too where only the port is under test, so a row costs two small Python
processes), the command line, and the config rule both real engines share. The table of every row,
docs/reference/hostile-conditions.md, is generated from them (tests/test_docs_generated.py)."""

import json
import os
import re
import shutil
import sys
import textwrap

import pytest

import hostile_kinds
from hostile_kinds import params
from processes import assert_nothing_left
from test_runner import cases_dir, case_ids, schemas, session_goldens  # noqa: F401 (fixtures)
from verify import cli

CASE_ID = "masked_softmax.lens_1d"  # float64 and int64 inputs, one float64 output


def _main(capsys, monkeypatch, argv):
    """cli.main(argv) as `verify` runs it: (exit code, stdout, stderr)."""
    try:
        code = cli.main([str(a) for a in argv])
    except SystemExit as exc:  # argparse's usage errors
        code = exc.code
    out, err = capsys.readouterr()
    return code, out, err


def _one_line(code, err, kind):
    assert code == kind.exit, err
    assert "Traceback" not in err
    lines = err.strip().splitlines()
    assert lines, "nothing on stderr"
    assert kind.says in lines[-1], lines[-1]
    assert not re.search(r"[\x00-\x08\x0b-\x1f\x7f]", err), repr(err)
    if kind.exit == 2 and "usage:" not in err:
        assert len(lines) == 1, err


# --- the catalogue ----------------------------------------------------------------------------

@pytest.mark.parametrize("kind", params("catalogue"))
def test_a_hostile_catalogue(kind, tmp_path, capsys, monkeypatch):
    directory = tmp_path / "cases"
    directory.mkdir()
    data = kind.data
    files = data if isinstance(data, list) else [data]
    for i, item in enumerate(files):
        path = directory / f"f{i}.json"
        if callable(item):
            item(path)
        elif isinstance(item, bytes):
            path.write_bytes(item)
        else:
            path.write_text(item, encoding="utf-8", errors="surrogatepass")
    code, out, err = _main(capsys, monkeypatch, ["attention", "--cases-dir", directory, "--list"])
    _one_line(code, err, kind)
    assert out == ""


# --- a golden file ----------------------------------------------------------------------------

@pytest.mark.parametrize("kind", params("golden file"))
def test_a_hostile_golden(kind, session_goldens, tmp_path, capsys, monkeypatch):  # noqa: F811
    good = session_goldens / "reference" / f"{CASE_ID}.json"
    bad = tmp_path / f"{CASE_ID}.json"
    if isinstance(kind.data, tuple):
        kind.data[1](bad)
    else:
        damaged = kind.data(good.read_text())
        bad.write_bytes(damaged if isinstance(damaged, bytes) else damaged.encode())
    code, out, err = _main(capsys, monkeypatch, ["diff", bad, good])
    _one_line(code, err, kind)
    assert "is not a valid golden" in err


def test_the_good_golden_and_its_diff_pass(session_goldens, capsys, monkeypatch):  # noqa: F811
    """The faithful variant of the rows above: the same golden against itself is identical, exit 0."""
    good = session_goldens / "reference" / f"{CASE_ID}.json"
    code, out, err = _main(capsys, monkeypatch, ["diff", good, good])
    assert code == 0 and "identical" in out, err


# --- the engine process and its documents -----------------------------------------------------

ENGINE = textwrap.dedent(r'''
    """A scripted engine: answers the protocol as the body file says (tests/hostile_kinds.py)."""
    import json, os, signal, subprocess, sys, time
    source, body_file = sys.argv[1], sys.argv[2]
    body = open(body_file).read()
    request = None if body.startswith("#nostdin") else json.loads(sys.stdin.read())
    ids = [c["id"] for c in request["cases"]] if request else []
    out_dir = request["out_dir"] if request else None
    if out_dir:
        os.makedirs(out_dir, exist_ok=True)

    def out(line):
        sys.stdout.write(line + "\n"); sys.stdout.flush()

    def raw(data):
        sys.stdout.buffer.write(data); sys.stdout.flush()

    def err(text):
        sys.stderr.write(text); sys.stderr.flush()

    def status(i, ok=True, seconds=0, **kw):
        out(json.dumps(dict({"id": i, "ok": ok, "seconds": seconds}, **kw)))

    def path(i):
        return os.path.join(out_dir, i + ".json")

    def text(i):
        with open(os.path.join(source, i + ".json")) as fh:
            return fh.read()

    def edit(i, change):
        doc = json.loads(text(i)); change(doc); return doc

    def write(i, data):
        with open(path(i), "wb") as fh:
            fh.write(data if isinstance(data, bytes) else data.encode())

    def dump(i, doc):
        write(i, json.dumps(doc))

    def copy_all(seconds=0):
        for i in ids:
            write(i, text(i)); status(i, seconds=seconds)

    def hang():
        time.sleep(120)

    def detach():
        subprocess.Popen([sys.executable, "-c", "import time; time.sleep(120)"], start_new_session=True)

    def child():
        subprocess.Popen([sys.executable, "-c", "import time; time.sleep(120)"])

    exec(body)
''')


@pytest.fixture(scope="module")
def one_case(cases_dir, tmp_path_factory):  # noqa: F811
    doc = json.loads((cases_dir / "masked_softmax.json").read_text())
    directory = tmp_path_factory.mktemp("one_case")
    (directory / "one.json").write_text(json.dumps({"cases": [c for c in doc["cases"] if c["id"] == CASE_ID]}))
    return directory


@pytest.fixture
def scripted(tmp_path, session_goldens):  # noqa: F811
    """scripted(port_body, reference_body="copy_all()") -> the options --port-cmd and
    --reference-cmd of two scripted engines, each answering from its goldens (with
    --reference-cmd the reference cache is not used)."""
    script = tmp_path / "engine.py"
    script.write_text(ENGINE)

    def make(port_body, reference_body="copy_all()"):
        bodies = {}
        for name, body in (("port", port_body), ("reference", reference_body)):
            bodies[name] = tmp_path / f"{name}.body"
            bodies[name].write_text(body)
        reference = f"{sys.executable} {script} {session_goldens / 'reference'} {bodies['reference']}"
        port = port_body[1:] if port_body.startswith("@") else f"{sys.executable} {script} {session_goldens / 'port'} {bodies['port']}"
        return ["--port-cmd", port, "--reference-cmd", reference]
    yield make
    assert_nothing_left(os.getpid(), tmp_path)


@pytest.mark.parametrize("kind", params("engine process"))
def test_a_hostile_engine_process(kind, scripted, one_case, session_goldens, tmp_path, capsys, monkeypatch, schemas):  # noqa: F811
    body, extra = kind.data
    report = tmp_path / "report.json"
    code, out, err = _main(capsys, monkeypatch, ["attention", "--cases-dir", one_case, "--golden-dir", session_goldens,
                                                 "--case", CASE_ID, *scripted(body), "--report", report,
                                                 *extra])
    if kind.exit == 2:
        _one_line(code, err, kind)
        if not any(a in extra for a in ("--html", "--junit", "--report")):
            assert not report.exists()  # an engine error writes no report
    else:
        assert code == kind.exit, out + err
        assert kind.says in out, out
        assert not re.search(r"[\x00-\x08\x0b-\x1f\x7f]", out)
        schemas.check("report", json.loads(report.read_text()))


@pytest.mark.parametrize("kind", params("engine document"))
def test_a_hostile_engine_document(kind, scripted, one_case, session_goldens, tmp_path, capsys, monkeypatch, schemas):  # noqa: F811
    body, reference_body = kind.data
    report = tmp_path / "report.json"
    code, out, err = _main(capsys, monkeypatch, ["attention", "--cases-dir", one_case, "--golden-dir", session_goldens,
                                                 "--case", CASE_ID, *scripted(body, reference_body),
                                                 "--report", report])
    assert code == kind.exit, out + err
    assert kind.says in out, out
    assert "Traceback" not in out + err
    doc = json.loads(report.read_text())
    schemas.check("report", doc)
    assert doc["passed"] is (kind.exit == 0)


# --- the command line -------------------------------------------------------------------------

@pytest.mark.parametrize("kind", params("command line"))
def test_a_hostile_command_line(kind, one_case, session_goldens, tmp_path, capsys, monkeypatch):  # noqa: F811
    (tmp_path / "e1").mkdir()
    (tmp_path / "e2").mkdir()
    bad_dir = tmp_path / "bad_goldens"
    shutil.copytree(session_goldens, bad_dir)
    (bad_dir / "port" / f"{CASE_ID}.json").write_text("{not json")
    (tmp_path / "nan_report.json").write_text('{"passed": NaN}')
    report = tmp_path / "report.json"
    report.write_text(_sample_report_text())
    fill = {"cases": one_case, "golden": session_goldens, "tmp": tmp_path, "first": CASE_ID, "report": report,
            "nan_report": tmp_path / "nan_report.json", "bad_golden_dir": bad_dir}
    argv = [a.format(**fill) if isinstance(a, str) else a for a in kind.data]
    code, out, err = _main(capsys, monkeypatch, argv)
    _one_line(code, err, kind)


def _sample_report_text():
    from report_samples import sample_report
    from verify.report import dumps
    return dumps(sample_report("a case"))


# --- the engines' config rule ---------------------------------------------------------------

@pytest.mark.parametrize("kind", params("engine config"))
def test_a_config_both_engines_refuse(kind, tmp_path, capsys, monkeypatch):
    case = dict(hostile_kinds.ENGINE_CASE, config=dict(hostile_kinds.ENGINE_CASE["config"], **kind.data))
    directory = tmp_path / "cases"
    directory.mkdir()
    (directory / "f.json").write_text(json.dumps({"cases": [case]}))
    code, out, err = _main(capsys, monkeypatch, ["attention", "--cases-dir", directory, "--golden-dir", tmp_path / "g"])
    assert code == kind.exit, out + err
    for engine in ("reference", "port"):
        assert f"error: {engine}: {kind.says}" in out, out  # the same rule, the same words, in both engines


def test_the_catalogue_check_passes_what_only_the_engines_refuse(tmp_path, capsys, monkeypatch):
    """The faithful variant: a config whose values are JSON numbers, strings, booleans is a valid
    catalogue entry (--list, exit 0); what a number must be is the engines' rule, above."""
    case = dict(hostile_kinds.CASE, config=dict(hostile_kinds.CASE["config"], std="NaN"))
    directory = tmp_path / "cases"
    directory.mkdir()
    (directory / "f.json").write_text(json.dumps({"cases": [case]}))
    code, out, err = _main(capsys, monkeypatch, ["attention", "--cases-dir", directory, "--list"])
    assert code == 0 and out.startswith("masked_softmax.x "), err


# --- every area has its test (the table of rows: docs/reference/hostile-conditions.md) ------------

def test_every_area_has_its_consuming_test():
    import importlib
    for area, (module, function) in hostile_kinds.CONSUMERS.items():
        test = getattr(importlib.import_module(module), function, None)
        assert test is not None, f"{module}.{function} (area {area!r}) does not exist"
        marks = [m for m in getattr(test, "pytestmark", []) if m.name == "parametrize" and m.args[0] == "kind"]
        assert marks and [p.values[0] for p in marks[0].args[1]] == [r for r in hostile_kinds.ROWS if r.area == area], \
            f"{module}.{function} does not try exactly the rows of {area!r}"
    assert len(hostile_kinds.ROWS) >= 200

