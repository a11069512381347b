"""Nothing a port starts outlives the run, however it detached (issue 30, items 12, 13 and 15;
docs/runner.md, "Guarantees"), and nothing a browser puts in the temporary directory stays.

A scripted port (PORT, through `verify attention --port-cmd`) answers from the committed goldens,
so the run passes, after starting a daemon as a real one would: fork, setsid, fork again, close
every descriptor, exec with an empty environment (no VERIFY_RUN_OWNER token to find it by) and
sleep, or worse (the "port daemon" rows of tests/hostile_kinds.py). The runner is a child subreaper
on Linux (verify/lifecycle.py): every such daemon is reparented to it and killed when the engines
are done. Each process of the test is found by a marker word in its command line or by the pid it
wrote, never by a machine-wide search; the runner gets a fresh TMPDIR, which must be left empty.

Inside another program (pytest calling verify.cli.main), only what the engines left is killed:
the program's own children survive, and it is no subreaper afterwards."""

import ctypes
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import textwrap
import time
import uuid
from pathlib import Path

import pytest

from hostile_kinds import params
from processes import assert_nothing_left, kill_marked, marked, running, started_by, wait_until
from verify import cli, lifecycle

CASE = "masked_softmax.lens_1d"

DAEMON = textwrap.dedent(r'''
    import ctypes, os, signal, sys, time
    marker, pid_file, mode, out_dir, late_file = sys.argv[1:6]
    with open(pid_file, "a") as fh:
        fh.write(f"{os.getpid()}\n")
    if mode == "ignores-signals":
        for name in ("SIGTERM", "SIGHUP", "SIGINT", "SIGQUIT", "SIGUSR1"):
            signal.signal(getattr(signal, name), signal.SIG_IGN)
    elif mode == "forks-every-10ms":
        for _ in range(150):
            if os.fork() == 0:
                time.sleep(120); os._exit(0)
            time.sleep(0.01)
    elif mode == "renames-itself":
        with open("/proc/self/comm", "w") as fh:
            fh.write("kworker/0:1")
    elif mode == "cwd-in-run-dir":
        os.chdir(out_dir)
        held = open("held-open", "w")
    elif mode == "stopped":
        os.kill(os.getpid(), signal.SIGSTOP)
    elif mode == "late-write":
        time.sleep(1.5)
        with open(late_file, "a") as fh:
            fh.write("written after the run\n")
    time.sleep(120)
''')

PORT = textwrap.dedent(r'''
    import ctypes, json, os, shutil, signal, subprocess, sys, time
    mode, marker, pid_file, source, late_file = sys.argv[1:6]
    DAEMON = open(os.path.join(os.path.dirname(os.path.abspath(__file__)), "daemon.py")).read()
    request = json.loads(sys.stdin.read())
    out_dir = request["out_dir"]
    os.makedirs(out_dir, exist_ok=True)
    ids = [c["id"] for c in request["cases"]]
    daemon_mode = mode.split("+")[0]

    def daemonize(before_fork=0.0):
        """Fork, setsid, fork, close every descriptor, exec with an empty environment."""
        pid = os.fork()
        if pid == 0:
            try:
                os.setsid()
                time.sleep(before_fork)
                if os.fork():
                    os._exit(0)
                null = os.open(os.devnull, os.O_RDWR)
                for fd in (0, 1, 2):
                    os.dup2(null, fd)
                os.closerange(3, 1 << 16)
                os.execve(sys.executable, [sys.executable, "-c", DAEMON, marker, pid_file, daemon_mode, out_dir,
                                           late_file], {})
            finally:
                os._exit(1)
        if not before_fork:
            os.waitpid(pid, 0)

    def own_group_child():
        """A child that leaves the port's process group (not its session) and clears its environment."""
        subprocess.Popen([sys.executable, "-c", DAEMON, marker, pid_file, "sleep", out_dir, late_file], env={},
                         preexec_fn=lambda: os.setpgid(0, 0), stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)

    def wait_for_daemon(count=1):
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline:
            if os.path.exists(pid_file) and len(open(pid_file).read().split()) >= count:
                return
            time.sleep(0.01)
        sys.exit("the daemon did not start")

    def passes():
        for i in ids:
            shutil.copy(os.path.join(source, i + ".json"), os.path.join(out_dir, i + ".json"))
            print(json.dumps({"id": i, "ok": True, "seconds": 0}), flush=True)

    if daemon_mode == "subreaper-port":  # its orphans come to the port first, then to the runner
        ctypes.CDLL(None).prctl(36, 1, 0, 0, 0)
    if daemon_mode == "own-group":
        own_group_child()
    elif daemon_mode == "born-late":
        daemonize(before_fork=1.0)  # the port is gone before its daemon is born
    elif daemon_mode == "two-daemons":
        daemonize(); daemonize()
    else:
        daemonize()
    if daemon_mode != "born-late":
        wait_for_daemon(2 if daemon_mode == "two-daemons" else 1)
    if mode.endswith("+crash"):
        raise RuntimeError("the port fell over after starting its daemon")
    if mode.endswith("+hang"):
        time.sleep(120)
    passes()
''')

_DEFAULTS = ("import runpy, signal, sys; signal.signal(signal.SIGINT, signal.default_int_handler); "
             "[signal.signal(s, signal.SIG_DFL) for s in (signal.SIGHUP, signal.SIGTERM)]; "
             "sys.argv[0] = 'verify'; runpy.run_module('verify', run_name='__main__', alter_sys=True)")


class Scripted:
    """The scripted port of one test: its command, its marker, the pids its daemons wrote."""

    def __init__(self, repo_root, tmp_path):
        self.marker = f"daemon-marker-{uuid.uuid4().hex}"
        self.dir = tmp_path / "port"
        self.dir.mkdir()
        (self.dir / "port.py").write_text(PORT)
        (self.dir / "daemon.py").write_text(DAEMON)
        self.pid_file = self.dir / "daemon.pids"
        self.late_file = self.dir / "terminal"
        self.source = repo_root / "golden" / "attention" / "port"

    def command(self, mode):
        return (f"{sys.executable} {self.dir / 'port.py'} {mode} {self.marker} {self.pid_file} {self.source} "
                f"{self.late_file}")

    def pids(self):
        return [int(p) for p in self.pid_file.read_text().split()] if self.pid_file.exists() else []

    def left(self):
        """What of the port is still running: its daemons (by pid) and anything holding the marker."""
        return sorted({*(p for p in self.pids() if running(p)), *marked(self.marker)})

    def kill(self):
        kill_marked(self.marker, self.pids())


@pytest.fixture
def scripted(repo_root, tmp_path):
    port = Scripted(repo_root, tmp_path)
    yield port
    port.kill()


def _runner(repo_root, tmp, *args):
    """`verify ...` in a session of its own, with TMPDIR=tmp and SIGINT, SIGHUP and SIGTERM at their
    defaults (whatever this process inherited)."""
    env = dict(os.environ, TMPDIR=str(tmp))
    env.pop(lifecycle.ENV, None)
    return subprocess.Popen([sys.executable, "-c", _DEFAULTS, *map(str, args)], cwd=repo_root, env=env, text=True,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, start_new_session=True)


def _finished(proc, kind, timeout):
    """The runner's (stdout, stderr) once it ends (killed if it outlives timeout), its exit code
    and message being the row's."""
    try:
        out, err = proc.communicate(timeout=timeout)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
    assert proc.returncode == kind.exit, out + err
    assert kind.says in (err if kind.exit else out), out + err
    return out, err


@pytest.mark.parametrize("kind", params("port daemon"))
def test_nothing_a_port_started_outlives_the_run_however_it_detached(kind, scripted, repo_root, tmp_path):
    mode, action = kind.data
    tmp = tmp_path / "tmp"
    tmp.mkdir()
    proc = _runner(repo_root, tmp, "attention", "--case", CASE, "--port-cmd", scripted.command(mode), "--timeout", "10")
    try:
        if action is not None:
            assert wait_until(scripted.pids, timeout=60), "the daemon did not start"
            os.kill(proc.pid, getattr(signal, action))
    except BaseException:
        proc.kill()
        proc.communicate()
        raise
    out, err = _finished(proc, kind, timeout=120)
    assert "Traceback" not in err
    if mode != "born-late":
        assert scripted.pids(), "the daemon never started: the row tries nothing"
    left = wait_until(lambda: not scripted.left(), timeout=10) or scripted.left()
    assert left is True, f"still running after the run: {left}"
    if mode in ("born-late", "late-write"):
        time.sleep(2.0)  # long enough for the daemon to be born, or to write
        assert not scripted.left(), scripted.left()
        assert not scripted.late_file.exists(), "the daemon wrote after the run"
    assert_nothing_left(proc.pid, tmp)
    assert sorted(os.listdir(tmp)) == [], "left in the temporary directory"


def _subreaper():
    """Whether this process is a child subreaper (prctl PR_GET_CHILD_SUBREAPER, 37)."""
    value = ctypes.c_int(-1)
    assert ctypes.CDLL(None, use_errno=True).prctl(37, ctypes.byref(value), 0, 0, 0) == 0
    return value.value


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="the subreaper is Linux's (prctl); docs/runner.md")
def test_inside_pytest_the_daemon_dies_and_pytests_own_children_live(scripted, capsys, tmp_path, monkeypatch):
    """verify.cli.main in this process: the daemon the port left is killed and reaped (no zombie of
    it is left to this process), a child this process started itself before the run is untouched,
    and this process is no subreaper afterwards."""
    monkeypatch.setenv("TMPDIR", str(tmp_path / "tmp"))
    (tmp_path / "tmp").mkdir()
    before = _subreaper()
    own = subprocess.Popen(["sleep", "60"])
    try:
        code = cli.main(["attention", "--case", CASE, "--port-cmd", scripted.command("env-i")])
        out, err = capsys.readouterr()
        assert code == 0, out + err
        daemons = scripted.pids()
        assert daemons, "the daemon never started"
        assert not scripted.left(), f"still running after the run: {scripted.left()}"
        assert not any(os.path.exists(f"/proc/{p}") for p in daemons), "a killed daemon was left unreaped"
        assert own.poll() is None, "the run killed a child of this process it did not start"
        assert _subreaper() == before
        assert os.listdir(tmp_path / "tmp") == []
    finally:
        own.kill()
        own.wait()


# --- item 13: the browser's temporary files ------------------------------------------------------

def _chromium_installed(node, repo_root):
    proc = subprocess.run([str(node), "port_ts/browser/engine.ts", "--browser", "chromium", "run"], cwd=repo_root,
                          input=json.dumps({"out_dir": "/nonexistent-unused", "cases": []}), capture_output=True, text=True,
                          timeout=120)
    return proc.returncode == 0, proc.stderr.strip()


@pytest.mark.parametrize("kind", params("browser temporary files"))
def test_a_browser_run_leaves_nothing_in_the_temporary_directory(kind, node, repo_root, tmp_path, request):
    if not (repo_root / "port_ts" / "node_modules" / "puppeteer-core").is_dir():
        pytest.skip("port_ts/node_modules is missing: `cd port_ts && npm ci` (tests/test_browsers.py does it)")
    ok, why = _chromium_installed(node, repo_root)
    if not ok:
        if os.environ.get("REQUIRE_BROWSERS") == "1":
            pytest.fail(f"REQUIRE_BROWSERS=1 and {why}")
        pytest.skip(why)
    action, where = kind.data
    if where == "long":  # Chromium's singleton socket in it would pass the 108 bytes of a socket path
        tmp = tmp_path / ("long-" + "x" * 60)
        tmp.mkdir()
    else:
        tmp = Path(tempfile.mkdtemp(prefix="vt-", dir="/tmp"))
        request.addfinalizer(lambda: shutil.rmtree(tmp, ignore_errors=True))
    # a signal needs a browser stage that lasts: the eleven gradient checks take seconds in Chromium
    proc = _runner(repo_root, tmp, "attention", "--case", CASE if action is None else "gradcheck.*", "--browser", "chromium")
    try:
        if action is not None:
            def browser_up():
                for pid in started_by(proc.pid):
                    try:
                        if open(f"/proc/{pid}/comm").read().startswith("chromium"):
                            return True
                    except OSError:
                        pass
                return False
            assert wait_until(browser_up, timeout=120), "chromium did not start"
            made = lambda: any(tmp.glob("**/org.chromium.Chromium.*"))  # noqa: E731
            assert wait_until(made, timeout=60), f"chromium made no temporary files in {tmp}"
            os.kill(proc.pid, getattr(signal, action))
    except BaseException:
        proc.kill()
        proc.communicate()
        raise
    _finished(proc, kind, timeout=600)
    assert_nothing_left(proc.pid, tmp)
    assert wait_until(lambda: os.listdir(tmp) == [], timeout=10), f"left in the temporary directory: {sorted(os.listdir(tmp))}"


# --- item 15: a browser that cannot start says why --------------------------------------------------

DYING_BROWSER = """#!/bin/sh
echo "[1:1:ERROR:crashpad_client.cc(1)] open /sys/devices/system/cpu/cpu0/cpufreq/scaling_cur_freq: No such file" >&2
echo "[1:1:FATAL:process_singleton_posix.cc(315)] Socket path too long: (a scripted browser)" >&2
echo "[1:1:ERROR:zygote_linux.cc(662)] write: Broken pipe (32)" >&2
exit 1
"""


def test_a_browser_that_dies_at_start_says_why_in_the_engines_one_line(node, repo_root, tmp_path):
    """The engine's line names the browser's own FATAL line, not only "Failed to launch the
    browser process: Code: 1" (puppeteer's first line), so a failure under load says what failed."""
    if not (repo_root / "port_ts" / "node_modules" / "puppeteer-core").is_dir():
        pytest.skip("port_ts/node_modules is missing: `cd port_ts && npm ci` (tests/test_browsers.py does it)")
    browser = tmp_path / "chromium"
    browser.write_text(DYING_BROWSER)
    browser.chmod(0o755)
    spec = {"id": CASE, "kind": "forward", "op": "masked_softmax", "seed": 1, "config": {}}
    proc = subprocess.run([str(node), "port_ts/browser/engine.ts", "--browser", "chromium", "run"], cwd=repo_root,
                          input=json.dumps({"out_dir": str(tmp_path / "out"), "cases": [spec]}), capture_output=True,
                          text=True, timeout=120, env=dict(os.environ, BROWSER_CHROMIUM=str(browser), TMPDIR=str(tmp_path)))
    assert proc.returncode == 2, proc.stderr
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in proc.stderr, proc.stderr
    assert "chromium did not start" in lines[0], lines[0]
    assert "Socket path too long: (a scripted browser)" in lines[0], lines[0]
