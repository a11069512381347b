"""`verify cache`: where the reference cache is, what it holds, and --prune / --clear, which remove
only what verify/reference_cache.py made (its environment directories and their entries, and the
decoded-document memo of earlier versions), never anything else under the cache directory."""

import argparse
import json
import os
import shutil
import stat
from pathlib import Path

from .. import cli, models
from ..errors import EXIT_PASS, InputError
from ..reference_cache import (DIR_ENV, HEX64, OLD_MEMO, NotUsed, cache_dir, digest, environment, is_dir, key_path,
                               place_problem, private_problem)


def _size(path):
    total = 0
    for dirpath, _, filenames in os.walk(path):
        for name in filenames:
            try:
                total += (Path(dirpath) / name).lstat().st_size
            except OSError:
                pass
    return total


def _is_environment(path):
    """An environment directory this module made: a 64-hex name, a directory itself (no link),
    holding environment.json, a regular file."""
    if not HEX64.fullmatch(path.name) or not is_dir(path):
        return False
    try:
        return stat.S_ISREG(os.lstat(path / "environment.json").st_mode)
    except OSError:
        return False


def _is_entry(path):
    """A case entry this module made (a 64-hex directory holding manifest.json), or one of its
    temporary directories (.tmp-PID-HEX)."""
    if not is_dir(path):
        return False
    if path.name.startswith(".tmp-"):
        return True
    return bool(HEX64.fullmatch(path.name)) and os.path.lexists(path / "manifest.json")


def _is_old_memo(path):
    """The memo of decoded documents an earlier version kept (<cache>/documents/<64 hex>/...)."""
    if path.name != OLD_MEMO or not is_dir(path):
        return False
    try:
        children = list(path.iterdir())
    except OSError:
        return False
    return all(HEX64.fullmatch(c.name) and is_dir(c) for c in children)


def _current_key(root):
    try:
        return digest(environment(root))
    except NotUsed:
        return None


def _directory(directory):
    try:
        return Path(directory) if directory is not None else cache_dir()
    except models.NoCacheDir as exc:
        raise InputError(str(exc)) from None


def describe(root, directory=None):
    """Lines about the cache: where it is, whether `verify attention` would use it, each
    environment's entries and size, which one the reference as it is now would use."""
    directory = _directory(directory)
    lines = [f"reference cache: {directory}"]
    if os.path.lexists(directory) and not is_dir(directory) and not os.path.isdir(directory):
        what = "a file" if os.path.isfile(directory) else "not a directory"
        return lines + [f"  {directory} is {what}, not a cache directory: `verify attention` does not use it; "
                        f"point {DIR_ENV} at a directory of your own"]
    current = _current_key(root)
    problem = place_problem(directory, root) or private_problem(directory)
    if problem:
        lines.append(f"  not used by `verify attention`: {problem}")
    try:
        lines.append(f"  entries authenticated with the key in {key_path()} (never in the cache directory)")
    except models.NoCacheDir as exc:
        lines.append(f"  no cache key: {exc}")
    children = sorted(directory.iterdir()) if os.path.isdir(directory) else []
    envs = [p for p in children if _is_environment(p)]
    if not envs:
        lines.append("  empty (`verify attention` fills it; `verify attention --fresh` neither reads nor fills it)")
    for env in envs:
        entries = [p for p in env.iterdir() if _is_entry(p) and not p.name.startswith(".")]
        try:
            made = json.loads((env / "environment.json").read_text(encoding="utf-8"))
            what = f"numpy {made.get('numpy')}, python {(str(made.get('python', '')).split() or ['?'])[0]}, " \
                   f"reference sources {str(made.get('reference_sources'))[:12]}"
        except (OSError, ValueError, AttributeError):
            what = "no readable environment.json"
        mark = "  (the reference as it is now)" if env.name == current else ""
        lines.append(f"  {env.name[:16]}  {len(entries)} case(s), {_size(env) / 1e6:.1f} MB; {what}{mark}")
    old = [p for p in children if _is_old_memo(p)]
    if old:
        lines.append(f"  {old[0].name}/: decoded documents of an earlier version, no longer used "
                     f"({_size(old[0]) / 1e6:.1f} MB; --prune and --clear remove it)")
    others = [p.name for p in children if p not in envs and p not in old]
    if others:
        lines.append(f"  {len(others)} other item(s) not made by verify, never removed by --prune or --clear: "
                     + ", ".join(others[:5]) + (" ..." if len(others) > 5 else ""))
    return lines


def remove(root, directory=None, stale_only=False):
    """Remove what this module made: every environment directory (or, stale_only, every one but
    the current reference's) with the entries in it, and the decoded documents of earlier
    versions; nothing else. Returns how many environments were removed. InputError (exit 2, one
    line) for a cache path that is a file, /, the home directory, the checkout, a parent of it or
    inside it."""
    directory = _directory(directory)
    what = "--prune" if stale_only else "--clear"
    if os.path.lexists(directory) and not os.path.isdir(directory):
        raise InputError(f"{DIR_ENV} or the default names {directory}, which is a file, not a cache directory; "
                         f"nothing removed; point {DIR_ENV} at the cache directory")
    problem = place_problem(directory, root)
    if problem:
        raise InputError(f"verify cache {what} refuses to remove anything under {directory}: {problem}; "
                         f"point {DIR_ENV} at a directory of its own")
    if not os.path.isdir(directory):
        return 0
    current = None
    if stale_only:
        current = _current_key(root)
        if current is None:
            raise InputError(f"verify cache --prune cannot tell which environment is the current one ({_link_reason(root)}); "
                             "nothing removed; `verify cache --clear` removes every environment")
    removed = 0
    for env in sorted(Path(directory).iterdir()):
        if _is_old_memo(env):
            shutil.rmtree(env, ignore_errors=True)
            continue
        if not _is_environment(env) or env.name == current:
            continue
        for child in env.iterdir():
            if _is_entry(child):
                shutil.rmtree(child, ignore_errors=True)
            elif child.name == "environment.json" or (child.name.startswith(".environment.json.") and not is_dir(child)):
                child.unlink(missing_ok=True)
        try:
            env.rmdir()  # left in place, with what verify did not make, when something else is in it
        except OSError:
            pass
        removed += 1
    return removed


def _link_reason(root):
    try:
        environment(root)
    except NotUsed as exc:
        return str(exc)
    return "unknown"


def parser():
    p = argparse.ArgumentParser(prog="verify cache",
                                description="The reference cache (docs/runner.md, \"The reference cache\"): where it "
                                            "is, each environment kept (one per version of the reference's sources, "
                                            "Python, NumPy and platform) with its cases and size, and which one the "
                                            "reference as it is now would use. `verify attention --fresh` neither "
                                            "reads nor fills it.")
    which = p.add_mutually_exclusive_group()
    which.add_argument("--prune", action="store_true", help="remove every environment but the current reference's")
    which.add_argument("--clear", action="store_true", help="remove everything the cache holds")
    return p


def run(args, out):
    """Carry out `verify cache [--prune | --clear]`."""
    root = cli.repo_root()
    if args.clear or args.prune:  # only what verify made; InputError for /, home, the checkout, a file
        removed = remove(root, stale_only=args.prune)
        what = "environment(s) other than the current reference's" if args.prune else "environment(s)"
        print(f"removed {removed} {what} from {cache_dir()}", file=out)
    for line in describe(root):
        print(line, file=out)
    return EXIT_PASS
