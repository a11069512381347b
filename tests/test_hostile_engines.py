"""Hostile engines, one process each (verify/engines.py): a port that detaches a child which keeps
stdout open (hanging, or exiting 0), floods stdout or stderr, prints an over-long line or blank
lines, crashes in Node or Python. Each must end within its bound with one line that says what
happened (an InputError, exit 2 on the command line), and after each no process that the run
started is alive (tests/processes.py)."""

import json
import os
import sys
import textwrap
import time

import pytest

from processes import assert_nothing_left, running, wait_until
from verify import engines
from verify.errors import InputError

HOSTILE = textwrap.dedent(r'''
    import json, os, subprocess, sys, time
    mode, pid_file = sys.argv[1], sys.argv[2]
    request = json.loads(sys.stdin.read())
    ids = [c["id"] for c in request["cases"]]

    def status(i):
        sys.stdout.write(json.dumps({"id": i, "ok": True, "seconds": 0}) + "\n")
        sys.stdout.flush()

    def detach():  # a child in a session of its own, holding our stdout and stderr
        child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(120)"], start_new_session=True)
        with open(pid_file, "w") as fh:
            fh.write(str(child.pid))

    if mode == "detached-hang":
        detach(); time.sleep(120)
    elif mode == "detached-exit":
        detach(); [status(i) for i in ids]
    elif mode == "grandchild-hang":  # a child in our own group, and we hang
        child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(120)"])
        open(pid_file, "w").write(str(child.pid)); time.sleep(120)
    elif mode == "blank-flood":
        block = b"\n" * (1 << 20)
        for _ in range(16):
            sys.stdout.buffer.write(block)
        sys.stdout.flush()
    elif mode == "long-line":
        sys.stdout.buffer.write(b"x" * (2 << 20)); sys.stdout.flush(); time.sleep(120)
    elif mode == "stderr-flood":
        block = b"noise " * (1 << 16) + b"\n"
        for _ in range(170):  # about 64 MiB
            sys.stderr.buffer.write(block)
        sys.stderr.write("the last line\n"); sys.stderr.flush()
        [status(i) for i in ids]
    elif mode == "close-stdout-then-hang":
        [status(i) for i in ids]; os.close(1); time.sleep(120)
    elif mode == "python-crash":
        [status(i) for i in ids]
        raise ValueError("the kernel table is empty")
    elif mode == "killed":
        os.kill(os.getpid(), 9)
''')

NODE_CRASH = textwrap.dedent('''
    import { readFileSync } from "node:fs";
    readFileSync(0, "utf8");
    function deep(n) { if (n === 0) throw new Error("out of cheese: the softmax table is empty"); return deep(n - 1); }
    deep(12);
''')

def gone(pid):
    """The process has ended (or ends within a few seconds: a SIGKILL takes a moment)."""
    return pid is not None and wait_until(lambda: not running(pid), timeout=5)


SPECS = [{"id": "masked_softmax.a", "kind": "forward", "op": "masked_softmax", "seed": 1, "config": {}},
         {"id": "masked_softmax.b", "kind": "forward", "op": "masked_softmax", "seed": 2, "config": {}}]


@pytest.fixture
def hostile(tmp_path):
    script = tmp_path / "hostile_engine.py"
    script.write_text(HOSTILE)
    pid_file = tmp_path / "child.pid"

    def make(mode):
        return engines.Engine("port", [sys.executable, str(script), mode, str(pid_file)], tmp_path)
    make.child = lambda: int(pid_file.read_text()) if pid_file.exists() else None
    yield make
    assert_nothing_left(os.getpid(), tmp_path)


def _run(engine, tmp_path, timeout=60.0):
    started = time.monotonic()
    with pytest.raises(InputError) as caught:
        engines.run(engine, SPECS, tmp_path / "out", timeout)
    message = str(caught.value)
    assert "\n" not in message and "\x1b" not in message
    return message, time.monotonic() - started


def test_a_detached_child_holding_stdout_does_not_hang_past_the_timeout(hostile, tmp_path):
    message, took = _run(hostile("detached-hang"), tmp_path, timeout=3)
    assert "did not finish within 3 s" in message and "--timeout" in message
    assert took < 10, took
    assert gone(hostile.child())  # killed, though it left the engine's process group


def test_a_detached_child_holding_stdout_after_the_port_exits_0_is_stopped(hostile, tmp_path):
    message, took = _run(hostile("detached-exit"), tmp_path)
    assert "exited with code 0 but something it started still held its stdout" in message
    assert took < engines.EXIT_GRACE + 8, took
    assert gone(hostile.child())


def test_a_child_in_the_engines_group_is_killed_with_it(hostile, tmp_path):
    message, _ = _run(hostile("grandchild-hang"), tmp_path, timeout=2)
    assert "did not finish within 2 s" in message
    assert gone(hostile.child())


def test_an_engine_that_closes_stdout_and_keeps_running_is_stopped_by_the_timeout(hostile, tmp_path):
    message, took = _run(hostile("close-stdout-then-hang"), tmp_path, timeout=2)
    assert "did not finish within 2 s" in message and took < 8


def test_16_mib_of_blank_lines_is_refused_at_the_first(hostile, tmp_path):
    message, took = _run(hostile("blank-flood"), tmp_path)
    assert "printed an empty line on stdout line 1" in message
    assert took < 10, took


def test_an_over_long_line_is_refused_before_it_ends(hostile, tmp_path):
    message, took = _run(hostile("long-line"), tmp_path)
    assert f"a line longer than {engines.MAX_LINE} bytes on stdout line 1" in message
    assert took < 10, took


def test_a_stderr_flood_is_kept_to_a_bounded_tail_and_passes(hostile, tmp_path):
    run = engines.run(hostile("stderr-flood"), SPECS, tmp_path / "out", 60)
    assert set(run.statuses) == {s["id"] for s in SPECS}
    assert len(run.stderr.encode()) <= engines.STDERR_TAIL
    assert run.stderr.rstrip().endswith("the last line")


def test_a_python_crash_keeps_the_line_that_says_what_went_wrong(hostile, tmp_path):
    message, _ = _run(hostile("python-crash"), tmp_path)
    assert "exited with code 1" in message and "ValueError: the kernel table is empty" in message


def test_an_engine_killed_by_a_signal_says_so(hostile, tmp_path):
    message, _ = _run(hostile("killed"), tmp_path)
    assert "was killed by signal 9" in message


def test_a_node_crash_keeps_the_error_line_not_only_the_last_stack_frames(node, tmp_path):
    script = tmp_path / "crash.mjs"
    script.write_text(NODE_CRASH)
    message, _ = _run(engines.Engine("port", [str(node), str(script)], tmp_path), tmp_path)
    assert "exited with code 1" in message
    assert "Error: out of cheese: the softmax table is empty" in message
    assert "at deep" in message  # and the frame where it was thrown
    assert_nothing_left(os.getpid(), tmp_path)


def test_the_status_reader_bounds_the_bytes_and_refuses_at_once():
    reader = engines.StatusReader("port", ["a"], max_bytes=1000)
    line = (json.dumps({"id": "a", "ok": True}) + "\n").encode()
    with pytest.raises(engines.ProtocolError, match="more than 1000 bytes on stdout"):
        for _ in range(100):
            reader.feed(line)
    assert reader.statuses == {"a": {"id": "a", "ok": True}}  # what came before the limit was read
    for bad, fragment in [(b"\n", "an empty line"), (b"  \n", "an empty line"), (b"{}\n", "not a status line"),
                          (b'{"id": "a", "ok": "yes"}\n', "not a status line"), (b"\xff\xfe\n", "not UTF-8"),
                          (b'{"id": "a", "ok": true, "seconds": NaN}\n', "not a status line"),
                          (b"[" * 100000 + b"\n", "not a status line"), (b'{"id": "zz", "ok": true}\n', "not sent")]:
        with pytest.raises(engines.ProtocolError, match=fragment):
            engines.StatusReader("port", ["a"]).feed(bad)


def test_an_empty_port_command_is_a_usage_error_not_the_built_in_port(repo_root):
    for command in ("", "   "):
        with pytest.raises(InputError, match="--port-cmd is empty"):
            engines.port_engine(repo_root, command)
    assert engines.port_engine(repo_root, None).argv[1] == "port_ts/src/cli.ts"
