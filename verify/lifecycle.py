"""Nothing the runner starts outlives it; what a dead run left is cleaned by the next one
(docs/runner.md, "Guarantees").

- Every engine process gets VERIFY_RUN_OWNER=<runner pid>-<its start time> in its environment,
  which its children inherit, also those that leave the engine's process group (setsid). The
  runner kills its engines' process groups, and every process carrying its token, on every way
  out: normal exit, an engine error, Ctrl-C, SIGTERM, SIGHUP (signal handlers), atexit.
- A SIGKILLed runner can do nothing: both engines watch their parent and exit when it is gone
  (reference/__main__.py, port_ts/src/cli.ts); the next run kills what still carries the token
  of a dead runner.
- Temporary directories are named <prefix><runner pid>-<start time>-<random> (temp_dir()). The
  next run removes those whose owner is dead; a live run's directories are never touched (the
  start time tells a reused pid apart).

Linux reads /proc for start times and environments; elsewhere the token is the pid alone and
only the process groups are killed.
"""

import atexit
import os
import re
import shutil
import signal
import tempfile
import threading
from contextlib import contextmanager
from pathlib import Path

ENV = "VERIFY_RUN_OWNER"
RUN_ENV = "VERIFY_ENGINE_RUN"
_DIR_NAME = re.compile(r"^verify-(?:[a-z]+-)?(\d+)-(\d+)-[A-Za-z0-9_]+$")

_lock = threading.RLock()
_groups = {}  # pid of a process started in its own session -> the Popen
_dirs = set()  # temporary directories this process made and has not removed yet
_installed_atexit = False


class Terminated(KeyboardInterrupt):
    """SIGTERM or SIGHUP, raised in the main thread as Ctrl-C is, so every `except
    KeyboardInterrupt` that stops the engines stops them for these too."""

    def __init__(self, signum):
        super().__init__(signum)
        self.signum = signum


# --- who is alive ---------------------------------------------------------------------------

def start_ticks(pid):
    """The process's start time (clock ticks since boot, /proc/<pid>/stat field 22), 0 where /proc
    is not available, None when there is no such process."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as fh:
            stat = fh.read()
    except FileNotFoundError:
        return None
    except OSError:
        return 0 if not os.path.isdir("/proc/self") else None
    try:
        return int(stat[stat.rindex(b")") + 2:].split()[19])
    except (ValueError, IndexError):
        return None


_own = {}  # os.getpid() -> its token (computed once per process)


def token(pid=None):
    """"<pid>-<start ticks>": a name for a process that a reused pid does not share."""
    if pid is None:
        pid = os.getpid()
        if pid not in _own:
            _own[pid] = f"{pid}-{start_ticks(pid) or 0}"
        return _own[pid]
    return f"{pid}-{start_ticks(pid) or 0}"


def alive(owner):
    """Whether the runner named by a token ("<pid>-<ticks>") is still running."""
    try:
        pid, ticks = (int(p) for p in owner.split("-"))
    except ValueError:
        return False
    if pid == os.getpid():
        return True
    now = start_ticks(pid)
    if now is None:
        return False
    if now == 0 or ticks == 0:  # no /proc: the pid alone
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return False
        except PermissionError:
            return True
        return True
    return now == ticks


_runs = iter(range(1, 1 << 62))


def engine_env():
    """(the environment an engine runs in, its run tag): ours, with our token in ENV and a tag
    of this one engine process in RUN_ENV (so its escaped children can be told from those of
    other engines of the same runner, e.g. another fault of `verify faults --jobs N`)."""
    mine = token()
    tag = f"{mine}.{next(_runs)}"
    return dict(os.environ, **{ENV: mine, RUN_ENV: tag}), tag


def carriers(owner=None, tag=None):
    """{pid: token} of the processes whose environment carries the token `owner` (ours by
    default; any token when owner is the empty string), or, given `tag`, that engine run's tag.
    This process is left out."""
    found = {}
    try:
        entries = os.listdir("/proc")
    except OSError:
        return found
    needle = f"{ENV}=".encode()
    tag_needle = f"{RUN_ENV}=".encode()
    me = os.getpid()
    wanted = "" if owner == "" else (owner or token())
    for entry in entries:
        if not entry.isdigit() or int(entry) == me:
            continue
        try:
            with open(f"/proc/{entry}/environ", "rb") as fh:
                environ = fh.read()
        except OSError:
            continue
        if needle not in environ:
            continue
        values = {}
        for item in environ.split(b"\0"):
            for name, prefix in ((ENV, needle), (RUN_ENV, tag_needle)):
                if item.startswith(prefix):
                    values[name] = item[len(prefix):].decode("ascii", "replace")
        value = values.get(ENV)
        if value is None:
            continue
        if tag is not None:
            if values.get(RUN_ENV) == tag:
                found[int(entry)] = value
        elif wanted == "" or value == wanted:
            found[int(entry)] = value
    return found


# --- killing ----------------------------------------------------------------------------------

def register(proc):
    """An engine process started in its own session (its pid is its process group)."""
    with _lock:
        _groups[proc.pid] = proc


def unregister(proc):
    with _lock:
        _groups.pop(proc.pid, None)


def kill_group(pid):
    if os.name != "posix":
        return
    try:
        os.killpg(pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass


def kill_carriers(owner=None, tag=None):
    """SIGKILL every process carrying the token (ours by default) or the engine run's tag;
    returns their pids."""
    pids = carriers(owner, tag)
    for pid in pids:
        try:
            os.kill(pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass
    return sorted(pids)


def kill_groups():
    """Every engine process group this runner started and that still runs."""
    with _lock:
        procs = list(_groups.values())
    for proc in procs:
        if os.name == "posix":
            kill_group(proc.pid)
        else:
            try:
                proc.kill()
            except OSError:
                pass


def kill_all():
    """Every engine process group this runner started, and every process carrying its token."""
    kill_groups()
    kill_carriers()


# --- temporary directories --------------------------------------------------------------------

@contextmanager
def temp_dir(prefix="verify-"):
    """A private temporary directory named after this runner (module docstring), removed on the
    way out, after this runner's engines are stopped when the way out is an exception."""
    path = Path(tempfile.mkdtemp(prefix=f"{prefix}{token()}-"))
    with _lock:
        _dirs.add(path)
    try:
        yield str(path)
    except BaseException:
        kill_all()  # nothing may still write into it
        raise
    finally:
        _remove(path)


def _remove(path):
    shutil.rmtree(path, ignore_errors=True)
    if path.exists():  # a file appeared while it was removed: once more
        shutil.rmtree(path, ignore_errors=True)
    if not path.exists():
        with _lock:
            _dirs.discard(path)


def owner_of(name):
    """The owner token in a temporary directory's name, or None for a name not made here."""
    m = _DIR_NAME.match(name)
    return f"{m.group(1)}-{m.group(2)}" if m else None


def reap(tmp=None):
    """Remove what dead runs left: temporary directories whose owner is dead, and processes that
    carry a dead runner's token. Returns (directories removed, pids killed)."""
    tmp = Path(tmp or tempfile.gettempdir())
    removed = []
    try:
        entries = list(tmp.iterdir())
    except OSError:
        entries = []
    for entry in entries:
        owner = owner_of(entry.name)
        if owner is None or alive(owner):
            continue
        try:
            if entry.is_symlink() or not entry.is_dir():
                continue
        except OSError:
            continue
        shutil.rmtree(entry, ignore_errors=True)
        removed.append(entry)
    killed = []
    for pid, owner in carriers("").items():
        if not alive(owner):
            try:
                os.kill(pid, signal.SIGKILL)
                killed.append(pid)
            except (ProcessLookupError, PermissionError):
                pass
    return removed, killed


# --- the way out --------------------------------------------------------------------------------

def cleanup():
    """Every way out: stop what this runner started, remove its temporary directories."""
    kill_all()
    with _lock:
        dirs = list(_dirs)
    for path in dirs:
        _remove(path)


def _on_signal(signum, frame):
    for name in ("SIGTERM", "SIGHUP", "SIGINT"):
        sig = getattr(signal, name, None)
        if sig is not None:
            signal.signal(sig, signal.SIG_IGN)  # once: the clean-up is not interrupted again
    kill_all()
    raise Terminated(signum)


def _register_atexit():
    global _installed_atexit
    _installed_atexit = True
    atexit.register(cleanup)


@contextmanager
def guard():
    """One command of the runner: the signal handlers for its duration (the previous ones back
    afterwards), what dead runs left removed first, and everything it started stopped and its
    temporary directories removed on the way out, however it goes."""
    previous = {}
    if threading.current_thread() is threading.main_thread():
        previous[signal.SIGINT] = signal.getsignal(signal.SIGINT)  # _on_signal ignores it during the clean-up
        for name in ("SIGTERM", "SIGHUP"):
            sig = getattr(signal, name, None)
            if sig is not None and signal.getsignal(sig) in (signal.SIG_DFL, None):  # not under nohup
                previous[sig] = signal.signal(sig, _on_signal)
    if not _installed_atexit:
        _register_atexit()
    try:
        reap()
        yield
    finally:
        cleanup()
        for sig, handler in previous.items():
            signal.signal(sig, handler if handler is not None else signal.SIG_DFL)
