"""Attribution inside a failing case of a composed op: which sub-layer introduces the difference
(docs/runner.md, "Attribution").

Only after the verdict, only for the failing forward cases of a traced op, on the inputs the port
was handed: the reference runs the case recording every sub-layer's output, the port runs it
twice, recording (each sub-layer on the port's own input: inherited + introduced) and fed (the
reference's output of each sub-layer handed on in place of the port's, so that each sub-layer
computes from the reference's input to it: introduced alone). Per sub-layer, in
data-flow order, max|port - reference| of its output both ways; the first sub-layer whose fed
output breaks the rule at the case's tolerance is where the fault is, and the layers after it
amplify its fed difference to the own-input difference at the model's output."""

import numpy as np

from . import advice, engines, layout
from .compare import close
from .documents import DocumentError, decode_tensor, read
from .errors import InputError

# the ops whose models call their sub-layers through the tracer in both engines (core/trace.py)
TRACED_OPS = ("encoder_block", "decoder_block", "transformer", "vit", "lesson_block", "decoder_lm")
RUNS = ("reference", "port", "fed")


def wanted(cases, entries):
    """The cases to attribute: failing forward cases of a traced op on which the engines disagree
    (not a stale golden, not an engine that could not answer)."""
    return [c for c in cases if c.kind == "forward" and c.spec.get("op") in TRACED_OPS
            and not entries[c.id]["passed"]
            and (advice.situation(entries[c.id]) or ("",))[0] in (advice.PORT_DIFFERS, advice.REFERENCE_CHANGED)]


def attribute(cases, entries, engine_list, work, timeout, tol):
    """Adds an `attribution` object to the entry of each case of wanted(); runs nothing when there
    is none. An attribution that cannot be made says why in its `error`, never failing the run."""
    cases = [c for c in wanted(cases, entries) if layout.handed(work, c.id).is_file()]
    if not cases:
        return
    by_name = {e.name: e for e in engine_list}
    if not {"reference", "port"} <= set(by_name):
        return
    specs = [c.spec for c in cases]
    handed = {c.id: str(layout.handed(work, c.id)) for c in cases}
    dirs = {run: layout.attribution_dir(work, run) for run in RUNS}
    statuses = {}
    for run, engine, trace in (
            ("reference", by_name["reference"], {c.id: "record" for c in cases}),
            ("port", by_name["port"], {c.id: "record" for c in cases}),
            ("fed", by_name["port"], {c.id: {"fed": str(layout.trace(dirs["reference"], c.id))} for c in cases})):
        try:
            statuses[run] = engines.run(engine, specs, dirs[run], timeout,
                                        extra={"inputs_from": handed, "trace": trace}).statuses
        except InputError as exc:  # an engine that cannot trace: said on every case, the verdict stands
            for c in cases:
                entries[c.id]["attribution"] = {"error": f"the {run} run of the attribution failed: {exc}"}
            return
    for c in cases:
        entry = entries[c.id]
        failed = [f"{run}: {statuses[run].get(c.id, {}).get('error', 'no status')}" for run in RUNS
                  if not statuses[run].get(c.id, {}).get("ok")]
        if failed:
            entry["attribution"] = {"error": "an engine failed the traced case (" + "; ".join(failed) + ")"}
            continue
        missing = [run for run in RUNS if not layout.trace(dirs[run], c.id).is_file()]
        if missing:
            entry["attribution"] = {"error": f"the {' and '.join(missing)} run(s) wrote no {c.id}.trace.json: that engine "
                                             "does not speak the protocol's 'trace' field (docs/protocol.md, \"Traces\")"}
            continue
        try:
            traces = {run: read(layout.trace(dirs[run], c.id)) for run in RUNS}
            entry["attribution"] = figures(traces, entry.get("tolerance") or tol)
        except (OSError, DocumentError, KeyError, TypeError) as exc:
            entry["attribution"] = {"error": f"cannot read the traces of {c.id}: {exc}"}


def _max_diff(a, b):
    """max|a - b|, or None when they cannot be compared (another shape, a NaN or an infinity)."""
    if a.shape != b.shape:
        return None
    with np.errstate(over="ignore", invalid="ignore"):
        diff = np.abs(a - b)
    return float(np.max(diff, initial=0.0)) if np.isfinite(diff).all() else None


def figures(traces, tol):
    """{"sublayers": [{name, own, fed, fed_beyond}], "culprit", "amplification", "tolerance"} of
    three trace documents {run: {"sublayers": names, "tensors": {name: tensor doc}}}; own and fed
    are max|port - reference| of the sub-layer's output, None where they cannot be compared."""
    names = traces["reference"]["sublayers"]
    outs = {run: {n: decode_tensor(traces[run]["tensors"][f"{n}.out"], f"{run} {n}.out").values for n in names}
            for run in RUNS}
    rows = []
    for n in names:
        ref = outs["reference"][n]
        own = _max_diff(outs["port"][n], ref)
        fed = _max_diff(outs["fed"][n], ref)
        beyond = not (outs["fed"][n].shape == ref.shape and close(outs["fed"][n], ref, tol).all())
        rows.append({"name": n, "own": own, "fed": fed, "fed_beyond": beyond})
    culprit = next((r for r in rows if r["fed_beyond"]), None)
    result = {"tolerance": tol, "sublayers": rows, "culprit": None, "amplification": None}
    if culprit is not None:
        result["culprit"] = culprit["name"]
        out, fed = rows[-1]["own"], culprit["fed"]
        result["amplification"] = out / fed if out is not None and fed else None
    return result
