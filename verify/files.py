"""The runner's output files: written whole (a temporary file beside the path, then one rename),
and checked before anything runs (check_outputs: each refusal an InputError, one line, exit 2)."""

import errno
import os
import stat
import tempfile
from pathlib import Path

from .errors import InputError
from .text import clean

_KINDS = ((stat.S_ISDIR, "a directory"), (stat.S_ISCHR, "a character device"), (stat.S_ISBLK, "a block device"),
          (stat.S_ISFIFO, "a named pipe"), (stat.S_ISSOCK, "a socket"), (stat.S_ISLNK, "a symbolic link"))


def file_kind(mode):
    """What a file that is not a regular one is, in words."""
    return next((name for test, name in _KINDS if test(mode)), "not a regular file")


WHAT = {"--report": "JSON report", "the JSON report": "JSON report", "--html": "HTML report", "--junit": "JUnit XML"}


def umask():
    """The process's umask."""
    mask = os.umask(0)
    os.umask(mask)
    return mask


def not_regular(path):
    """Why what is at path may not be replaced by a file, e.g. "it is a character device, not a
    regular file" (a symbolic link followed); None when nothing is there or a regular file is."""
    try:
        info = os.stat(path)
    except (FileNotFoundError, NotADirectoryError):
        return None  # nothing (or a dangling symbolic link, which the rename replaces); a parent's problem is said apart
    except OSError as exc:  # a loop of symbolic links, a directory that cannot be searched
        return f"it cannot be looked at ({exc.strerror or exc})"
    if stat.S_ISREG(info.st_mode):
        return None
    return f"it is {file_kind(info.st_mode)}, not a regular file"


def write_atomically(path, data):
    """path holds either what it held before or all of data (bytes, or str as UTF-8). Something
    other than a regular file at path (a device, a pipe, a directory) is an OSError, never replaced."""
    path = Path(path)
    if isinstance(data, str):
        data = data.encode("utf-8")
    why = not_regular(path)
    if why is not None:
        raise OSError(errno.EINVAL, f"{why}: never replaced", str(path))
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
        os.chmod(tmp, 0o666 & ~umask())  # mkstemp makes it private; this is an ordinary file
        os.replace(tmp, path)
    except BaseException:
        if os.path.lexists(tmp):
            os.unlink(tmp)
        raise


def _real(path):
    """path with every symbolic link resolved; as it is (made absolute) when that fails (a loop)."""
    try:
        return Path(path).resolve()
    except (OSError, RuntimeError):
        return Path(os.path.abspath(path))


def _makable(directory):
    """Why files cannot be made in directory (created with its parents if missing), or None."""
    for here in (Path(directory), *Path(directory).parents):
        try:
            info = os.stat(here)
        except (FileNotFoundError, NotADirectoryError):  # made with its parents
            continue
        except OSError as exc:
            return f"{here} cannot be looked at ({exc.strerror or exc})"
        if not stat.S_ISDIR(info.st_mode):
            return f"{here} is not a directory"
        return None if os.access(here, os.W_OK | os.X_OK) else f"{here} is not writable"
    return "no part of it exists"


def _plain_name(option, path):
    text = str(path)
    shown = clean(text)
    if not text or text != shown:
        raise InputError(f"{option} {shown}: a file name with control characters (a newline, a tab, an escape) "
                         "or bytes that are not UTF-8 is refused; choose a plain name")
    return shown


def _resolved(option, path, shown, guarded):
    try:
        resolved = Path(path).resolve()
    except (OSError, RuntimeError) as exc:  # a loop of symbolic links
        raise InputError(f"{option} {shown}: the path cannot be resolved ({exc}); choose another path") from None
    for what, directory in guarded:
        if resolved.is_relative_to(directory):
            raise InputError(f"{option} {shown}: it lies in {what} ({directory}), which the runner reads and never "
                             "writes an output into; choose a path outside it")
    return resolved


def check_outputs(outputs, protected, reserved=(), directories=()):
    """Refuse, before anything runs, an output that is not (or cannot be) a regular file, lies in a
    protected directory, replaces a reserved file, shares a path with another, or whose directory
    cannot be made.
    outputs: [(option, path)] of the files to write, e.g. ("--html", Path("r.html")).
    protected: [(what, directory)] no output may lie in (symbolic links followed), e.g. golden/.
    reserved: [(what, path, options)]: a file the given options may not replace.
    directories: [(option, path)] written into (export's --out): protected, and a directory."""
    seen = {}
    guarded = [(what, _real(d)) for what, d in protected]
    for option, path in directories:
        shown = _plain_name(option, path)
        _resolved(option, path, shown, guarded)
        if os.path.exists(path) and not os.path.isdir(path):
            raise InputError(f"{option} {shown}: it is not a directory; give a directory (it is made if missing)")
    for option, path in outputs:
        shown = _plain_name(option, path)
        path = Path(path)
        why = not_regular(path)
        if why is not None:
            raise InputError(f"{option} {shown}: {why}; the runner replaces the file at the path, never anything "
                             "else: remove what is there, or give another path")
        resolved = _resolved(option, path, shown, guarded)
        for what, other, options in reserved:
            if option in options and resolved == _real(other):
                raise InputError(f"{option} {shown} is {what}, which it would replace; choose another path")
        if resolved in seen:
            raise InputError(f"{seen[resolved]} and {option} name the same file ({shown}); give each output a path "
                             "of its own")
        seen[resolved] = option
        why = _makable(path.parent)
        if why is not None:  # the words of the write's own failure, said before anything runs
            raise InputError(f"cannot write the {WHAT.get(option, 'output')} to {shown} ({clean(why)}); choose "
                             "another path")
