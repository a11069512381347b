"""`verify bisect GOOD [BAD]` (verify/tools/bisect.py) on a scripted history in a temporary repository:
the project copied, `git init`, eight commits:

  1 the project        2 a doc line        3 a doc line        4 a doc line
  5 the port bug (the find/replace of fault port.softmax.valid_len_off_by_one, ops/attention/masked_softmax.json)
  6 a syntax error in the port's entry (every case NOT RUN or exit 2: a skip); the search meets it
  7 the entry fixed    8 a doc line

The bisect runs as that repository's own `python -m verify` (cwd and PYTHONPATH there), on the one
case masked_softmax.lens_1d (the fault's witness), and must name commit 5 and leave the
repository's working tree, HEAD, branch, refs and worktree list as they were."""

import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest

from helpers import ROOT, assert_one_line_error, project_copy

CASE = "masked_softmax.lens_1d"
SOURCE = "port_ts/src/nn/maskedSoftmax.ts"
ENTRY = "port_ts/src/cli.ts"
GIT_ENV = {"GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@example.com", "GIT_COMMITTER_NAME": "t",
           "GIT_COMMITTER_EMAIL": "t@example.com", "GIT_CONFIG_GLOBAL": os.devnull, "GIT_CONFIG_NOSYSTEM": "1"}


def git(repo, *args):
    return subprocess.run(["git", *args], cwd=repo, capture_output=True, text=True, check=True,
                          env=dict(os.environ, **GIT_ENV)).stdout.strip()


def the_fault():
    bundle = json.loads((ROOT / "ops" / "attention" / "masked_softmax.json").read_text())
    return next(f for f in bundle["faults"] if f["id"] == "port.softmax.valid_len_off_by_one")


def edit(repo, path, find, replace):
    file = repo / path
    text = file.read_text()
    assert text.count(find) == 1, (path, find)
    file.write_text(text.replace(find, replace))


def commit(repo, subject):
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "-m", subject)
    return git(repo, "rev-parse", "HEAD")


def doc_line(repo, text):
    with open(repo / "NOTES.md", "a") as fh:
        fh.write(text + "\n")


def new_repo(tmp):
    repo = project_copy(tmp)
    shutil.copy2(ROOT / ".gitignore", repo / ".gitignore")  # reports/ and __pycache__ stay untracked
    git(repo, "init", "-q", "-b", "main")
    return repo


@pytest.fixture(scope="module")
def history(tmp_path_factory):
    repo = new_repo(tmp_path_factory.mktemp("bisect"))
    fault = the_fault()
    entry = (repo / ENTRY).read_text()
    commits = [commit(repo, "1 the project")]
    for n in (2, 3, 4):
        doc_line(repo, f"note {n}")
        commits.append(commit(repo, f"{n} a doc line"))
    edit(repo, SOURCE, fault["find"], fault["replace"])
    commits.append(commit(repo, "5 masked softmax: the valid length"))
    (repo / ENTRY).write_text(entry + "\nthis is not TypeScript (\n")
    commits.append(commit(repo, "6 the port's entry, broken"))
    (repo / ENTRY).write_text(entry)
    commits.append(commit(repo, "7 the port's entry, fixed"))
    doc_line(repo, "note 8")
    commits.append(commit(repo, "8 a doc line"))
    return repo, commits


def verify(repo, *args):
    return subprocess.run([sys.executable, "-m", "verify", *map(str, args)], cwd=repo, capture_output=True, text=True,
                          env=dict(os.environ, PYTHONPATH=str(repo), **GIT_ENV), timeout=600)


def state(repo):
    """What bisect must leave as it was."""
    return {"status": git(repo, "status", "--porcelain", "--ignored"), "head": git(repo, "rev-parse", "HEAD"),
            "branch": git(repo, "symbolic-ref", "HEAD"), "refs": git(repo, "for-each-ref"),
            "worktrees": git(repo, "worktree", "list", "--porcelain")}


def leftovers():
    return {p.name for p in Path(tempfile.gettempdir()).glob("verify-bisect-*")}


def test_names_the_commit_that_broke_the_case(history):
    repo, commits = history
    before, dirs = state(repo), leftovers()
    proc = verify(repo, "bisect", commits[0], commits[7], "--case", CASE)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert f"first failing commit: {commits[4]} 5 masked softmax: the valid length" in proc.stdout, proc.stdout
    assert f"  {SOURCE}\n" in proc.stdout and "ops touched: masked_softmax\n" in proc.stdout, proc.stdout
    assert f"decided by: {CASE}: " in proc.stdout and "worst tensor: output " in proc.stdout, proc.stdout
    assert f"  {commits[5][:10]} skip " in proc.stdout, proc.stdout  # the broken entry was met, and skipped
    assert state(repo) == before and leftovers() <= dirs
    assert len(git(repo, "worktree", "list").splitlines()) == 1


def test_a_good_that_fails_too_is_refused(history):
    repo, commits = history
    before = state(repo)
    proc = verify(repo, "bisect", commits[4], commits[7], "--case", CASE)
    assert_one_line_error(proc, f"GOOD {commits[4][:7]} (5 masked softmax: the valid length) is not good",
                          "fails the cases too")
    assert state(repo) == before


@pytest.mark.parametrize("good, bad, says", [("no-such-rev", "HEAD", "'no-such-rev' names no commit"),
                                             (7, 0, "is not an ancestor of BAD")])
def test_revisions_that_cannot_be_searched(history, good, bad, says):
    repo, commits = history
    good, bad = (commits[x] if isinstance(x, int) else x for x in (good, bad))
    assert_one_line_error(verify(repo, "bisect", good, bad, "--case", CASE), says)


def test_a_copy_outside_git_is_refused(tmp_path):
    repo = project_copy(tmp_path)
    assert_one_line_error(verify(repo, "bisect", "HEAD~1", "--case", CASE), "is not a git checkout",
                          "run it from a clone of the project")


def test_without_bad_the_cases_come_from_the_last_report(history):
    repo, commits = history
    run = verify(repo, "attention", "--case", CASE)  # at HEAD, commit 8: the case fails
    assert run.returncode == 1, run.stdout + run.stderr
    try:
        before = state(repo)
        proc = verify(repo, "bisect", commits[3])
        assert proc.returncode == 0, proc.stdout + proc.stderr
        assert f"failing cases: 1 from reports/verify-attention.subset.json" in proc.stdout, proc.stdout
        assert f"first failing commit: {commits[4]} " in proc.stdout, proc.stdout
        assert state(repo) == before
    finally:
        shutil.rmtree(repo / "reports")


def test_a_failure_only_in_the_uncommitted_changes_is_named(tmp_path):
    repo = new_repo(tmp_path)
    first = commit(repo, "1 the project")
    doc_line(repo, "note 2")
    commit(repo, "2 a doc line")
    edit(repo, SOURCE, the_fault()["find"], the_fault()["replace"])  # not committed
    assert verify(repo, "attention", "--case", CASE).returncode == 1
    proc = verify(repo, "bisect", first)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "the failure is in the uncommitted changes" in proc.stdout and f"  {SOURCE}" in proc.stdout, proc.stdout


def test_ctrl_c_removes_the_worktree(history):
    repo, commits = history
    before, dirs = state(repo), leftovers()
    proc = subprocess.Popen([sys.executable, "-m", "verify", "bisect", commits[0], commits[7], "--case", CASE], cwd=repo,
                            env=dict(os.environ, PYTHONPATH=str(repo), **GIT_ENV), stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 60
    while len(git(repo, "worktree", "list").splitlines()) < 2 and time.monotonic() < deadline:
        time.sleep(0.05)
    time.sleep(0.3)  # the run at BAD has started (it takes about 0.6 s)
    proc.send_signal(signal.SIGINT)
    out, err = proc.communicate(timeout=60)
    assert proc.returncode == 128 + signal.SIGINT, out + err
    assert "interrupted (SIGINT)" in err and "Traceback" not in err, err
    assert state(repo) == before and leftovers() <= dirs


# --- the search alone, on verdicts given in advance ------------------------------------------

class Verdicts:
    """A tester whose commits are good, bad or skip as given, in the order they are asked."""

    def __init__(self, letters):
        self.verdicts = {n: {"g": "good", "b": "bad", "s": "skip"}[v] for n, v in enumerate(letters)}
        self.asked = []

    def test(self, commit, cases, what=""):
        self.asked.append(commit)
        return self.verdicts[commit], "", {"id": "x"} if self.verdicts[commit] == "bad" else None


@pytest.mark.parametrize("verdicts, first, candidates", [
    ("gggbbbb", 3, []),
    ("bbbbbbb", 0, []),
    ("ggggggb", 6, []),
    ("ggsgbbb", 4, []),  # the skipped middle is passed over: it lies before the last good commit
    ("ggssbbb", 4, [2, 3, 4]),  # only skipped commits between the last good and the first bad
    ("sssssb", 5, [0, 1, 2, 3, 4, 5]),
])
def test_the_search(verdicts, first, candidates):
    from verify.tools.bisect import search
    tester = Verdicts(verdicts)
    found, open_, _ = search(tester, list(range(len(verdicts))), ["x"])
    assert (found, open_) == (first, candidates)
    assert len(verdicts) - 1 not in tester.asked  # the last commit is BAD, known
