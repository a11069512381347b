"""What changed between two versions of a golden, in numbers (the worst change per tensor), not a
text diff: used by `verify regen` for every golden it rewrites and by `verify diff OLD NEW` for
any two goldens or two golden directories."""

from pathlib import Path

from .compare import compare_named
from .documents import DocumentError, decode_tensors, parse_bytes, read_bytes
from .errors import InputError
from .text import clean

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
    return "; ".join(parts) or "text only (same values)"


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
        return [f"changed {new.name}:"] + [f"  {p}" for p in parts or ["text only (same values)"]], True
    a, b = _files(old), _files(new)
    if not a and not b:
        raise InputError(f"neither {old} nor {new} holds a golden (*.json); give two golden directories")
    a, b = ({k: _golden_bytes(p, schemas) for k, p in files.items()} for files in (a, b))  # every one a golden
    added, removed = sorted(set(b) - set(a)), sorted(set(a) - set(b))
    common = sorted(set(a) & set(b))
    changed = [k for k in common if a[k] != b[k]]
    lines = [f"{len(changed)} changed, {len(added)} added, {len(removed)} removed, "
             f"{len(common) - len(changed)} unchanged ({old} -> {new})"]
    for k in changed:
        lines.append(f"  changed {k}: {describe(a[k], b[k], schemas, tol)}")
    lines += [f"  added {k}" for k in added] + [f"  removed {k}" for k in removed]
    return lines, bool(changed or added or removed)
