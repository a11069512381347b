"""Helpers shared by the runner's tests: run the CLI, and check a usage or input error's shape."""

import json
import os
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def main_in_process(capsys, argv):
    """(exit code, stdout, stderr) of `verify ARGV` run in this process (argparse's exit included)."""
    from verify import cli
    try:
        code = cli.main([str(a) for a in argv])
    except SystemExit as exc:
        code = exc.code
    out, err = capsys.readouterr()
    return code, out, err


def project_copy(tmp):
    """The checkout's parts the runner and both engines read, copied into tmp/project: the runner
    imported from the copy (PYTHONPATH) takes the copy as the project."""
    copy = Path(tmp) / "project"
    for part in ("verify", "reference", "golden", "ops", "port_ts/src", "port_ts/package.json",
                 "pyproject.toml"):
        source, target = ROOT / part, copy / part
        target.parent.mkdir(parents=True, exist_ok=True)
        if source.is_dir():
            shutil.copytree(source, target, ignore=shutil.ignore_patterns("__pycache__", "node_modules"))
        else:
            shutil.copy2(source, target)
    return copy


VERIFY = Path(sys.executable).with_name("verify")  # the console script `pip install -e .` puts beside python


def user_attention(root, report, *args, env=None, python=None, timeout=600):
    """`verify attention ARGS --report REPORT` run in the checkout (or copy) root as the README's
    main command runs it: the `verify` console script, the runner imported from root, the
    environment as it is (the session's reference cache: conftest.py); `python -c PYTHON` instead
    of the script when given. (the completed process, the JSON report or None)."""
    assert VERIFY.is_file(), f"expected the console script {VERIFY} (pip install -e .)"
    command = [str(VERIFY)] if python is None else [sys.executable, "-c", python]
    environ = dict(os.environ if env is None else env, PYTHONPATH=str(root))
    proc = subprocess.run([*command, "attention", *map(str, args), "--report", str(report)], cwd=root, env=environ,
                          capture_output=True, text=True, timeout=timeout)
    return proc, (json.loads(Path(report).read_text(encoding="utf-8")) if Path(report).is_file() else None)


def judged(report):
    """A JSON report without what two runs of the same verdicts may differ in: the timings, each
    case's seconds, and where the reference came from (`reference`, `reference_cache`)."""
    kept = {k: v for k, v in report.items() if k not in ("timings", "reference", "reference_cache")}
    kept["cases"] = [{k: v for k, v in c.items() if k != "seconds"} for c in report["cases"]]
    return kept


def run_verify(root, *args, timeout=900):
    return subprocess.run([sys.executable, "-m", "verify", *map(str, args)], cwd=root,
                          capture_output=True, text=True, timeout=timeout)


def assert_one_line_error(proc, *fragments):
    """Exit 2, one line on stderr naming the problem, never a traceback."""
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert "Traceback" not in proc.stderr + proc.stdout
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1, proc.stderr
    for fragment in fragments:
        assert fragment in lines[0], lines[0]


def keep_run(root, argv, specs, cache_dir, extra=None, timeout=900):
    """Run an engine once on the cases and keep what it wrote, as verify/cached_engine.py reads it
    (cache_dir/statuses.json and cache_dir/out/); returns the command that answers from it (a
    replay request still goes to argv, the real engine)."""
    cache_dir = Path(cache_dir)
    out = cache_dir / "out"
    request = {"protocol": 1, "out_dir": str(out), "cases": specs, **(extra or {})}
    proc = subprocess.run([str(a) for a in argv], input=json.dumps(request), cwd=root, capture_output=True, text=True,
                          timeout=timeout)
    assert proc.returncode == 0, proc.stderr[-3000:]
    statuses = {s["id"]: s for s in map(json.loads, proc.stdout.splitlines())}
    assert set(statuses) == {s["id"] for s in specs}, "the engine did not report every case"
    (cache_dir / "statuses.json").write_text(json.dumps(statuses))
    return shlex.join([sys.executable, "-m", "verify.cached_engine", str(cache_dir), "--", *map(str, argv)])


CLOSING = ("=== ", "where to start: ", "short summary:", "note: ", "unused golden", "timings (", "reports: ", "tolerance: ",
           "reference: ", "looser tolerance ", "port: ")


def split_output(stdout):
    """(the cases' blocks as printed while the run went, sorted: each case's line and its indented
    lines; the closing section without its `reports:` line). The cases are printed as their
    verdicts arrive, so only their set is stable; `verify show` prints them in catalogue order. A
    run answered from the reference cache says so before the cases too: that line is left out."""
    lines = stdout.splitlines()
    while lines and lines[0].startswith("reference: "):  # the reference cache's line before the cases
        lines = lines[1:]
    end = next((n for n, line in enumerate(lines) if line.startswith(CLOSING)), len(lines))
    blocks, current = [], []
    for line in lines[:end]:
        if line.startswith(("PASS ", "FAIL ", "NOT RUN ")) and current:
            blocks.append("\n".join(current))
            current = []
        current.append(line)
    if current:
        blocks.append("\n".join(current))
    return sorted(blocks), [line for line in lines[end:] if not line.startswith("reports: ")]
