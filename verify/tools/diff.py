"""What changed between two versions of a golden, in numbers (the worst change per tensor), not a
text diff: used by `verify regen` for every golden it rewrites, by `verify diff OLD NEW` for any
two goldens or two golden directories, and by `verify diff --rev REV [PATH ...]` (or
`verify diff REV`) for the goldens of a git revision against the working tree's. A revision's
files are read with `git ls-tree` and `git cat-file`, never by checking anything out."""

import argparse
import subprocess
from pathlib import Path

from .. import cli, options
from ..compare import compare_named
from ..documents import DocumentError, decode_tensors, parse_bytes, read_bytes
from ..errors import EXIT_MISMATCH, EXIT_PASS, InputError
from ..text import clean

METADATA = ("schema_version", "engine", "generator", "case")


def _load(data, schemas):
    doc = parse_bytes(data)
    schemas.check("golden", doc)
    return doc, decode_tensors(doc)


def changes(old_bytes, new_bytes, schemas, tol):
    """A list of one-line descriptions: metadata that differs, then per tensor the greatest
    |new - old| with its ULP distance (tensors that did not move are left out). Raises
    DocumentError when either side is not a valid golden."""
    old, old_t = _load(old_bytes, schemas)
    new, new_t = _load(new_bytes, schemas)
    parts = [f"{key} changed" for key in METADATA if old[key] != new[key]]
    if (old.get("digests") or {}) != (new.get("digests") or {}):
        moved = sorted(k for k in set(old.get("digests") or {}) | set(new.get("digests") or {})
                       if (old.get("digests") or {}).get(k) != (new.get("digests") or {}).get(k))
        parts.append(f"digests changed: {', '.join(moved[:6])}{' …' if len(moved) > 6 else ''}")
    for part, role in (("inputs", "input"), ("outputs", "output")):
        for t in compare_named(role, old_t[part], new_t[part], tol, ("old", "new")):
            if t.message and t.max_abs is None:
                parts.append(f"{part}.{t.name}: {t.message}")
            elif t.max_ulp or t.mismatched or (t.nan and t.nan.get("old") != t.nan.get("new")):
                beyond = f", {t.mismatched} / {t.total} beyond tol {tol:g}" if t.mismatched else ""
                parts.append(f"{part}.{t.name} max|diff| {_g(t.max_abs)} ({t.max_ulp} ULP{beyond})")
    return parts


def _g(x):
    return "-" if x is None else f"{x:.3g}"


def describe(old_bytes, new_bytes, schemas, tol):
    """changes() as one line; a previous file that is not a valid golden is said so."""
    try:
        parts = changes(old_bytes, new_bytes, schemas, tol)
    except (DocumentError, UnicodeDecodeError) as exc:
        return f"the previous file was not a valid golden ({exc})"
    return "; ".join(parts) or "text only (same values and digests)"


def _golden_bytes(path, schemas):
    """The bytes of a valid golden (read bounded, never a device or a pipe), else InputError."""
    try:
        data = read_bytes(path)
        _load(data, schemas)
    except DocumentError as exc:
        raise InputError(f"{path} is not a valid golden: {clean(exc)}; `verify diff` compares golden files "
                         "(docs/goldens.md)") from None
    return data


def _files(root):
    root = Path(root)
    return {p.relative_to(root).as_posix(): p for p in sorted(root.rglob("*.json")) if not p.is_dir()}


def diff_paths(old, new, schemas, tol):
    """Lines describing how NEW differs from OLD (two golden files, or two directories of them,
    matched by relative path) and whether anything differs."""
    old, new = Path(old), Path(new)
    for p in (old, new):
        if not p.exists():
            raise InputError(f"{p} does not exist; give two golden files or two golden directories")
    if old.is_dir() != new.is_dir():
        raise InputError(f"{old} and {new} must both be files or both be directories")
    if not old.is_dir():
        data = {p: _golden_bytes(p, schemas) for p in (old, new)}  # each must be a golden, identical or not
        if data[old] == data[new]:
            return [f"{new}: identical to {old}"], False
        parts = changes(data[old], data[new], schemas, tol)
        return [f"changed {new.name}:"] + [f"  {p}" for p in parts or ["text only (same values and digests)"]], True
    a, b = _files(old), _files(new)
    if not a and not b:
        raise InputError(f"neither {old} nor {new} holds a golden (*.json); give two golden directories")
    return _diff_sets({k: (lambda p=p: _golden_bytes(p, schemas)) for k, p in a.items()},
                      {k: (lambda p=p: _golden_bytes(p, schemas)) for k, p in b.items()},
                      f"{old} -> {new}", schemas, tol)


def _diff_sets(a, b, label, schemas, tol):
    """Lines for two sets of goldens {relative path: () -> bytes} and whether they differ. Every
    golden is read (each must be one), not only the common ones."""
    data = {k: (a[k](), None) for k in a}
    data.update({k: (data[k][0] if k in data else None, b[k]()) for k in b})
    added, removed = sorted(set(b) - set(a)), sorted(set(a) - set(b))
    common = sorted(set(a) & set(b))
    changed = [k for k in common if data[k][0] != data[k][1]]
    lines = [f"{len(changed)} changed, {len(added)} added, {len(removed)} removed, "
             f"{len(common) - len(changed)} unchanged ({label})"]
    for k in changed:
        lines.append(f"  changed {k}: {describe(data[k][0], data[k][1], schemas, tol)}")
    lines += [f"  added {k}" for k in added] + [f"  removed {k}" for k in removed]
    return lines, bool(changed or added or removed)


# --- against a git revision ------------------------------------------------------------------------

def _git(root, *args, stdin=None):
    """Run git in `root` -> stdout bytes; InputError with git's own words when it fails."""
    try:
        done = subprocess.run(["git", *args], cwd=root, input=stdin, capture_output=True)
    except OSError as exc:
        raise InputError(f"cannot run git ({exc.strerror}); --rev needs git on PATH") from None
    if done.returncode != 0:
        said = done.stderr.decode("utf-8", "replace").strip().splitlines()
        raise _GitError(said[-1] if said else f"exit {done.returncode}")
    return done.stdout


class _GitError(Exception):
    pass


def _revision(root, rev):
    """(the repository's top level, the checkout's path inside it, the commit REV names)."""
    try:
        top = Path(_git(root, "rev-parse", "--show-toplevel").decode().strip())
    except _GitError as exc:
        raise InputError(f"{root} is not in a git repository ({exc}); --rev compares with a git revision, "
                         "give OLD NEW paths instead") from None
    try:
        commit = _git(root, "rev-parse", "--verify", "--quiet", "--end-of-options", f"{rev}^{{commit}}").decode().strip()
    except _GitError:
        commit = ""
    if not commit:
        raise InputError(f"{rev!r} names no commit of {top} (expected a revision git rev-parse takes: HEAD, "
                         "HEAD~1, a branch, a tag or a hash); give OLD NEW paths to compare two files or directories")
    prefix = Path(root).resolve().relative_to(top.resolve()).as_posix()
    return top, ("" if prefix == "." else prefix + "/"), commit


def _blobs(top, commit, path):
    """{path inside the repository: blob id} of the .json files at or under `path` (relative to
    the repository's top; "" for all of it) in `commit`."""
    listing = _git(top, "ls-tree", "-r", "-z", "--full-tree", commit, *(["--", path] if path else []))
    found = {}
    for entry in listing.split(b"\0"):
        if not entry:
            continue
        meta, _, name = entry.partition(b"\t")
        kind, oid = meta.split()[1:3]
        name = name.decode("utf-8", "surrogateescape")
        if kind == b"blob" and name.endswith(".json") and (not path or name == path or name.startswith(path + "/")):
            found[name] = oid.decode()
    return found


def _read_blobs(top, oids):
    """{blob id: bytes}, all read by one `git cat-file --batch`."""
    unique = sorted(set(oids))
    if not unique:
        return {}
    out = _git(top, "cat-file", "--batch", stdin="".join(f"{o}\n" for o in unique).encode())
    blobs, pos = {}, 0
    for oid in unique:
        end = out.index(b"\n", pos)
        header = out[pos:end].split()
        size = int(header[2])
        blobs[oid] = out[end + 1:end + 1 + size]
        pos = end + 1 + size + 1  # the content, then a newline
    return blobs


def diff_revision(root, rev, paths, schemas, tol):
    """Lines describing how the working tree's goldens at PATHS (default: every suite's golden
    directory) differ from those of the git revision REV, and whether anything differs."""
    root = Path(root).resolve()
    top, prefix, commit = _revision(root, rev)
    lines, differ = [], False
    for given in paths:
        here = Path(given)
        here = (here if here.is_absolute() else Path.cwd() / here).resolve()
        try:
            rel = here.relative_to(root).as_posix()
        except ValueError:
            raise InputError(f"{given} is outside the checkout {root}; --rev compares paths of the checkout") from None
        rel = "" if rel == "." else rel
        at_rev = _blobs(top, commit, (prefix + rel).rstrip("/"))
        if not at_rev and not here.exists():
            raise InputError(f"{given} is neither in the working tree nor in {rev}; give a golden file or directory")
        shown = rel or "."
        if here.is_file() or (not here.exists() and set(at_rev) == {prefix + rel}):
            old = _read_blobs(top, at_rev.values()).get(at_rev.get(prefix + rel)) if at_rev else None
            new = here.read_bytes() if here.is_file() else None
            if old is None:
                lines.append(f"added {shown} (not in {rev})")
                differ = True
            elif new is None:
                lines.append(f"removed {shown} (in {rev}, not in the working tree)")
                differ = True
            elif old == new:
                lines.append(f"{shown}: identical to {rev}:{shown}")
            else:
                try:
                    parts = changes(old, new, schemas, tol)
                except (DocumentError, UnicodeDecodeError) as exc:
                    raise InputError(f"cannot compare {rev}:{shown} and {shown}: one is not a valid golden ({exc})") \
                        from None
                lines += [f"changed {shown}:"] + [f"  {p}" for p in parts or ["text only (same values and digests)"]]
                differ = True
            continue
        base = prefix + (rel + "/" if rel else "")
        blobs = _read_blobs(top, at_rev.values())
        old_set = {name[len(base):]: (lambda b=blobs[oid]: b) for name, oid in at_rev.items()}
        new_set = {k: (lambda p=p: _golden_bytes(p, schemas)) for k, p in _files(here).items()} if here.is_dir() else {}
        part, moved = _diff_sets(old_set, new_set, f"{rev}:{shown} -> {shown}", schemas, tol)
        lines += part
        differ = differ or moved
    return lines, differ


def parser():
    p = argparse.ArgumentParser(
        prog="verify diff",
        usage="verify diff [-h] [--tol T] OLD NEW\n       verify diff [-h] [--tol T] --rev REV [PATH ...]"
              "\n       verify diff [-h] [--tol T] REV",
        description="Compare two golden files, or two directories of goldens (matched by relative path), and print "
                    "per changed golden the greatest change of each tensor in numbers, as `verify regen` does. With "
                    "--rev REV (or a single argument REV, as in `verify diff HEAD`), compare the goldens of the git "
                    "revision REV with the working tree's, at each PATH (default: golden/<suite> of every suite); "
                    "REV's files are read from git, nothing is checked out. Exit 0 when they hold the same bytes, 1 "
                    "when they differ, 2 when a file is not a valid golden or REV is not a revision.")
    p.add_argument("paths", nargs="*", type=Path, metavar="OLD NEW | PATH",
                   help="OLD NEW: two golden files or two directories of goldens; with --rev: working-tree paths "
                        "(files or directories) to compare with REV's")
    p.add_argument("--rev", metavar="REV", help="compare the goldens of this git revision (HEAD, a branch, a tag, "
                                                "a hash) with the working tree's")
    options.tol_option(p, "also count the elements that moved beyond T * (1 + |old|)")
    return p


def run(args, out):
    """Carry out `verify diff OLD NEW`, `verify diff --rev REV [PATH ...]` or `verify diff REV`
    (default PATHs: every suite's golden directory); returns the exit code."""
    root = cli.repo_root()
    schemas, default_paths = cli.load_schemas(root), [root / "golden" / name for name in cli.SUITES]
    rev, paths = args.rev, list(args.paths)
    if rev is None and len(paths) == 1:  # `verify diff HEAD`
        rev, paths = str(paths[0]), []
    if rev is not None:
        lines, differ = diff_revision(root, rev, paths or default_paths, schemas, args.tol)
    elif len(paths) == 2:
        lines, differ = diff_paths(paths[0], paths[1], schemas, args.tol)
    else:
        raise InputError(f"verify diff takes OLD NEW (two golden files or directories), REV, or --rev REV [PATH ...]; "
                         f"got {len(paths)} argument(s)")
    for line in lines:
        print(line, file=out)
    return EXIT_MISMATCH if differ else EXIT_PASS
