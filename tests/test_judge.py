"""The per-case judge (verify/judge.py), through the command line:

- Judging each case as both engines report it (while the other processes run) is an accelerator:
  `VERIFY_PLAIN=1` judges every case after the engines instead, and `--jobs 1` runs and judges one
  thing after the other. All three give the same report and print the same case blocks.
- Each case is judged and printed once, even when the port prints every status line twice (the
  same line again is harmless); a second, different status line for a case stops the run (exit 2,
  tests/hostile_kinds.py: status-changed).
"""

import json
import shlex
import sys
import textwrap

import pytest

from helpers import judged, main_in_process, split_output

pytestmark = pytest.mark.slow

CASES = ("--case", "train.alignment", "--case", "masked_softmax.no_mask", "--case", "masked_softmax.lens_1d")


def _attention(capsys, tmp_path, name, *args):
    report = tmp_path / f"{name}.json"
    code, out, err = main_in_process(capsys, ["attention", *CASES, "--report", report, *args])
    assert "Traceback" not in out + err, out[-3000:] + err[-3000:]
    return code, out, json.loads(report.read_text(encoding="utf-8"))


def _blocks(out):
    """The cases' blocks as printed (sorted), without the reference cache's lines (which differ
    between a first run and the next)."""
    return split_output("\n".join(line for line in out.splitlines() if not line.startswith("reference")))[0]


def test_judging_during_the_engines_after_them_and_one_by_one_give_the_same_report(capsys, tmp_path, monkeypatch):
    monkeypatch.delenv("VERIFY_PLAIN", raising=False)
    during = _attention(capsys, tmp_path, "during")
    sequential = _attention(capsys, tmp_path, "sequential", "--jobs", "1")
    monkeypatch.setenv("VERIFY_PLAIN", "1")
    after = _attention(capsys, tmp_path, "after")
    assert during[0] == after[0] == sequential[0] == 0, during[1][-3000:]
    assert judged(during[2]) == judged(after[2]) == judged(sequential[2])
    assert _blocks(during[1]) == _blocks(after[1]) == _blocks(sequential[1]) and len(_blocks(during[1])) == 3
    [train] = [c for c in during[2]["cases"] if c["id"] == "train.alignment"]
    assert train["replay"] and all(s["passed"] for s in train["replay"])  # the replay was planned and judged


REPEATER = textwrap.dedent('''
    """Runs the port and prints each of its stdout lines twice."""
    import subprocess, sys
    text = sys.stdin.read()
    proc = subprocess.run(sys.argv[1:], input=text, capture_output=True, text=True)
    for line in proc.stdout.splitlines():
        print(line)
        print(line, flush=True)
    sys.stderr.write(proc.stderr)
    sys.exit(proc.returncode)
''')


def test_a_repeated_status_line_judges_and_prints_each_case_once(capsys, tmp_path, repo_root, node):
    script = tmp_path / "repeater.py"
    script.write_text(REPEATER)
    port = shlex.join([sys.executable, str(script), str(node), str(repo_root / "port_ts" / "src" / "cli.ts"), "run"])
    code, out, report = _attention(capsys, tmp_path, "repeated", "--port-cmd", port)
    assert code == 0, out[-3000:]
    heads = [block.splitlines()[0].split()[2] for block in _blocks(out)]
    assert sorted(heads) == sorted(c["id"] for c in report["cases"]) and len(heads) == 3  # each once
