"""`verify diff --rev REV [PATH ...]` and `verify diff REV`: the goldens of a git revision against
the working tree's, read from git (never checked out), in a small repository made here whose
project sits in a subdirectory (so paths inside the repository differ from the checkout's)."""

import json
import shutil
import subprocess
from pathlib import Path

import pytest

from reference.core import golden as golden_text
from verify import cli

ROOT = Path(__file__).resolve().parent.parent
NAMES = ["masked_softmax.k1.json", "masked_softmax.lens_1d.json", "masked_softmax.no_mask.json"]


def git(cwd, *args):
    return subprocess.run(["git", *args], cwd=cwd, check=True, capture_output=True, text=True).stdout


def rewrite(path, change):
    doc = json.loads(path.read_text())
    change(doc)
    path.write_text(golden_text.dumps(doc) + "\n")


@pytest.fixture
def checkout(tmp_path, monkeypatch):
    """repo/project: golden/schemas and three committed goldens per engine, then in the working
    tree one golden changed (+0.25 on one element), one added, one removed."""
    top = tmp_path / "repo"
    project = top / "project"
    shutil.copytree(ROOT / "golden" / "schemas", project / "golden" / "schemas")
    for engine in ("reference", "port"):
        (project / "golden" / "attention" / engine).mkdir(parents=True)
        for name in NAMES[:2]:
            shutil.copy(ROOT / "golden" / "attention" / engine / name, project / "golden" / "attention" / engine / name)
    git(top, "init", "-q")
    git(top, "add", ".")
    git(top, "-c", "user.name=t", "-c", "user.email=t@example.invalid", "commit", "-q", "-m", "goldens")
    port = project / "golden" / "attention" / "port"
    rewrite(port / NAMES[0], lambda d: d["outputs"]["out"]["data"].__setitem__(0, d["outputs"]["out"]["data"][0] + 0.25))
    shutil.copy(ROOT / "golden" / "attention" / "port" / NAMES[2], port / NAMES[2])
    (port / NAMES[1]).unlink()
    monkeypatch.setattr(cli, "repo_root", lambda: project)
    monkeypatch.chdir(project)
    return project


def run(capsys, *argv):
    code = cli.main(["diff", *argv])
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def test_diff_head_compares_every_golden_of_the_revision_with_the_working_tree(checkout, capsys):
    status = git(checkout, "status", "--porcelain")
    code, out, _ = run(capsys, "HEAD")
    lines = out.splitlines()
    assert code == 1, out
    assert lines[0] == "1 changed, 1 added, 1 removed, 2 unchanged (HEAD:golden/attention -> golden/attention)"
    assert lines[1].startswith(f"  changed port/{NAMES[0]}: outputs.out max|diff| 0.25 (")
    assert lines[2:] == [f"  added port/{NAMES[2]}", f"  removed port/{NAMES[1]}"]
    assert run(capsys, "--rev", "HEAD")[:2] == (code, out)  # the same as --rev HEAD
    assert git(checkout, "status", "--porcelain") == status  # nothing checked out, nothing written


def test_diff_rev_of_chosen_paths(checkout, capsys):
    code, out, _ = run(capsys, "--rev", "HEAD", "golden/attention/reference")
    assert code == 0 and out == "0 changed, 0 added, 0 removed, 2 unchanged " \
                                "(HEAD:golden/attention/reference -> golden/attention/reference)\n"
    code, out, _ = run(capsys, "--rev", "HEAD", f"golden/attention/reference/{NAMES[0]}")
    assert code == 0 and out.endswith(": identical to HEAD:golden/attention/reference/" + NAMES[0] + "\n")
    code, out, _ = run(capsys, "--rev", "HEAD", f"golden/attention/port/{NAMES[0]}")
    assert code == 1 and out.startswith(f"changed golden/attention/port/{NAMES[0]}:\n  outputs.out max|diff| 0.25")
    code, out, _ = run(capsys, "--rev", "HEAD", f"golden/attention/port/{NAMES[1]}")
    assert code == 1 and out == f"removed golden/attention/port/{NAMES[1]} (in HEAD, not in the working tree)\n"
    code, out, _ = run(capsys, "--rev", "HEAD", f"golden/attention/port/{NAMES[2]}")
    assert code == 1 and out == f"added golden/attention/port/{NAMES[2]} (not in HEAD)\n"


def test_diff_rev_against_an_earlier_commit(checkout, capsys):
    git(checkout, "add", "-A")
    git(checkout, "-c", "user.name=t", "-c", "user.email=t@example.invalid", "commit", "-q", "-m", "edit")
    assert run(capsys, "HEAD")[0] == 0  # the working tree is HEAD now
    code, out, _ = run(capsys, "--rev", "HEAD~1")
    assert code == 1 and out.startswith("1 changed, 1 added, 1 removed, 2 unchanged (HEAD~1:golden/attention")


@pytest.mark.parametrize("argv,words", [
    (["no-such-revision"], ["'no-such-revision' names no commit", "HEAD~1"]),
    (["--rev=--output=/tmp/x"], ["'--output=/tmp/x' names no commit"]),  # never taken as an option of git
    (["--rev", "HEAD", "/etc"], ["/etc is outside the checkout"]),
    (["--rev", "HEAD", "golden/nothing"], ["golden/nothing is neither in the working tree nor in HEAD"]),
    (["a", "b", "c"], ["takes OLD NEW", "got 3 argument(s)"]),
])
def test_diff_rev_errors_are_one_line_with_exit_2(checkout, capsys, argv, words):
    code, out, err = run(capsys, *argv)
    assert code == 2 and out == "" and len(err.splitlines()) == 1, err
    for word in words:
        assert word in err, (word, err)


def test_diff_rev_outside_a_git_repository(tmp_path, capsys, monkeypatch):
    shutil.copytree(ROOT / "golden" / "schemas", tmp_path / "golden" / "schemas")
    monkeypatch.setattr(cli, "repo_root", lambda: tmp_path)
    monkeypatch.setenv("GIT_CEILING_DIRECTORIES", str(tmp_path.parent))  # git does not look above tmp_path
    code, out, err = run(capsys, "HEAD")
    assert code == 2 and "is not in a git repository" in err and len(err.splitlines()) == 1
