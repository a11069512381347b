"""Faithful variants of the port, built at test time from the port's own sources (docs/runner.md,
"What a correct port must satisfy"): each is a copy of port_ts/ with a legitimate change of
arithmetic, the kind a maintainer makes for speed or a browser makes by itself. None is a bug:
every one must pass `verify attention`, and every one must fail `verify attention --bitwise`.

  builtins    every transcendental of mathlib (exp, expm1, tanh, log, sin, cos, powLn) is the
              JavaScript built-in (Math.exp, ...); the generator's own log and the exact erf stay
  reversed_k  every product sums its k terms in reverse order (the JavaScript kernel, forced)
  both        the two together
  reciprocal  the softmax normalises by one reciprocal per row (x * (1 / s)) instead of a division
              per element

A transform names the file (found anywhere under port_ts/src, so moving it to a subfolder does not
break it), optionally the function it edits, and the exact text; text that is not there is a
VariantError naming what to update, never a silently unchanged copy.
"""

import re
import shutil
from dataclasses import dataclass
from pathlib import Path

TRANSCENDENTALS = ("exp", "expm1", "tanh", "log", "sin", "cos")


class VariantError(Exception):
    pass


@dataclass(frozen=True)
class Edit:
    file: str  # a file name under port_ts/src, e.g. "mathlib.ts"
    function: str  # the function whose text holds `find`, or "" for the whole file
    find: str
    replace: str
    count: int = 1  # how many times `find` must occur (inside the function), all replaced


def _builtins():
    edits = []
    for name in TRANSCENDENTALS:
        head = f"export function {name}(x: number): number {{"
        edits.append(Edit("mathlib.ts", "", head,
                          f"export function {name}(x: number): number {{ return Math.{name}(x); }}\n"
                          f"function {name}Own(x: number): number {{"))
    head = "export function powLn(c: readonly [number, number], y: number): number {"
    edits.append(Edit("mathlib.ts", "", head, head + "\n  return Math.exp(y * c[0] + y * c[1]);"))
    return edits


def _reversed_k():
    return [
        Edit("product.ts", "productKernel", "for (let k = 0; k < K; k++)", "for (let k = K - 1; k >= 0; k--)", count=4),
        Edit("product.ts", "", '{ mode: "auto", simd:', '{ mode: "js", simd:'),
    ]


def _reciprocal():
    return [Edit("rows.ts", "softmaxNormalizeJs",
                 "for (let k = 0; k < K; k++) O[o + k] = O[o + k] / sum;",
                 "const inv = 1 / sum;\n    for (let k = 0; k < K; k++) O[o + k] = O[o + k] * inv;")]


VARIANTS = {
    "builtins": _builtins(),
    "reversed_k": _reversed_k(),
    "both": _builtins() + _reversed_k(),
    "reciprocal": _reciprocal(),
}


def _function_span(text, name, where):
    """(start, end) of the function `name`'s text: from its declaration to the closing brace at
    the declaration's own indentation."""
    match = re.search(rf"^([ \t]*)(?:export )?function {re.escape(name)}\b", text, re.M)
    if match is None:
        raise VariantError(f"{where}: no function {name}; update tests/port_variants.py to today's port")
    close = re.compile(rf"^{match.group(1)}\}}", re.M)
    end = close.search(text, match.end())
    if end is None:
        raise VariantError(f"{where}: cannot find the end of function {name}")
    return match.start(), end.end()


def _find(src_root, file_name):
    found = sorted(Path(src_root).rglob(file_name))
    if len(found) != 1:
        raise VariantError(f"{len(found)} files named {file_name} under {src_root}; update tests/port_variants.py")
    return found[0]


def apply_edit(src_root, edit):
    path = _find(src_root, edit.file)
    text = path.read_text(encoding="utf-8")
    start, end = _function_span(text, edit.function, path) if edit.function else (0, len(text))
    part = text[start:end]
    count = part.count(edit.find)
    if count != edit.count:
        where = f"function {edit.function} of {path.name}" if edit.function else path.name
        raise VariantError(f"{where}: {edit.find!r} occurs {count} times, expected {edit.count}; "
                           "update tests/port_variants.py to today's port")
    path.write_text(text[:start] + part.replace(edit.find, edit.replace) + text[end:], encoding="utf-8")


def build(repo_root, name, into, extra_edits=()):
    """Copy the port (port_ts/src, package.json) into `into`/port_ts and apply the variant's edits,
    then `extra_edits` (e.g. a fault on top); returns the command that runs it as an engine."""
    into = Path(into)
    source = Path(repo_root) / "port_ts"
    target = into / "port_ts"
    shutil.copytree(source / "src", target / "src")
    shutil.copy2(source / "package.json", target / "package.json")
    for edit in list(VARIANTS[name]) + list(extra_edits):
        apply_edit(target / "src", edit)
    return target / "src" / "cli.ts"
