"""The command line beyond a single run: help texts, --jobs, --junit, --timings, the progress line on
a terminal, `verify diff`, and regenerations killed half-way (the goldens stay as they were)."""

import json
import os
import pty
import signal
import subprocess
import sys
import textwrap
import xml.etree.ElementTree as ET

import pytest

from helpers import split_output
from test_runner import (_rewrite_golden, _snapshot, case_ids, cases_dir, goldens, run_verify,  # noqa: F401
                         schemas, session_goldens)
from verify.documents import parse

# --- help ---------------------------------------------------------------------------------------


@pytest.mark.parametrize("argv,words", [
    ([], ["attention", "regen", "show", "diff", "Exit 0", "verify before a deploy",
          "verify attention --fresh --junit reports/junit.xml --html reports/verify-attention.html",
          "after a reviewed change verify regen attention", "read a failing report verify show reports/verify-attention.json"]),
    (["attention"], ["--case", "--tol", "--jobs", "--report", "--html", "--junit", "--timings", "--port-cmd",
                     "--timeout", "--list", "--golden-dir", "--cases-dir", "reports/verify-attention.json"]),
    (["regen"], ["--force", "--case", "--tol", "--jobs", "--port-cmd", "atomic"]),
    (["show"], ["REPORT", "--case", "--html", "--junit", "--timings"]),
    (["diff"], ["OLD", "NEW", "--tol", "Exit 0 when they hold the same bytes"]),
])
def test_every_help_names_its_options(repo_root, argv, words):
    proc = run_verify(repo_root, *argv, "--help")
    assert proc.returncode == 0, proc.stderr
    text = " ".join(proc.stdout.split())  # argparse wraps lines
    for word in words:
        assert word in text, (argv, word)


@pytest.mark.parametrize("value", ["0", "-2", "two"])
def test_a_bad_jobs_value_is_a_usage_error(repo_root, value):
    proc = run_verify(repo_root, "attention", "--jobs", value)
    assert proc.returncode == 2 and "whole number of processes" in proc.stderr


# --- runs ---------------------------------------------------------------------------------------

def _run(repo_root, cases_dir, goldens, tmp_path, *args):  # noqa: F811
    report = tmp_path / f"report{len(list(tmp_path.glob('report*')))}.json"
    proc = run_verify(repo_root, "attention", "--cases-dir", cases_dir, "--golden-dir", goldens, "--report", report, *args)
    return proc, parse(report.read_text())


def _without_time(report):
    cases = [{k: v for k, v in c.items() if k != "seconds"} for c in report["cases"]]
    return dict({k: v for k, v in report.items() if k != "timings"}, cases=cases)


def test_jobs_one_two_and_four_give_the_same_report(repo_root, cases_dir, goldens, tmp_path, case_ids):  # noqa: F811
    # --fresh: both engines are scheduled (the reference cache would answer the reference's side)
    one, r1 = _run(repo_root, cases_dir, goldens, tmp_path, "--jobs", "1", "--fresh")
    two, r2 = _run(repo_root, cases_dir, goldens, tmp_path, "--jobs", "2", "--fresh")
    four, r4 = _run(repo_root, cases_dir, goldens, tmp_path, "--jobs", "4", "--fresh")
    assert one.returncode == two.returncode == four.returncode == 0, one.stdout + two.stdout + four.stdout
    assert split_output(one.stdout) == split_output(two.stdout) == split_output(four.stdout)
    assert _without_time(r1) == _without_time(r2) == _without_time(r4)
    assert r1["timings"]["engines"]["port"]["processes"] == 1
    # the masked-softmax cases are cheap: however many jobs, no process per case
    assert r4["timings"]["engines"]["port"]["processes"] < len(case_ids)


def test_timings_say_where_the_time_went(repo_root, cases_dir, goldens, tmp_path, schemas):  # noqa: F811
    proc, report = _run(repo_root, cases_dir, goldens, tmp_path, "--timings", "--junit", tmp_path / "j.xml")
    assert proc.returncode == 0
    schemas.check("report", report)
    text = proc.stdout
    for fragment in ("timings (wall", "engine reference", "engine port", "start-up", "engines", "comparison",
                     "report: json", "report: junit", "case families", "masked_softmax", "runner's own work",
                     "% of the wall"):
        assert fragment in text, fragment
    assert text.strip().splitlines()[-1].endswith("passed, 0 failed")  # still the last line
    root = ET.parse(tmp_path / "j.xml").getroot()
    assert root.find("testsuite").get("failures") == "0"


def test_progress_is_shown_on_a_terminal_and_only_there(repo_root, cases_dir, goldens, tmp_path):  # noqa: F811
    argv = [sys.executable, "-m", "verify", "attention", "--cases-dir", str(cases_dir), "--golden-dir", str(goldens)]
    primary, secondary = pty.openpty()
    proc = subprocess.Popen(argv, cwd=repo_root, stdout=secondary, stderr=subprocess.PIPE, stdin=subprocess.DEVNULL,
                            env=dict(os.environ, TERM="xterm"))
    os.close(secondary)
    chunks = []
    while True:
        try:
            data = os.read(primary, 65536)
        except OSError:  # EIO: the child closed the terminal
            break
        if not data:
            break
        chunks.append(data)
    proc.wait(timeout=120)
    os.close(primary)
    shown = b"".join(chunks).decode()
    assert proc.returncode == 0, shown
    assert "\rverify: reference " in shown and "port " in shown and "/" in shown  # cases done / total, in place
    assert "\033[32mPASS\033[0m" in shown  # colour on a terminal
    piped = run_verify(repo_root, "attention", "--cases-dir", cases_dir, "--golden-dir", goldens)
    assert "\r" not in piped.stdout and "\033[" not in piped.stdout


# --- verify diff --------------------------------------------------------------------------------

def test_diff_of_two_goldens_and_two_directories(repo_root, goldens, session_goldens, case_ids, tmp_path):  # noqa: F811
    target = goldens / "port" / f"{case_ids[0]}.json"
    _rewrite_golden(target, lambda d: d["outputs"]["out"]["data"].__setitem__(0, d["outputs"]["out"]["data"][0] + 0.25))
    old = session_goldens / "port" / f"{case_ids[0]}.json"
    files = run_verify(repo_root, "diff", old, target)
    assert files.returncode == 1, files.stdout + files.stderr
    assert "outputs.out max|diff| 0.25" in files.stdout and "1 / " in files.stdout
    dirs = run_verify(repo_root, "diff", session_goldens, goldens)
    assert dirs.returncode == 1
    assert dirs.stdout.startswith("1 changed, 0 added, 0 removed")
    assert f"changed port/{case_ids[0]}.json: outputs.out max|diff| 0.25" in dirs.stdout
    same = run_verify(repo_root, "diff", session_goldens, session_goldens)
    assert same.returncode == 0 and same.stdout.startswith("0 changed")
    (tmp_path / "bad.json").write_text("{}")
    bad = run_verify(repo_root, "diff", old, tmp_path / "bad.json")
    assert bad.returncode == 2 and "not a valid golden" in bad.stderr and "Traceback" not in bad.stderr


# --- a regeneration killed half-way -------------------------------------------------------------

KILLER = textwrap.dedent('''
    """verify regen, killed with SIGKILL once it has written a few files of the new tree."""
    import os, signal, sys
    from verify import regen
    real, written = regen.write_synced, []
    def write_then_die(path, data):
        real(path, data)
        written.append(path)
        if len(written) == 3:
            os.kill(os.getpid(), signal.SIGKILL)
    regen.write_synced = write_then_die
    from verify.cli import main
    sys.exit(main(sys.argv[1:]))
''')


def _damage(goldens, case_ids):  # noqa: F811
    """Make a regeneration have something to write."""
    for engine in ("reference", "port"):
        _rewrite_golden(goldens / engine / f"{case_ids[0]}.json",
                        lambda d: d["outputs"]["out"]["data"].__setitem__(0, 0.5))


def test_a_regen_killed_mid_way_leaves_the_goldens_intact(repo_root, cases_dir, goldens, case_ids, tmp_path):  # noqa: F811
    _damage(goldens, case_ids)
    before = _snapshot(goldens)
    script = tmp_path / "killer.py"
    script.write_text(KILLER)
    proc = subprocess.run([sys.executable, str(script), "regen", "attention", "--cases-dir", str(cases_dir),
                           "--golden-dir", str(goldens)], cwd=repo_root, capture_output=True, text=True, timeout=120)
    assert proc.returncode == -signal.SIGKILL, proc.stdout + proc.stderr
    assert _snapshot(goldens) == before  # every byte as it was
    leftovers = [p for p in goldens.parent.iterdir() if p.name.startswith(".attention.new-")]
    assert leftovers  # the half-written tree, beside the goldens, never instead of them
    again = run_verify(repo_root, "regen", "attention", "--cases-dir", cases_dir, "--golden-dir", goldens)
    assert again.returncode == 0, again.stdout + again.stderr
    assert "left over from an interrupted regeneration" in again.stdout
    assert f"changed {case_ids[0]}: outputs.out max|diff|" in again.stdout
    check = run_verify(repo_root, "attention", "--cases-dir", cases_dir, "--golden-dir", goldens)
    assert check.returncode == 0, check.stdout


@pytest.mark.parametrize("broken", ["swap", "fsync_dir"])
def test_a_regen_that_fails_before_the_swap_changes_nothing(repo_root, cases_dir, goldens, case_ids, monkeypatch,
                                                            capsys, broken):  # noqa: F811
    from verify import cli, regen
    _damage(goldens, case_ids)
    before = _snapshot(goldens)

    def boom(*args, **kwargs):
        raise OSError(28, "No space left on device")
    monkeypatch.setattr(regen, broken, boom)
    monkeypatch.chdir(repo_root)
    code = cli.main(["regen", "attention", "--cases-dir", str(cases_dir), "--golden-dir", str(goldens)])
    assert code == 2
    err = capsys.readouterr().err
    assert "could not write the new goldens (No space left on device)" in err and "is as it was before" in err
    assert _snapshot(goldens) == before
    assert not [p for p in goldens.parent.iterdir() if p.name.startswith(".attention.new-")]  # staging removed


def test_a_path_is_displayed_relative_to_the_root_or_as_given(tmp_path):
    """Project.display: the text path.resolve().relative_to(root) gives, for links to directories
    and to files, missing files, '..'; a path outside the root, or in a loop of symbolic links, as
    given (never a traceback)."""
    from verify.cli import Project
    root = tmp_path / "root"
    (root / "golden" / "ref").mkdir(parents=True)
    (root / "elsewhere").mkdir()
    (root / "golden" / "ref" / "a.json").write_text("{}")
    (root / "linked").symlink_to(root / "golden" / "ref")
    (root / "golden" / "ref" / "b.json").symlink_to(root / "elsewhere" / "x.json")
    (tmp_path / "outside").mkdir()
    (root / "golden" / "out").symlink_to(tmp_path / "outside")
    (root / "loop").symlink_to(root / "loop")
    project = Project.__new__(Project)
    project.root = root

    assert project.display(root / "golden" / "ref" / "a.json") == "golden/ref/a.json"
    assert project.display(root / "linked" / "b.json") == "elsewhere/x.json"
    assert project.display(root / "golden" / "ref" / ".." / "ref" / "missing.json") == "golden/ref/missing.json"
    assert project.display(root / "golden" / "out" / "c.json") == str(root / "golden" / "out" / "c.json")
    assert project.display(tmp_path / "outside" / "c.json") == str(tmp_path / "outside" / "c.json")
    assert project.display(root / "loop" / "x.json") in ("loop/x.json", str(root / "loop" / "x.json"))
