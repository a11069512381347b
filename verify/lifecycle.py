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

- A process that leaves the engine's group and clears its environment (a daemon: double fork,
  setsid, env -i) carries neither. On Linux a command of the runner (guard()) makes it a child
  subreaper (prctl(PR_SET_CHILD_SUBREAPER)): every orphaned descendant of its engines is then
  reparented to the runner instead of init, and once no engine runs, and on every way out, the
  runner kills (SIGKILL, its whole subtree) and reaps every child it adopted that way: a child it
  neither had when the command began nor started itself (kill_adopted()). So a runner inside
  another program (pytest calling verify.cli.main) never touches that program's own children.

Linux reads /proc for start times, environments and parents; elsewhere the token is the pid alone,
only the process groups are killed, and there is no subreaper (docs/runner.md, "Guarantees").
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
        if _adopting is not None:
            _adopting["mine"][proc.pid] = start_ticks(proc.pid)


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
    """Every engine process group this runner started, every process carrying its token, and every
    process it adopted as a subreaper (however it detached)."""
    kill_groups()
    kill_carriers()
    kill_adopted()


# --- the subreaper: what detached however it could ----------------------------------------------

PR_SET_CHILD_SUBREAPER, PR_GET_CHILD_SUBREAPER = 36, 37
ADOPTED_GRACE = 5.0  # seconds kill_adopted() keeps killing a subtree that keeps forking
_adopting = None  # while guard() made this process a subreaper: {"before": bool, "mine": {pid: start ticks}}
_depth = 0  # nested guard()s
_engines_running = 0  # engine runs between started() and ended()


def _prctl():
    if not sys.platform.startswith("linux"):
        return None
    try:
        return ctypes.CDLL(None, use_errno=True).prctl
    except (OSError, AttributeError):
        return None


def _subreaper_get():
    prctl = _prctl()
    if prctl is None:
        return None
    value = ctypes.c_int(0)
    if prctl(PR_GET_CHILD_SUBREAPER, ctypes.byref(value), 0, 0, 0) != 0:
        return None
    return bool(value.value)


def _subreaper_set(on):
    prctl = _prctl()
    return prctl is not None and prctl(PR_SET_CHILD_SUBREAPER, int(on), 0, 0, 0) == 0


def _table():
    """{pid: (parent pid, state)} of every process, from /proc (empty without it)."""
    found = {}
    try:
        entries = os.listdir("/proc")
    except OSError:
        return found
    for entry in entries:
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat", "rb") as fh:
                stat = fh.read()
            fields = stat[stat.rindex(b")") + 2:].split()
            found[int(entry)] = (int(fields[1]), fields[0][:1])
        except (OSError, ValueError, IndexError):
            continue
    return found


def _adopt_begin():
    """Become a subreaper (Linux) and note the children this process already has: never ours to
    kill. Returns whether it is one now."""
    global _adopting
    with _lock:
        if _adopting is not None:
            return True
        before = _subreaper_get()
        if before is None or not _subreaper_set(True):
            return False
        me = os.getpid()
        mine = {pid: start_ticks(pid) for pid, (ppid, _) in _table().items() if ppid == me}
        mine.update({pid: start_ticks(pid) for pid in _groups})
        _adopting = {"before": before, "mine": mine}
        return True


def _adopt_end():
    global _adopting
    with _lock:
        if _adopting is None:
            return
        kill_adopted()
        if not _adopting["before"]:
            _subreaper_set(False)
        _adopting = None


def adopted():
    """The pids of the children this process adopted as a subreaper and that are still there
    (zombies included): children it neither had when guard() began nor started as an engine."""
    with _lock:
        if _adopting is None:
            return []
        mine = dict(_adopting["mine"])
    me = os.getpid()
    return sorted(pid for pid, (ppid, _) in _table().items()
                  if ppid == me and not (pid in mine and mine[pid] == start_ticks(pid)))


def kill_adopted():
    """SIGKILL every process this runner adopted, with its whole subtree (a child that forks as it
    is killed is adopted in turn: looked at again, for up to ADOPTED_GRACE seconds), and reap them
    (waitpid on those pids only). Returns the pids killed."""
    with _lock:
        if _adopting is None:
            return []
        killed = set()
        deadline = time.monotonic() + ADOPTED_GRACE
        me = os.getpid()
        while True:
            theirs = set(adopted())
            if not theirs:
                break
            table = _table()
            children = {}
            for pid, (ppid, _) in table.items():
                children.setdefault(ppid, []).append(pid)
            subtree, todo = set(), list(theirs)
            while todo:
                pid = todo.pop()
                if pid in subtree or pid == me:
                    continue
                subtree.add(pid)
                todo.extend(children.get(pid, ()))
            for pid in subtree:
                if table.get(pid, (0, b"Z"))[1] != b"Z":
                    try:
                        os.kill(pid, signal.SIGKILL)
                        killed.add(pid)
                    except (ProcessLookupError, PermissionError):
                        pass
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
    """An engine run is over (its process and group killed and waited for): once none runs, what
    the engines left detached is killed (kill_adopted())."""
    global _engines_running
    with _lock:
        _engines_running -= 1
        if _engines_running == 0:
            kill_adopted()


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


def engine_tmp():
    """A fresh temporary directory for one engine process (its TMPDIR), named after this runner like
    temp_dir()'s: remove_dir() removes it when the engine ends, cleanup() on every way out, the
    next run if this one was killed. So nothing an engine or a browser it starts puts in its
    temporary directory (Chromium's org.chromium.Chromium.*, a profile) outlives the run."""
    path = Path(tempfile.mkdtemp(prefix=f"verify-tmp-{token()}-"))
    with _lock:
        _dirs.add(path)
    return path


def remove_dir(path):
    """Remove a directory of engine_tmp()."""
    _remove(Path(path))


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
    """Every way out: stop what this runner started (and adopted), remove its temporary
    directories."""
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
    global _depth
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
        for sig, handler in previous.items():
            signal.signal(sig, handler if handler is not None else signal.SIG_DFL)
