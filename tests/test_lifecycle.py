"""Nothing a run starts outlives it, nothing it makes is left (issue 15, item 3; docs/runner.md,
"Guarantees"): SIGTERM, SIGHUP and SIGINT to `verify attention` and `verify regen` stop both real
engines and remove the run's temporary directory; after a SIGKILL of the runner both engines
notice their parent is gone and exit, and the next run removes the directory the dead one left,
never one of a run still alive. Also hostile ports end to end (hang, detached child, flood, crash):
after each, no process the run started is alive and no directory of it is left.

Each run gets a private TMPDIR, and its processes are found by its runner's pid (tests/processes.py),
never by a machine-wide search."""

import json
import os
import signal
import subprocess
import sys
import textwrap
import time

import pytest

from hostile_kinds import params
from processes import assert_nothing_left, dirs_of, kill_leftovers, running, started_by, wait_until
from test_runner import cases_dir, goldens, session_goldens  # noqa: F401 (fixtures)
from toolkit import catalogue_cases
from verify import lifecycle


@pytest.fixture(scope="module")
def slow_cases(repo_root, tmp_path_factory):
    """A catalogue of the reversal run alone: both engines compute for several seconds."""
    [case] = catalogue_cases(op="train_reversal")
    directory = tmp_path_factory.mktemp("slow_cases")
    (directory / "training.json").write_text(json.dumps({"cases": [case]}))
    return directory


_WITH_DEFAULT_SIGNALS = ("import runpy, signal, sys; signal.signal(signal.SIGINT, signal.default_int_handler); "
                         "signal.signal(signal.SIGHUP, signal.SIG_DFL); signal.signal(signal.SIGTERM, signal.SIG_DFL); "
                         "sys.argv[0] = 'verify'; runpy.run_module('verify', run_name='__main__', alter_sys=True)")


class Run:
    """`verify ...` started in a session of its own, with a private TMPDIR."""

    def __init__(self, repo_root, tmp, *args):
        self.tmp = tmp
        tmp.mkdir(exist_ok=True)
        env = dict(os.environ, TMPDIR=str(tmp))
        env.pop(lifecycle.ENV, None)
        # SIGINT, SIGHUP and SIGTERM at their defaults even when this process inherited them
        # ignored (a job a shell without job control put in the background ignores SIGINT; pytest
        # under nohup ignores SIGHUP): the runner keeps an ignored signal ignored, as a user who
        # started it that way asked, and these tests are about the defaults.
        self.proc = subprocess.Popen([sys.executable, "-c", _WITH_DEFAULT_SIGNALS, *map(str, args)], cwd=repo_root, env=env,
                                     stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                                     start_new_session=True)
        self.pid = self.proc.pid

    def engines(self):
        """The engine processes of this run now alive, by what they run."""
        found = {}
        for pid in started_by(self.pid):
            try:
                cmd = open(f"/proc/{pid}/cmdline", "rb").read().split(b"\0")
            except OSError:
                continue
            if b"reference" in cmd and b"run" in cmd:
                found["reference"] = pid
            elif any(part.endswith(b"cli.ts") for part in cmd):
                found["port"] = pid
        return found

    def runs(self, marker):
        """Whether a process this run started (and still alive) has `marker` in its command line."""
        for pid in started_by(self.pid):
            try:
                if marker in open(f"/proc/{pid}/cmdline", "rb").read():
                    return True
            except OSError:
                pass
        return False

    def finish(self, timeout=60):
        out, err = self.proc.communicate(timeout=timeout)
        return self.proc.returncode, out, err

    def close(self):
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.communicate()
        kill_leftovers(self.pid)


@pytest.fixture
def start(repo_root, tmp_path):
    runs = []

    def make(*args, tmp=None):
        run = Run(repo_root, tmp or tmp_path / "tmp", *args)
        runs.append(run)
        return run
    yield make
    for run in runs:
        run.close()


COMMANDS = {  # --fresh: both real engines run (the reference cache would answer the reference)
    "attention": lambda cases, golden: ["attention", "--cases-dir", cases, "--golden-dir", golden, "--fresh"],
    "regen": lambda cases, golden: ["regen", "attention", "--cases-dir", cases, "--golden-dir", golden],
}


@pytest.mark.parametrize("kind", params("signal"))
def test_a_signal_to_the_runner_stops_both_engines_and_removes_its_directory(start, slow_cases, tmp_path, kind):
    command, sig = kind.data[0], getattr(signal, kind.data[1])
    run = start(*COMMANDS[command](slow_cases, tmp_path / "golden"))
    both = wait_until(lambda: len(run.engines()) == 2, timeout=60)
    assert both, f"the engines did not start: {run.finish()}"
    assert dirs_of(run.pid, run.tmp)
    os.kill(run.pid, sig)
    code, out, err = run.finish(timeout=30)
    assert code == kind.exit == 128 + sig, (code, out, err)
    assert kind.says in err and "Traceback" not in err
    assert_nothing_left(run.pid, run.tmp)
    assert not (tmp_path / "golden").exists()  # a regen stopped before writing wrote nothing


@pytest.mark.parametrize("kind", params("sigkill"))
def test_after_a_sigkill_of_the_runner_the_engines_exit_and_the_next_run_cleans(start, slow_cases, tmp_path, kind):
    run = start(*COMMANDS[kind.data](slow_cases, tmp_path / "golden"))
    engines = wait_until(lambda: run.engines() if len(run.engines()) == 2 else None, timeout=60)
    assert engines, f"the engines did not start: {run.finish()}"
    left = dirs_of(run.pid, run.tmp)
    os.kill(run.pid, signal.SIGKILL)
    assert run.finish()[0] == kind.exit
    # no handler runs on SIGKILL: each engine notices its parent is gone (reference/__main__.py, cli.ts)
    assert wait_until(lambda: not any(running(p) for p in engines.values()), timeout=10), run.engines()
    assert left and all(d.exists() for d in left)  # what only the next run can remove
    after = start("attention", "--cases-dir", slow_cases, "--list")
    code, out, err = after.finish()
    assert code == 0, err
    assert not any(d.exists() for d in left)
    assert_nothing_left(run.pid, run.tmp)


SLEEPY_PORT = textwrap.dedent('''
    import sys, time
    sys.stdin.read()
    time.sleep(float(sys.argv[1]))
''')


@pytest.mark.parametrize("kind", params("concurrent runs"))
def test_the_next_run_never_touches_a_live_runs_directory(start, cases_dir, goldens, tmp_path, kind):  # noqa: F811
    port = tmp_path / "sleepy.py"
    port.write_text(SLEEPY_PORT)
    live = start("attention", "--cases-dir", cases_dir, "--golden-dir", goldens, "--port-cmd",
                 f"{sys.executable} {port} 60", "--timeout", "120")
    def reference_running():
        return live.runs(b"reference\0run")

    # the reference's own TMPDIR goes when it is done; then the run keeps its directories while the port sleeps
    assert wait_until(lambda: dirs_of(live.pid, live.tmp) and not reference_running(), timeout=60), live.finish()
    mine, seen = None, dirs_of(live.pid, live.tmp)
    while mine != seen:  # and the runner has removed that TMPDIR: the same directories twice, 0.5 s apart
        mine, seen = seen, (time.sleep(0.5), dirs_of(live.pid, live.tmp))[1]
    assert mine, live.finish()
    dead = live.tmp / "verify-999999999-1-abcdef"  # a name a dead runner would have made
    dead.mkdir()
    stranger = live.tmp / "verify-keepme"  # not named by a runner: never ours to remove
    stranger.mkdir()
    other = start("attention", "--cases-dir", cases_dir, "--list", tmp=live.tmp)
    assert other.finish()[0] == kind.exit
    assert all(d.exists() for d in mine) and stranger.exists() and not dead.exists()
    os.kill(live.pid, signal.SIGTERM)
    assert live.finish()[0] == 128 + signal.SIGTERM
    assert_nothing_left(live.pid, live.tmp)


HOSTILE_PORT = textwrap.dedent(r'''
    import json, subprocess, sys, time
    mode = sys.argv[1]
    request = json.loads(sys.stdin.read())
    if mode == "hang":
        time.sleep(120)
    elif mode == "detached":
        subprocess.Popen([sys.executable, "-c", "import time; time.sleep(120)"], start_new_session=True)
        for case in request["cases"]:
            print(json.dumps({"id": case["id"], "ok": True, "seconds": 0}), flush=True)
    elif mode == "detached-hang":
        subprocess.Popen([sys.executable, "-c", "import time; time.sleep(120)"], start_new_session=True)
        time.sleep(120)
    elif mode == "flood":
        while True:
            sys.stdout.write("\n" * 65536)
    elif mode == "crash":
        raise RuntimeError("the port fell over")
''')


@pytest.mark.parametrize("kind", params("hostile port"))
def test_after_a_hostile_port_nothing_of_the_run_is_left(start, cases_dir, goldens, tmp_path, kind):  # noqa: F811
    mode, code, fragment = kind.data, kind.exit, kind.says
    port = tmp_path / "hostile_port.py"
    port.write_text(HOSTILE_PORT)
    started = time.monotonic()
    run = start("attention", "--cases-dir", cases_dir, "--golden-dir", goldens, "--port-cmd",
                f"{sys.executable} {port} {mode}", "--timeout", "3")
    got, out, err = run.finish(timeout=60)
    assert got == code and fragment in err, (got, out, err)
    assert len(err.strip().splitlines()) == 1 and "Traceback" not in err
    assert time.monotonic() - started < 30
    assert_nothing_left(run.pid, run.tmp)


def test_a_signal_to_verify_faults_stops_it_before_the_next_fault(start, repo_root, tmp_path):
    """SIGTERM while `verify faults` runs one fault of many: the runner exits at once (143), the
    faults not yet started never start, and nothing of it is left (before, the pool ran every
    remaining fault to its end, with SIGTERM ignored)."""
    harmless = {"op": "layer_norm", "engine": "port", "within": "layerNormJs",
                "find": "H[o + k] = c; // xc for now", "replace": "H[o + k] = c; // x - mean for now",
                "description": "a comment", "area": "forward"}
    catalogue = tmp_path / "faults.json"
    catalogue.write_text(json.dumps({"faults": [dict(harmless, id=f"comment{i}") for i in range(200)]}))
    cases = tmp_path / "cases"
    cases.mkdir()
    few = (catalogue_cases(op="linear") + catalogue_cases(op="embedding"))[:4]  # cheap layers
    (cases / "forward_layers.json").write_text(json.dumps({"cases": few}))
    run = start("faults", "attention", "--catalogue", catalogue, "--cases-dir", cases, "--jobs", "1")
    assert wait_until(lambda: run.runs(b"verify-fault-"), timeout=120), run.finish()
    os.kill(run.pid, signal.SIGTERM)
    code, out, err = run.finish(timeout=30)
    assert code == 128 + signal.SIGTERM, (code, out, err)
    assert "verify: interrupted (SIGTERM)" in err and "Traceback" not in err, err
    assert out.count("MISSED") < 200, out
    assert_nothing_left(run.pid, run.tmp)
