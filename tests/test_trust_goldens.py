"""Bit identity and the goldens that vouch for it (issue 30, items 5, 8, 9 and the lock cases of 14):
`--bitwise` fails every bit difference (-0.0 for +0.0 included: one ULP apart, never "0 ULP"), a
golden that differs from its engine's fresh output in any way (the text alone, a digest removed or
zeroed) fails under --bitwise with what differs named, a document that names a key twice is refused
wherever it is read, a regeneration over another catalogue never removes goldens it was not asked
about, and the regeneration lock is never a link, a pipe, a directory or a hard link.

The scripted engines (tests/test_hostile_table.py ENGINE) answer from the committed goldens, read
only, into a temporary golden directory: a row costs two small Python processes. One test runs the
real port behind a wrapper that negates one zero of its output."""

import json
import os
import re
import shutil
import sys
import textwrap
from pathlib import Path
from types import SimpleNamespace

import pytest

from hostile_kinds import params
from test_hostile_table import ENGINE
from toolkit import catalogue_case
from verify import cli, regen
from verify.errors import InputError

CASE_ID = "masked_softmax.lens_1d"  # an int64 input (valid_lens, its first value 0) and zeros in its output


def _snapshot(directory):
    return {p.relative_to(directory).as_posix(): p.read_bytes() for p in sorted(Path(directory).rglob("*")) if p.is_file()}


@pytest.fixture
def t(repo_root, tmp_path, capsys, monkeypatch):
    """What every scenario uses: a one-case catalogue, a private golden directory holding that
    case's committed goldens, scripted engines answering from the committed goldens, and
    `verify` run in this process."""
    committed = repo_root / "golden" / "attention"
    cases = tmp_path / "cases"
    cases.mkdir()
    case = catalogue_case(CASE_ID)
    (cases / "one.json").write_text(json.dumps({"cases": [case]}))
    golden = tmp_path / "golden" / "attention"
    for engine in ("reference", "port"):
        (golden / engine).mkdir(parents=True)
        shutil.copy(committed / engine / f"{CASE_ID}.json", golden / engine)
    script = tmp_path / "engine.py"
    script.write_text(ENGINE)
    monkeypatch.chdir(repo_root)

    def engine(name, body, source=None):
        body_file = tmp_path / f"{name}.body"
        body_file.write_text(body)
        return [sys.executable, str(script), str(source or committed / name), str(body_file)]

    def scripted(body="copy_all()", reference="copy_all()"):
        """The options --port-cmd and --reference-cmd of a scripted port and a scripted reference
        (answering `reference`; with --reference-cmd the reference cache is not used)."""
        return ["--port-cmd", " ".join(engine("port", body)), "--reference-cmd", " ".join(engine("reference", reference))]

    def run(*argv):
        capsys.readouterr()
        try:
            code = cli.main([str(a) for a in argv])
        except SystemExit as exc:
            code = exc.code
        out, err = capsys.readouterr()
        assert "Traceback" not in out + err, out + err
        return code, out, err

    def attention(*extra, body="copy_all()", reference="copy_all()"):
        report = tmp_path / "report.json"
        code, out, err = run("attention", "--cases-dir", cases, "--golden-dir", golden, "--case", CASE_ID,
                             *scripted(body, reference), "--report", report, *extra)
        return code, out + err, (json.loads(report.read_text()) if report.exists() else None)

    def edit_golden(engine_name, change):
        """Rewrite the private golden with change(text) -> text or bytes."""
        path = golden / engine_name / f"{CASE_ID}.json"
        new = change(path.read_text())
        path.write_bytes(new if isinstance(new, bytes) else new.encode())

    return SimpleNamespace(root=repo_root, tmp=tmp_path, cases=cases, golden=golden, committed=committed, run=run,
                           scripted=scripted, attention=attention, edit_golden=edit_golden)


def _one_line(code, err):
    lines = err.strip().splitlines()
    assert code == 2 and len(lines) == 1, err
    return lines[0]


# --- what a port (scripted) writes ------------------------------------------------------------------

# The first exact +0.0 of the output (the reference writes 0.0, the port 0) written -0.0; the text
# otherwise the golden's, byte for byte.
ZERO = r"(?<= )0(\.0)?(?=[,\]])"


def _negate_first_zero(text):
    k = text.index('"outputs"')
    negated = re.sub(ZERO, "-0.0", text[k:], count=1)
    assert negated != text[k:], "no +0.0 in the outputs"
    return text[:k] + negated


NEGATE_ZERO = (f"import re; t = text(ids[0]); k = t.index('\"outputs\"')\n"
               f"write(ids[0], t[:k] + re.sub({ZERO!r}, '-0.0', t[k:], count=1)); status(ids[0])")
# valid_lens[0] (the int64 input, 0) written -0.0: JSON's integer 0 spelt as a float.
NEGATE_INT_ZERO = ("t = text(ids[0]); assert '\"data\": [0, 2, 5]' in t\n"
                   "write(ids[0], t.replace('\"data\": [0, 2, 5]', '\"data\": [-0.0, 2, 5]', 1)); status(ids[0])")


def _minus_zero(t, bitwise):
    code, out, report = t.attention(*(["--bitwise"] if bitwise else []), body=NEGATE_ZERO)
    assert report is not None, out
    [out_tensor] = [x for x in report["cases"][0]["tensors"] if x["name"] == "out"]
    assert out_tensor["max_ulp"] == 1 and out_tensor["max_abs"] == 0.0 and out_tensor["mismatched"] == 0, out_tensor
    assert out_tensor["status"] == ("failed" if bitwise else "within the tolerance"), out_tensor
    assert report["cases"][0]["status"] == ("failed" if bitwise else "within the tolerance"), out
    return code, out


def _minus_zero_bitwise(t):
    return _minus_zero(t, True)


def _minus_zero_default(t):
    return _minus_zero(t, False)


def _int_minus_zero(t, bitwise):
    code, out, report = t.attention(*(["--bitwise"] if bitwise else []), body=NEGATE_INT_ZERO)
    lens = next(x for x in report["cases"][0]["tensors"] if x["name"] == "valid_lens")
    assert lens["status"] == "bit-identical", lens  # an int64 has no -0: the same integer
    assert report["cases"][0]["goldens"]["port"] == "drift", report["cases"][0]["goldens"]
    return code, out


def _golden_minus_zero(t):
    t.edit_golden("reference", _negate_first_zero)
    code, out, report = t.attention("--bitwise")
    assert report["cases"][0]["golden_details"]["reference"]["max_ulp"] == 1, report["cases"][0]["golden_details"]
    return code, out


def _reindented(text):
    return json.dumps(json.loads(text), indent=1, sort_keys=False) + "\n"


def _golden_text(t, bitwise):
    t.edit_golden("port", _reindented)
    code, out, report = t.attention(*(["--bitwise"] if bitwise else []))
    g = report["cases"][0]["golden_details"]["port"]
    assert g["status"] == "drift" and g["max_ulp"] == 0 and g["detail"] == "the text alone differs", g
    return code, out


def _with_digests(doc_text, digests):
    doc = json.loads(doc_text)
    doc["digests"] = digests
    return json.dumps(doc, indent=2, sort_keys=True) + "\n"


H1, H2 = "a" * 64, "b" * 64


def _digest_case(t, golden_digests, *extra):
    """Both engines write digests {init_w: H1, state.0: H2} (init*: required to match the golden);
    the port's golden holds golden_digests instead."""
    source = t.tmp / "source"
    for engine in ("reference", "port"):
        (source / engine).mkdir(parents=True)
        text = _with_digests((t.committed / engine / f"{CASE_ID}.json").read_text(), {"init_w": H1, "state.0": H2})
        (source / engine / f"{CASE_ID}.json").write_text(text)
        shutil.copy(source / engine / f"{CASE_ID}.json", t.golden / engine)
    t.edit_golden("port", lambda text: _with_digests(text, golden_digests) if golden_digests is not None
                  else json.dumps({k: v for k, v in json.loads(text).items() if k != "digests"}, indent=2, sort_keys=True) + "\n")
    body = f"source = {str(source / 'port')!r}; copy_all()"
    code, out, _ = t.attention(*extra, body=body, reference=f"source = {str(source / 'reference')!r}; copy_all()")
    return code, out


def _digests_removed(t):
    return _digest_case(t, None)


def _digest_required_zeroed(t):
    return _digest_case(t, {"init_w": "0" * 64, "state.0": H2})


def _digest_computed_removed_bitwise(t):
    return _digest_case(t, {"init_w": H1}, "--bitwise")


def _digest_computed_zeroed_bitwise(t):
    return _digest_case(t, {"init_w": H1, "state.0": "0" * 64}, "--bitwise")


def _digest_computed_zeroed_default(t):
    return _digest_case(t, {"init_w": H1, "state.0": "0" * 64})


# --- documents that name a key twice --------------------------------------------------------------

def _duplicate_outputs(text):
    """A second "outputs" after the first: the first holds a tensor the schema refuses (a string in
    its data), which a reader keeping the last key would never see."""
    doc = json.loads(text)
    hidden = json.dumps({"out": dict(doc["outputs"]["out"], data=["hidden"])})
    return text.replace('"outputs": {', f'"outputs": {hidden},\n  "outputs": {{', 1)


def _duplicate_data(text):
    return text.replace('"data": [', '"data": ["hidden"],\n      "data": [', 1)


def _duplicate_case_seed(text):
    return text.replace('"seed": 101', '"seed": "hidden",\n    "seed": 101', 1)


def _duplicate_escaped(text):
    return text.replace('"outputs": {', '"o\\u0075tputs": {"out": 7},\n  "outputs": {', 1)


def _golden_with(change):
    def scenario(t):
        t.edit_golden("port", change)
        code, out, report = t.attention()
        assert report is None  # a damaged golden is an input error: no report
        return code, _one_line(code, out)
    return scenario


def _diff_with(change):
    def scenario(t):
        bad = t.tmp / "bad.json"
        bad.write_text(change((t.golden / "port" / f"{CASE_ID}.json").read_text()))
        code, out, err = t.run("diff", bad, t.golden / "port" / f"{CASE_ID}.json")
        return code, _one_line(code, err)
    return scenario


def _nfc_nfd_names(text):
    """Two tensor names that differ only in Unicode normalisation: two keys to JSON (no duplicate),
    refused by the schema's name pattern."""
    doc = json.loads(text)
    doc["outputs"]["caf\u00e9"] = doc["outputs"]["out"]
    doc["outputs"]["cafe\u0301"] = doc["outputs"]["out"]
    return json.dumps(doc, ensure_ascii=False, indent=2)


def _bom(text):
    return b"\xef\xbb\xbf" + text.encode()


def _port_duplicate(t):
    body = ("t = text(ids[0])\n"
            "write(ids[0], t.replace('\"outputs\": {', '\"outputs\": {\"out\": 1},\\n  \"outputs\": {', 1)); status(ids[0])")
    code, out, report = t.attention(body=body)
    assert report["passed"] is False
    return code, out


def _catalogue_duplicate(t):
    (t.cases / "one.json").write_text((t.cases / "one.json").read_text().replace('"seed": ', '"seed": "x", "seed": ', 1))
    code, out, err = t.run("attention", "--cases-dir", t.cases, "--list")
    return code, _one_line(code, err)


def _report_duplicate(t):
    code, out, report = t.attention()
    assert code == 0, out
    path = t.tmp / "report.json"
    path.write_text(path.read_text().replace('"passed": ', '"passed": false, "passed": ', 1))
    code, out, err = t.run("show", path)
    return code, _one_line(code, err)


# --- regeneration over another catalogue, and the lock ----------------------------------------------

def _regen(t, *extra):
    return t.run("regen", "attention", "--cases-dir", t.cases, "--golden-dir", t.golden, *t.scripted(), *extra)


def _regen_other_catalogue(t):
    """A copy of every committed golden; a regeneration of one case from a one-case catalogue."""
    shutil.rmtree(t.golden)
    shutil.copytree(t.committed, t.golden)
    before = _snapshot(t.golden)
    code, out, err = _regen(t)
    assert _snapshot(t.golden) == before, "a golden was removed or changed"
    assert "0 removed" in out and not [line for line in out.splitlines() if line.startswith("  removed ")], out
    [note] = [line for line in out.splitlines() if line.startswith("note: kept")]
    kept = len(before) // 2 - 1
    assert f"note: kept {2 * kept} golden(s) of cases not in " in note and f"reference {kept}, port {kept}" in note, note
    return code, note


def _regen_own_catalogue(t):
    """The project's own catalogue (no --cases-dir), one case: a golden whose case is not in it is
    removed, the others are left alone."""
    extra = t.golden / "reference" / "gone.case.json"
    shutil.copy(t.golden / "reference" / f"{CASE_ID}.json", extra)
    code, out, err = t.run("regen", "attention", "--golden-dir", t.golden, "--case", CASE_ID, *t.scripted())
    assert not extra.exists() and (t.golden / "port" / f"{CASE_ID}.json").exists(), out + err
    assert "note: kept" not in out
    return code, out


def _regen_cases_dir_is_golden_dir(t):
    before = _snapshot(t.golden)
    code, out, err = t.run("regen", "attention", "--cases-dir", t.golden, "--golden-dir", t.golden)
    assert _snapshot(t.golden) == before
    return code, _one_line(code, err)


def _lock_case(make):
    def scenario(t):
        lock = regen.lock_path(t.golden)
        victim = make(t, lock)
        before = victim.read_bytes() if victim is not None and victim.is_file() else None
        golden_before = _snapshot(t.golden)
        code, out, err = _regen(t)
        line = _one_line(code, err)
        assert str(lock) in line and "remove it" in line, line
        assert out == ""  # refused before any engine ran
        assert _snapshot(t.golden) == golden_before
        if before is not None:
            assert victim.read_bytes() == before, "the lock's target was touched"
        return code, line
    return scenario


def _lock_symlink(t, lock):
    victim = t.tmp / "notes.txt"
    victim.write_text("a file the user keeps\n")
    lock.symlink_to(victim)
    return victim


def _lock_dangling(t, lock):
    lock.symlink_to(t.tmp / "nowhere" / "file")
    return None


def _lock_fifo(t, lock):
    os.mkfifo(lock)
    return None


def _lock_directory(t, lock):
    lock.mkdir()
    (lock / "keep.txt").write_text("kept\n")
    return lock / "keep.txt"


def _lock_hard_link(t, lock):
    victim = t.tmp / "notes.txt"
    victim.write_text("a file the user keeps\n")
    os.link(victim, lock)
    return victim


def _lock_raced_link(t):
    """The lock made a link after the up-front check: regen_lock itself refuses it (O_NOFOLLOW)."""
    victim = t.tmp / "notes.txt"
    victim.write_text("a file the user keeps\n")
    regen.lock_path(t.golden).symlink_to(victim)
    try:
        with regen.regen_lock(t.golden):
            pass
    except InputError as exc:
        assert victim.read_text() == "a file the user keeps\n"
        return 2, str(exc)
    return 0, "taken"


SCENARIOS = {
    "minus-zero-bitwise": _minus_zero_bitwise,
    "minus-zero-default": _minus_zero_default,
    "int64-minus-zero-bitwise": lambda t: _int_minus_zero(t, True),
    "int64-minus-zero-default": lambda t: _int_minus_zero(t, False),
    "golden-minus-zero-bitwise": _golden_minus_zero,
    "golden-text-bitwise": lambda t: _golden_text(t, True),
    "golden-text-default": lambda t: _golden_text(t, False),
    "digests-removed": _digests_removed,
    "digest-required-zeroed": _digest_required_zeroed,
    "digest-computed-removed-bitwise": _digest_computed_removed_bitwise,
    "digest-computed-zeroed-bitwise": _digest_computed_zeroed_bitwise,
    "digest-computed-zeroed-default": _digest_computed_zeroed_default,
    "golden-duplicate-outputs": _golden_with(_duplicate_outputs),
    "golden-duplicate-data": _golden_with(_duplicate_data),
    "golden-duplicate-case-key": _golden_with(_duplicate_case_seed),
    "golden-duplicate-escaped": _golden_with(_duplicate_escaped),
    "golden-bom": _golden_with(_bom),
    "golden-nfc-nfd": _golden_with(_nfc_nfd_names),
    "diff-duplicate-outputs": _diff_with(_duplicate_outputs),
    "port-duplicate-outputs": _port_duplicate,
    "catalogue-duplicate": _catalogue_duplicate,
    "report-duplicate": _report_duplicate,
    "regen-other-catalogue": _regen_other_catalogue,
    "regen-own-catalogue": _regen_own_catalogue,
    "regen-cases-dir-is-golden-dir": _regen_cases_dir_is_golden_dir,
    "lock-symlink": _lock_case(_lock_symlink),
    "lock-dangling": _lock_case(_lock_dangling),
    "lock-fifo": _lock_case(_lock_fifo),
    "lock-directory": _lock_case(_lock_directory),
    "lock-hard-link": _lock_case(_lock_hard_link),
    "lock-raced-link": _lock_raced_link,
}


@pytest.mark.parametrize("kind", params("bit identity and goldens"))
def test_a_bit_identity_or_golden_condition(kind, t):
    """Each row of tests/hostile_kinds.py's "bit identity and goldens" area: its scenario above
    sets it up, runs `verify` and checks what it must (goldens and lock targets untouched); here,
    the row's exit code and message."""
    code, text = SCENARIOS[kind.data](t)
    assert code == kind.exit and kind.says in text, (code, text)


def test_every_scenario_has_its_row():
    from hostile_kinds import ROWS
    assert sorted(r.data for r in ROWS if r.area == "bit identity and goldens") == sorted(SCENARIOS)


# --- the real port, one zero negated ---------------------------------------------------------------

WRAPPER = textwrap.dedent('''
    """Runs the port given as arguments, then writes its first exact +0.0 output value as -0.0 (the
    rest of its text unchanged) before passing its status lines on."""
    import json, os, re, subprocess, sys
    ZERO = %r
    request = sys.stdin.read()
    out_dir = json.loads(request)["out_dir"]
    done = subprocess.run(sys.argv[1:], input=request, capture_output=True, text=True)
    sys.stderr.write(done.stderr)
    for line in done.stdout.splitlines():
        status = json.loads(line)
        path = os.path.join(out_dir, status["id"] + ".json")
        if status.get("ok") and os.path.exists(path):
            text = open(path).read()
            k = text.index('"outputs"')
            negated = re.sub(ZERO, "-0.0", text[k:], count=1)
            assert negated != text[k:], "no +0.0 in the outputs"
            open(path, "w").write(text[:k] + negated)
    sys.stdout.write(done.stdout)
    sys.exit(done.returncode)
''') % ZERO


def test_the_real_port_writing_one_minus_zero_is_not_bit_identical(repo_root, node, tmp_path):
    """The port itself, one +0.0 of its output written -0.0: within the tolerance (1 ULP, never
    "0 ULP"), so it passes the default run and fails --bitwise, naming the tensor."""
    from helpers import run_verify
    wrapper = tmp_path / "negate_zero.py"
    wrapper.write_text(WRAPPER)
    port = f"{sys.executable} {wrapper} {node} port_ts/src/cli.ts run"
    results = {}
    for flag in ((), ("--bitwise",)):
        report = tmp_path / f"report{len(flag)}.json"
        proc = run_verify(repo_root, "attention", "--case", CASE_ID, "--port-cmd", port, "--report", report, *flag)
        results[flag] = (proc, json.loads(report.read_text()))
    proc, report = results[()]
    assert proc.returncode == 0, proc.stdout + proc.stderr
    [case] = report["cases"]
    assert case["status"] == "within the tolerance" and case["goldens"]["port"] == "drift", case["goldens"]
    assert "fresh, last-bit drift (max 1 ULP)" in proc.stdout
    out = next(x for x in case["tensors"] if x["name"] == "out")
    assert out["max_ulp"] == 1 and out["max_abs"] == 0.0 and out["mismatched"] == 0
    proc, report = results[("--bitwise",)]
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert "output 'out': 30 elements within the tolerance, max 1 ULP, not bit-identical (--bitwise)" in proc.stdout
