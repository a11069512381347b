"""Helpers shared by the runner's tests: run the CLI, and check a usage or input error's shape."""

import subprocess
import sys


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
