"""The arbiter (docs/runner.md, "The arbiter"): when the reference and the port disagree on a forward
case, a third engine, PyTorch float64 (oracle/, `python -m oracle run`), computes the case from the
same handed inputs, and its tensors are compared with each side's by the case's rule and
tolerance. The case's entry gets an `arbitration` (the JSON report's schema): the side PyTorch
agrees with, the figures, and one line of advice that the renderers print under "what to do".

It runs after the verdict and only on failing forward cases, so a passing run never starts it;
it never changes a verdict. `--oracle auto` (the default) arbitrates when PyTorch is installed
and otherwise says it could not; `--oracle torch` requires PyTorch (exit 2 without it);
`--oracle none` turns it off. The runner never imports torch: the engine is a process of its own.
"""

import importlib.util
import math
import sys

from . import engines, layout
from .advice import engines_disagree
from .compare import compare_named
from .errors import InputError
from .schedule import hand_inputs
from .verdict import Reader

MODES = ("auto", "torch", "none")
INSTALL = "pip install -e '.[oracle]'"
ENGINE_NAME = "torch"
# outcome: the side PyTorch agrees with
REFERENCE, PORT, BOTH, NEITHER = "reference", "port", "both", "neither"
NOT_ARBITRATED, COULD_NOT = "not arbitrated", "could not arbitrate"


def torch_installed():
    """Whether PyTorch can be found by this Python, without importing it (sys.modules["torch"] =
    None, as a test hides it, counts as not installed)."""
    try:
        return importlib.util.find_spec("torch") is not None
    except (ImportError, ValueError):
        return False


def check(mode):
    """Refuse --oracle torch, before anything runs, where PyTorch is not installed."""
    if mode == "torch" and not torch_installed():
        raise InputError(f"--oracle torch needs PyTorch, which this Python ({sys.executable}) cannot import; "
                         f"install it with {INSTALL}, or leave the arbiter out with --oracle none")


def engine(root):
    return engines.Engine(ENGINE_NAME, [sys.executable, "-m", "oracle", "run"], root)


def wanted(entry):
    """A case the arbiter is asked about: a failing forward case on which the engines disagree."""
    return entry["kind"] == "forward" and engines_disagree(entry)


def _record(outcome, advice, names=(), reference=None, port=None):
    return {"engine": ENGINE_NAME, "outcome": outcome, "advice": advice, "tensors": list(names),
            "reference_max_abs": reference, "port_max_abs": port}


def arbitrate(ctx, cases, fresh, reference_dir, work, mode, timings):
    """Add `arbitration` to each entry of cases [(Case, entry)] that `wanted` keeps. fresh: {case
    id: {role: verdict.Fresh}}; reference_dir: the reference's out_dir, whose <id>.handed.json are
    handed to PyTorch as they were to the port; work: the run's directory."""
    cases = [(case, entry) for case, entry in cases if wanted(entry)]
    if mode == "none" or not cases:
        return
    if not torch_installed():
        for _, entry in cases:
            entry["arbitration"] = _record(COULD_NOT, f"could not arbitrate: PyTorch is not installed ({INSTALL})")
        return
    with timings.section("arbiter: torch"):
        handed = {case.id: hand_inputs(reference_dir, work, case.id) for case, _ in cases}
        try:
            run = engines.run(engine(ctx.root), [case.spec for case, _ in cases], layout.engine_dir(work, ENGINE_NAME),
                              ctx.timeout, {"inputs_from": {i: str(p) for i, p in handed.items() if p is not None}})
        except InputError as exc:  # the arbiter's own failure never stops the run: each case says so
            for _, entry in cases:
                entry["arbitration"] = _record(COULD_NOT, f"could not arbitrate: {exc}")
            return
        reader = Reader(ctx.schemas)
        for case, entry in cases:
            entry["arbitration"] = judge(reader.fresh(run, case, "port"), fresh[case.id], entry["tolerance"])


def _worst(results):
    """The greatest |diff| over compared tensors; infinity where a failing pair has no finite one
    (NaN on a side, or shapes that cannot be compared)."""
    worst = 0.0
    for t in results:
        x = t.max_abs
        if x is None or math.isnan(x):
            x = 0.0 if t.passed else math.inf
        worst = max(worst, x)
    return worst


def _shown(x):
    return format(x, ".1e") if math.isfinite(x) else str(x)


def judge(torch_fresh, fresh, tol):
    """The arbitration of one case from PyTorch's document and the two engines' ({role: Fresh})."""
    if torch_fresh.error:
        text = torch_fresh.error.removeprefix(f"{ENGINE_NAME}: ")
        return _record(NOT_ARBITRATED if text.endswith(NOT_ARBITRATED) else COULD_NOT,
                       text if text.endswith(NOT_ARBITRATED) else f"could not arbitrate: {text}")
    theirs = torch_fresh.tensors["outputs"]
    ref, port = (fresh[role].tensors["outputs"] for role in ("reference", "port"))
    names = sorted(set(theirs) & set(ref) & set(port))
    if not names:
        return _record(NOT_ARBITRATED, "PyTorch computes none of this case's outputs: not arbitrated")
    pick = lambda found: {n: found[n] for n in names}  # noqa: E731
    with_ref = compare_named("output", pick(ref), pick(theirs), tol, sides=("reference", ENGINE_NAME))
    with_port = compare_named("output", pick(port), pick(theirs), tol, sides=("port", ENGINE_NAME))
    r, p = _worst(with_ref), _worst(with_port)
    agree_ref, agree_port = all(t.passed for t in with_ref), all(t.passed for t in with_port)
    on = f"on {', '.join(names)}"
    if agree_ref and not agree_port:
        text = (f"PyTorch agrees with the reference (max|diff| {_shown(r)}) and not with the port "
                f"(max|diff| {_shown(p)}) {on}: fix the port")
        return _record(REFERENCE, text, names, r, p)
    if agree_port and not agree_ref:
        text = (f"PyTorch agrees with the port (max|diff| {_shown(p)}) and not with the reference "
                f"(max|diff| {_shown(r)}) {on}: the reference changed (git log reference/)")
        return _record(PORT, text, names, r, p)
    if agree_ref:
        text = (f"PyTorch agrees with both the reference (max|diff| {_shown(r)}) and the port (max|diff| {_shown(p)}) "
                f"{on}: not arbitrated (they part within twice the tolerance, or in a tensor PyTorch does not compute)")
        return _record(BOTH, text, names, r, p)
    text = (f"PyTorch agrees with neither the reference (max|diff| {_shown(r)}) nor the port (max|diff| {_shown(p)}) "
            f"{on}: not arbitrated; check the case's config and both engines")
    return _record(NEITHER, text, names, r, p)
