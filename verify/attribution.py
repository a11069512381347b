"""Attribution inside a failing case: which traced unit introduces the difference (docs/runner.md,
"Attribution").

Only after the verdict, only for the failing cases it can trace, on what the port was handed:
- a forward case of a composed op: its sub-layers, in data-flow order (from its handed inputs);
- a gradient check of a composed model: its forward's sub-layers, then their backwards in the
  order the backward runs them (from its handed inputs and parameters);
- a pretrained case of a traced encoder: its sub-layers, in data-flow order (from the case's
  token ids and the model the request's assets name);
- a training run: its first failing replay segment, rerun from the reference's state at its
  first step, stage by stage: step<t>.forward (the loss), .backward (the gradients), .clipping
  (the clipped gradients and their norm), .adam (the parameters and both moments).
The reference runs the case recording every unit's tensors; the port runs it twice, recording
(each unit on the port's own input: inherited + introduced) and fed (the reference's tensors of
each unit handed on in place of the port's, so that each unit computes from the reference's
input to it: introduced alone). Per unit, max|port - reference| over its tensors both ways; the
first unit whose fed tensors break the rule at the case's tolerance is where the fault is, and
the units after it take its fed difference to the own-input difference of the last unit."""

from . import advice, engines, layout
from .compare import compare_tensor
from .documents import DocumentError, decode_tensor, read
from .errors import InputError

# the ops whose models trace their sub-layers in both engines (core/trace.py): forward cases, and
# the gradient checks whose forward and backward are traced
TRACED_OPS = ("encoder_block", "decoder_block", "transformer", "vit", "lesson_block", "decoder_lm")
TRACED_GRADCHECKS = ("gradcheck_transformer", "gradcheck_vit", "gradcheck_lesson_block", "gradcheck_decoder_lm")
# the pretrained ops whose model traces its sub-layers in both engines: rerun from the case itself
# and the request's assets (a pretrained case draws nothing, so it has no handed inputs)
TRACED_PRETRAINED = ("bert_encoder",)
RUNS = ("reference", "port", "fed")


def first_failing_segment(entry):
    """[t0, t1] of a training case's first failing replay segment, or None."""
    return next((r["segment"] for r in entry.get("replay", []) if not r["passed"] and r.get("segment")), None)


def _traceable(case, entry):
    if case.kind == "forward":
        return case.spec.get("op") in TRACED_OPS
    if case.kind == "gradcheck":
        return case.spec.get("op") in TRACED_GRADCHECKS
    if case.kind == "pretrained":
        return case.spec.get("op") in TRACED_PRETRAINED
    return case.kind == "training" and first_failing_segment(entry) is not None


def wanted(cases, entries):
    """The cases to attribute: failing cases it can trace on which the engines disagree (not a
    stale golden, not an engine that could not answer)."""
    return [c for c in cases if _traceable(c, entries[c.id]) and advice.engines_disagree(entries[c.id])]


def _request(cases, entries, work):
    """The request fields that rerun the cases as the port first ran them: the handed inputs, and
    a training case's first failing segment from the reference's state."""
    handed, replay = {}, {}
    states = layout.engine_dir(work, "reference")
    for c in cases:
        if c.kind == "training":
            replay[c.id] = {"from_dir": str(layout.states(states, c.id)), "segments": [first_failing_segment(entries[c.id])],
                            "evaluate": [], "free_run": False}
        elif c.kind != "pretrained":
            handed[c.id] = str(layout.handed(work, c.id))
    return {"inputs_from": handed, "replay": replay}


def attribute(cases, entries, engine_list, work, timeout, tol, assets=None):
    """Adds an `attribution` object to the entry of each case of wanted(); runs nothing when there
    is none. assets: the request's {model name: directory}, for the pretrained cases. An
    attribution that cannot be made says why in its `error`, never failing the run."""
    cases = [c for c in wanted(cases, entries)
             if c.kind in ("training", "pretrained") or layout.handed(work, c.id).is_file()]
    if not cases:
        return
    by_name = {e.name: e for e in engine_list}
    if not {"reference", "port"} <= set(by_name):
        return
    specs = [c.spec for c in cases]
    request = _request(cases, entries, work)
    if assets:
        request["assets"] = assets
    dirs = {run: layout.attribution_dir(work, run) for run in RUNS}
    statuses = {}
    for run, engine, trace in (
            ("reference", by_name["reference"], {c.id: "record" for c in cases}),
            ("port", by_name["port"], {c.id: "record" for c in cases}),
            ("fed", by_name["port"], {c.id: {"fed": str(layout.trace(dirs["reference"], c.id))} for c in cases})):
        try:
            statuses[run] = engines.run(engine, specs, dirs[run], timeout, extra=dict(request, trace=trace)).statuses
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
        except (OSError, DocumentError, KeyError, TypeError, ValueError) as exc:
            entry["attribution"] = {"error": f"cannot read the traces of {c.id}: {exc}"}
            continue
        if c.kind == "training":
            entry["attribution"].update(segment=first_failing_segment(entry), **_one_step(entry["attribution"]))


def _unit_row(name, keys, tensors, tol):
    """{name, own, fed, beyond}: own and fed the greatest max|port - reference| over the unit's
    tensors (None where one cannot be compared: another shape, a NaN, an infinity); beyond the
    labels of its tensors that break the rule fed (a backward's "dx", "grads.W1": which gradient)."""
    own = fed = 0.0
    beyond = []
    for key in keys:
        label = key[len(name) + 1:]
        ref = decode_tensor(tensors["reference"][key], f"reference {key}")
        found = {run: compare_tensor(key, "output", ref, decode_tensor(tensors[run][key], f"{run} {key}"), tol)
                 for run in ("port", "fed")}
        own = None if own is None or found["port"].max_abs is None or found["port"].nonfinite else max(own, found["port"].max_abs)
        f = found["fed"]
        fed = None if fed is None or f.max_abs is None or f.nonfinite else max(fed, f.max_abs)
        if not f.passed:
            beyond.append(label)
    return {"name": name, "own": own, "fed": fed, "beyond": beyond}


def figures(traces, tol):
    """{"sublayers": [unit rows], "culprit", "amplification", "last", "tolerance"} of three trace documents
    {run: {"units": [{"name", "tensors": [keys]}], "tensors": {key: tensor doc}}}."""
    tensors = {run: traces[run]["tensors"] for run in RUNS}
    rows = [_unit_row(u["name"], u["tensors"], tensors, tol) for u in traces["reference"]["units"]]
    culprit = next((r for r in rows if r["beyond"]), None)
    result = {"tolerance": tol, "sublayers": rows, "culprit": None, "amplification": None,
              "last": {"name": rows[-1]["name"], "own": rows[-1]["own"]} if rows else None}
    if culprit is not None:
        result["culprit"] = culprit["name"]
        out, fed = rows[-1]["own"], culprit["fed"]
        result["amplification"] = out / fed if out is not None and fed else None
    return result


def _one_step(attribution):
    """A training attribution keeps the rows of one step: the culprit's (else the segment's last),
    and says how many steps before it agreed at every stage."""
    rows = attribution["sublayers"]
    if not rows:
        return {}
    step = (attribution["culprit"] or rows[-1]["name"]).split(".")[0]
    kept = [r for r in rows if r["name"].split(".")[0] == step]
    first = rows.index(kept[0])
    return {"sublayers": kept, "steps_before": len({r["name"].split(".")[0] for r in rows[:first]})}
