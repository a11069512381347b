"""Process-level checks for the hostile scenarios: which processes a run started are still alive,
and which of its temporary directories are left. A run is known by its runner's pid: every engine
process carries VERIFY_RUN_OWNER=<runner pid>-<start time> in its environment (verify/lifecycle.py),
inherited by whatever it starts, and every temporary directory is named after the same token. So
these checks look at one run's own processes and directories only, never at a global `ps | grep`
that other runs on the machine would trip."""

import os
import signal
import time
from pathlib import Path

from verify import lifecycle


def running(pid):
    """Whether the process exists and is not a zombie (a zombie has ended; only its parent's
    wait is missing)."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as fh:
            stat = fh.read()
    except OSError:
        return False
    return stat[stat.rindex(b")") + 2:][:1] != b"Z"


def started_by(runner_pid):
    """{pid: token} of the live processes carrying a token of the runner with this pid."""
    prefix = f"{runner_pid}-"
    return {pid: t for pid, t in lifecycle.carriers("").items() if t.startswith(prefix) and running(pid)}


def dirs_of(runner_pid, tmp):
    """The temporary directories in tmp named after the runner with this pid."""
    prefix = f"{runner_pid}-"
    return sorted(p for p in Path(tmp).iterdir() if (lifecycle.owner_of(p.name) or "").startswith(prefix))


def wait_until(condition, timeout=20.0, poll=0.05):
    """Poll condition() until it is true (returns its value) or timeout seconds pass (returns the
    last, false, value)."""
    deadline = time.monotonic() + timeout
    while True:
        value = condition()
        if value or time.monotonic() > deadline:
            return value
        time.sleep(poll)


def kill_leftovers(runner_pid):
    """Stop whatever a failed test left of the run (only its own processes), so one failure does
    not leave load behind for the rest of the suite."""
    for pid in started_by(runner_pid):
        try:
            os.kill(pid, signal.SIGKILL)
        except OSError:
            pass


def assert_nothing_left(runner_pid, tmp, timeout=10.0):
    """No process the run started is alive and no temporary directory of it is left (after a
    short wait: a killed process takes a moment to go)."""
    left = wait_until(lambda: not started_by(runner_pid) and not dirs_of(runner_pid, tmp), timeout) or None
    procs, dirs = started_by(runner_pid), dirs_of(runner_pid, tmp)
    try:
        assert not procs, f"processes of the run still alive: {_describe(procs)}"
        assert not dirs, f"temporary directories of the run left: {dirs}"
    finally:
        kill_leftovers(runner_pid)
    return left


def _describe(pids):
    out = []
    for pid in pids:
        try:
            cmd = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace").strip()
        except OSError:
            cmd = "?"
        out.append(f"{pid} ({cmd})")
    return ", ".join(out)


def marked(marker):
    """The live processes whose command line holds `marker` (a word unique to one test): how a
    test finds what a port started that cleared its environment (no token) and left the run's
    process tree (a daemon)."""
    found = []
    needle = marker.encode()
    for entry in os.listdir("/proc"):
        if entry.isdigit() and int(entry) != os.getpid():
            try:
                cmdline = Path(f"/proc/{entry}/cmdline").read_bytes()
            except OSError:
                continue
            if needle in cmdline and running(int(entry)):
                found.append(int(entry))
    return sorted(found)


def kill_marked(marker, pids=()):
    """SIGKILL what a failed test left: the processes holding `marker`, and `pids` (until none is
    left: one may fork meanwhile)."""
    for _ in range(50):
        left = [p for p in {*marked(marker), *pids} if running(p)]
        if not left:
            return
        for pid in left:
            try:
                os.kill(pid, signal.SIGKILL)
            except OSError:
                pass
        time.sleep(0.02)
