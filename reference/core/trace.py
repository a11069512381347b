"""Sub-layer tracing, for attribution inside a failing case (twin: port_ts/src/core/trace.ts).

A traced unit is a named row of tensors: a sub-layer's forward ("<name>", its output "out"), its
backward ("<name>.backward", every gradient it returns, under the port's field names), or a stage
of a training step ("step<t>.forward" .. "step<t>.adam"). Code hands each unit's tensors to
record(name, values) and goes on with what it returns. Off (the default: no tracer) that is the
values themselves. On, the tracer keeps them; fed another engine's recorded tensors, it returns
that engine's in their place, so that the next unit computes from the other engine's input to
it and its own tensors differ from the other engine's by what the unit itself introduces. The
generator's draws stay in the same order either way.

sublayer(name, fn, *args) and backward(name, labels, fn, *args) wrap a forward and a backward
call. Names are flat, in data-flow order: scope(prefix) sets the prefix of the names that follow
(a model's loop over blocks: "enc.blk0."), scope("") clears it. untraced(fn, *args) runs fn with
tracing off (a gradient check's many loss evaluations, a training step's model).
docs/runner.md, "Attribution"."""

import numpy as np

_tracer = None  # the Tracer of the case being traced, or None (the default)


class Tracer:
    """Records every unit's tensors; fed: {"<unit>.<label>": array} handed on in place of them."""

    def __init__(self, fed=None):
        self.fed = fed
        self.prefix = ""
        self.rows = {}  # unit name -> {label: array}, in the order the units ran

    def record(self, name, values):
        name = self.prefix + name
        if name in self.rows:
            raise ValueError(f"traced unit {name!r} ran twice in one traced case; each name must be unique")
        flat = {}  # copies: the code goes on and may update an array in place
        for label, value in values.items():
            if isinstance(value, dict):  # a gradient dict: one tensor per entry, "<label>.<key>"
                flat.update({f"{label}.{key}": np.array(v, dtype=np.float64) for key, v in value.items()})
            elif value is not None:
                flat[label] = np.array(value, dtype=np.float64)
        self.rows[name] = flat
        if self.fed is None:
            return values

        def take(label):
            key = f"{name}.{label}"
            if key not in self.fed:
                raise ValueError(f"the trace fed to this case lacks {key!r}; it holds {len(self.fed)} tensors: "
                                 "trace both engines at the same version")
            return self.fed[key]

        return {label: ({key: take(f"{label}.{key}") for key in value} if isinstance(value, dict)
                        else None if value is None else take(label)) for label, value in values.items()}


def record(name, values):
    """values {label: array | {key: array} | None}, traced as unit `name` when a tracer is on: the
    same dict, with the fed engine's tensors in place when fed."""
    return values if _tracer is None else _tracer.record(name, values)


def sublayer(name, fn, *args):
    """fn(*args), its output (the first item when fn returns (out, cache)) traced as "<name>.out"."""
    result = fn(*args)
    if _tracer is None:
        return result
    out = _tracer.record(name, {"out": result[0] if isinstance(result, tuple) else result})["out"]
    return (out, *result[1:]) if isinstance(result, tuple) else out


def backward(name, labels, fn, *args):
    """fn(*args), a backward returning a tuple (or one array), each item traced under its label
    (the port's field name for it) as unit "<name>.backward"."""
    result = fn(*args)
    if _tracer is None:
        return result
    items = result if isinstance(result, tuple) else (result,)
    if len(items) != len(labels):
        raise ValueError(f"backward {name!r}: {len(labels)} labels for {len(items)} results")
    traced = _tracer.record(f"{name}.backward", dict(zip(labels, items)))
    return tuple(traced[label] for label in labels) if isinstance(result, tuple) else traced[labels[0]]


def untraced(fn, *args):
    """fn(*args) with tracing off, whatever it calls."""
    global _tracer
    saved, _tracer = _tracer, None
    try:
        return fn(*args)
    finally:
        _tracer = saved


def scope(prefix):
    """Prefix the names of the units that follow (when a tracer is on)."""
    if _tracer is not None:
        _tracer.prefix = prefix


def start(fed=None):
    """Turn tracing on for one case; returns the Tracer."""
    global _tracer
    _tracer = Tracer(fed)
    return _tracer


def stop():
    """Turn tracing off."""
    global _tracer
    _tracer = None


def document(tracer, tensor_doc):
    """The traced units as a document: {"units": [{"name", "tensors": [keys]}] in the order they
    ran, "tensors": {"<unit>.<label>": tensor_doc(array)}} (docs/protocol.md, "Traces")."""
    units, tensors = [], {}
    for name, row in tracer.rows.items():
        keys = [f"{name}.{label}" for label in row]
        units.append({"name": name, "tensors": keys})
        tensors.update({key: tensor_doc(row[label]) for key, label in zip(keys, row)})
    return {"units": units, "tensors": tensors}
