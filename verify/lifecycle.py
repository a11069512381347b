"""Nothing the runner starts outlives it; what a dead run left is cleaned by the next one
(docs/runner.md, "Guarantees").

- Every engine runs in a process group of its own with VERIFY_RUN_OWNER=<runner pid>-<start time>
  in its environment; on every way out (exit, error, Ctrl-C, SIGTERM, SIGHUP, atexit) the runner
  kills those groups and every process carrying its token. A SIGKILLed runner's engines exit when
  their parent is gone, and the next run kills what still carries a dead runner's token.
- On Linux a command of the runner (guard()) is a child subreaper: a descendant that detached and
  cleared its environment is reparented to the runner, which kills it, with its subtree, once no
  engine runs. Only children it neither had when guard() began nor started itself are killed, so
  a runner inside another program (pytest) never touches that program's children.
- Temporary directories are named <prefix><token>-<random>; the next run removes those whose
  owner is dead (the start time tells a reused pid apart).
"""

import atexit
import ctypes
import os
import re
import shutil
import signal
import sys
import tempfile
import threading
import time
from contextlib import contextmanager
from pathlib import Path

ENV = "VERIFY_RUN_OWNER"
RUN_ENV = "VERIFY_ENGINE_RUN"
ADOPTED_GRACE = 5.0  # seconds kill_adopted() keeps killing a subtree that keeps forking
PR_SET_CHILD_SUBREAPER, PR_GET_CHILD_SUBREAPER = 36, 37
_DIR_NAME = re.compile(r"^verify-(?:[a-z]+-)?(\d+)-(\d+)-[A-Za-z0-9_]+$")

_lock = threading.RLock()
_groups = {}  # pid of an engine started in its own session -> its Popen
_dirs = set()  # temporary directories this process made and has not removed yet
_runs = iter(range(1, 1 << 62))
_adopting = None  # while guard() made this process a subreaper: {"before": bool, "mine": {pid: start ticks}}
_depth = 0  # nested guard()s
_atexit = False  # whether cleanup() is registered with atexit
_stopping = None  # the signal number stopping the runner, from its handler until guard() ends
_engines_running = 0  # engine runs between started() and ended()


class Terminated(KeyboardInterrupt):
    """SIGTERM or SIGHUP, raised as Ctrl-C is, so every `except KeyboardInterrupt` handles them."""

    def __init__(self, signum):
        super().__init__(signum)
        self.signum = signum


# --- who is alive ---------------------------------------------------------------------------

def _stat_fields(pid):
    """/proc/<pid>/stat's fields after the command name (field 3 on); OSError or ValueError."""
    with open(f"/proc/{pid}/stat", "rb") as fh:
        data = fh.read()
    return data[data.rindex(b")") + 2:].split()


def start_ticks(pid):
    """The process's start time (clock ticks since boot), 0 where /proc is not available, None when
    there is no such process."""
    try:
        return int(_stat_fields(pid)[19])
    except FileNotFoundError:
        return None
    except OSError:
        return 0 if not os.path.isdir("/proc/self") else None
    except (ValueError, IndexError):
        return None


def token(pid=None):
    """"<pid>-<start ticks>" (this process by default): a name a reused pid does not share."""
    pid = os.getpid() if pid is None else pid
    return f"{pid}-{start_ticks(pid) or 0}"


def alive(owner):
    """Whether the runner named by a token is still running."""
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
            pass
        return True
    return now == ticks


def engine_env():
    """(the environment an engine runs in, its run tag): ours, with our token in ENV and a tag of
    this one engine process in RUN_ENV (its escaped children told from other engines')."""
    mine = token()
    tag = f"{mine}.{next(_runs)}"
    return dict(os.environ, **{ENV: mine, RUN_ENV: tag}), tag


def carriers(owner=None, tag=None):
    """{pid: token} of the other processes whose environment carries the token `owner` (ours by
    default; any token when owner is ""), or, given `tag`, that engine run's tag."""
    found = {}
    wanted = "" if owner == "" else (owner or token())
    for pid in _pids():
        try:
            with open(f"/proc/{pid}/environ", "rb") as fh:
                environ = fh.read()
        except OSError:
            continue
        if f"{ENV}=".encode() not in environ:
            continue
        values = dict(item.decode("ascii", "replace").split("=", 1) for item in environ.split(b"\0")
                      if item.startswith((f"{ENV}=".encode(), f"{RUN_ENV}=".encode())))
        value = values.get(ENV)
        if value is not None and pid != os.getpid() and (
                values.get(RUN_ENV) == tag if tag is not None else wanted in ("", value)):
            found[pid] = value
    return found


# --- killing ----------------------------------------------------------------------------------

def _kill(pid, group=False):
    try:
        (os.killpg if group else os.kill)(pid, signal.SIGKILL)
        return True
    except (ProcessLookupError, PermissionError):
        return False


def register(proc):
    """An engine process started in its own session (its pid is its process group). Once a signal
    is stopping the runner, a process a worker thread starts is killed at once and the thread
    stopped too (Terminated), so no new work outlives the signal."""
    with _lock:
        _groups[proc.pid] = proc
        if _adopting is not None:
            _adopting["mine"][proc.pid] = start_ticks(proc.pid)
    if _stopping is not None:
        kill_group(proc.pid)
        raise Terminated(_stopping)


def unregister(proc):
    with _lock:
        _groups.pop(proc.pid, None)


def kill_group(pid):
    if os.name == "posix":
        _kill(pid, group=True)


def kill_carriers(owner=None, tag=None):
    """SIGKILL every process carrying the token (ours by default) or the engine run's tag; returns
    their pids."""
    pids = carriers(owner, tag)
    for pid in pids:
        _kill(pid)
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
    """Every engine group, every process carrying our token, every process adopted as subreaper."""
    kill_groups()
    kill_carriers()
    kill_adopted()


# --- the subreaper: what detached however it could ----------------------------------------------

def _prctl(option, arg):
    """prctl(option, arg) on Linux: its result, or None where there is no prctl."""
    if not sys.platform.startswith("linux"):
        return None
    try:
        return ctypes.CDLL(None, use_errno=True).prctl(option, arg, 0, 0, 0)
    except (OSError, AttributeError):
        return None


def _pids():
    try:
        return [int(e) for e in os.listdir("/proc") if e.isdigit()]
    except OSError:
        return []


def _table():
    """{pid: (parent pid, state)} of every process, from /proc (empty without it)."""
    found = {}
    for pid in _pids():
        try:
            fields = _stat_fields(pid)
            found[pid] = (int(fields[1]), fields[0][:1])
        except (OSError, ValueError, IndexError):
            continue
    return found


def kill_adopted():
    """SIGKILL every process this runner adopted as a subreaper (a child it neither had when
    guard() began nor started as an engine), with its whole subtree, and reap them; one that forks
    as it is killed is adopted in turn, looked at again for up to ADOPTED_GRACE seconds. Returns
    the pids killed."""
    with _lock:
        if _adopting is None:
            return []
        me, mine, killed = os.getpid(), _adopting["mine"], set()
        deadline = time.monotonic() + ADOPTED_GRACE
        while True:
            table = _table()
            theirs = [pid for pid, (ppid, _) in table.items()
                      if ppid == me and mine.get(pid, -1) != start_ticks(pid)]
            if not theirs:
                break
            subtree, todo = set(), list(theirs)
            while todo:
                pid = todo.pop()
                if pid not in subtree and pid != me:
                    subtree.add(pid)
                    todo.extend(child for child, (ppid, _) in table.items() if ppid == pid)
            for pid in subtree:
                if table.get(pid, (0, b"Z"))[1] != b"Z" and _kill(pid):  # not a zombie
                    killed.add(pid)
            for pid in theirs:  # ours to reap: they were adopted, nobody else waits for them
                try:
                    os.waitpid(pid, os.WNOHANG)
                except ChildProcessError:
                    pass
            if time.monotonic() > deadline:
                break
            time.sleep(0.01)
        return sorted(killed)


def started():
    """An engine run begins (engines.run, before its process starts)."""
    global _engines_running
    with _lock:
        _engines_running += 1


def ended():
    """An engine run is over: once none runs, what the engines left detached is killed."""
    global _engines_running
    with _lock:
        _engines_running -= 1
        if _engines_running == 0:
            kill_adopted()


# --- temporary directories --------------------------------------------------------------------

def engine_tmp(prefix="verify-tmp-"):
    """A fresh temporary directory named after this runner (an engine's TMPDIR): removed by
    remove_dir(), by cleanup() on every way out, or by the next run if this one was killed."""
    path = Path(tempfile.mkdtemp(prefix=f"{prefix}{token()}-"))
    with _lock:
        _dirs.add(path)
    return path


@contextmanager
def temp_dir(prefix="verify-"):
    """A private temporary directory named after this runner, removed on the way out, after this
    runner's engines are stopped when the way out is an exception."""
    path = engine_tmp(prefix)
    try:
        yield str(path)
    except BaseException:
        kill_all()  # nothing may still write into it
        raise
    finally:
        remove_dir(path)


def remove_dir(path):
    path = Path(path)
    for _ in range(2):  # once more if a file appeared while it was removed
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
        if owner is None or alive(owner) or entry.is_symlink() or not entry.is_dir():
            continue
        shutil.rmtree(entry, ignore_errors=True)
        removed.append(entry)
    killed = [pid for pid, owner in carriers("").items() if not alive(owner) and _kill(pid)]
    return removed, killed


# --- the way out --------------------------------------------------------------------------------

def cleanup():
    """Every way out: stop what this runner started (and adopted), remove its temporary directories."""
    kill_all()
    with _lock:
        dirs = list(_dirs)
    for path in dirs:
        remove_dir(path)


def _on_signal(signum, frame):
    global _stopping
    _stopping = signum  # before kill_all: an engine started after it is stopped by register()
    for name in ("SIGTERM", "SIGHUP", "SIGINT"):
        if hasattr(signal, name):
            signal.signal(getattr(signal, name), signal.SIG_IGN)  # the clean-up is not interrupted again
    kill_all()
    raise Terminated(signum)


def _adopt_begin():
    """Become a subreaper (Linux), noting the children this process already has: never ours to kill."""
    global _adopting
    before = ctypes.c_int(0)
    if _prctl(PR_GET_CHILD_SUBREAPER, ctypes.byref(before)) != 0 or _prctl(PR_SET_CHILD_SUBREAPER, 1) != 0:
        return
    mine = [pid for pid, (ppid, _) in _table().items() if ppid == os.getpid()] + list(_groups)
    _adopting = {"before": bool(before.value), "mine": {pid: start_ticks(pid) for pid in mine}}


def _adopt_end():
    global _adopting
    if _adopting is not None:
        kill_adopted()
        if not _adopting["before"]:
            _prctl(PR_SET_CHILD_SUBREAPER, 0)
        _adopting = None


@contextmanager
def guard():
    """One command of the runner: the signal handlers for its duration (the previous ones back
    afterwards), what dead runs left removed first, and everything it started (or adopted) stopped
    and its temporary directories removed on the way out, however it goes."""
    global _depth, _atexit, _stopping
    previous = {}
    if threading.current_thread() is threading.main_thread():
        previous[signal.SIGINT] = signal.getsignal(signal.SIGINT)  # _on_signal ignores it during the clean-up
        for sig in (getattr(signal, name) for name in ("SIGTERM", "SIGHUP") if hasattr(signal, name)):
            if signal.getsignal(sig) in (signal.SIG_DFL, None):  # not under nohup
                previous[sig] = signal.signal(sig, _on_signal)
    if not _atexit:
        _atexit = True
        atexit.register(cleanup)
    with _lock:
        _depth += 1
        if _depth == 1:
            _adopt_begin()
    try:
        reap()
        yield
    finally:
        cleanup()
        with _lock:
            _depth -= 1
            if _depth == 0:
                _adopt_end()
                _stopping = None
        for sig, handler in previous.items():
            signal.signal(sig, handler if handler is not None else signal.SIG_DFL)
