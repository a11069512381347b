"""Sub-layer tracing, for attribution inside a failing case (twin: port_ts/src/core/trace.ts).

A composed model calls each of its sub-layers through sublayer(name, fn, n, *args), its data
inputs the first n arguments (the rest, parameters and options, pass through). Off (the default:
no tracer) that is fn(*args) after one check. On, the tracer keeps each sub-layer's data inputs
as "<name>.in.<k>" (k < n: the argument's position) and its output ("<name>.out",
the first item when fn returns (out, cache)); fed, it first replaces those inputs by another
engine's recorded ones, so that every sub-layer's output differs from that engine's by what the
sub-layer itself introduces. The generator's draws stay in the same order either way.

Names are flat, in data-flow order: scope(prefix) sets the prefix of the names that follow (a
model's loop over blocks: "enc.blk0."), scope("") clears it. docs/runner.md, "Attribution"."""

import numpy as np

_tracer = None  # the Tracer of the case being traced, or None (the default)


class Tracer:
    """Records every sub-layer's inputs and output; fed: {name: array} replaces the inputs first."""

    def __init__(self, fed=None):
        self.fed = fed
        self.prefix = ""
        self.tensors = {}  # name -> array, in the order the sub-layers ran

    def call(self, name, fn, n, args):
        name = self.prefix + name
        if f"{name}.out" in self.tensors:
            raise ValueError(f"sub-layer {name!r} ran twice in one traced case; each name must be unique")
        args = list(args)
        for k in range(n):
            key = f"{name}.in.{k}"
            if self.fed is not None:
                if key not in self.fed:
                    raise ValueError(f"the trace fed to this case lacks {key!r}; it holds "
                                     f"{len(self.fed)} tensors: trace both engines at the same version")
                args[k] = self.fed[key]
            self.tensors[key] = np.asarray(args[k], dtype=np.float64)
        result = fn(*args)
        self.tensors[f"{name}.out"] = result[0] if isinstance(result, tuple) else result
        return result


def sublayer(name, fn, n, *args):
    """fn(*args), traced as sub-layer `name` of data inputs args[:n] when a tracer is on."""
    if _tracer is None:
        return fn(*args)
    return _tracer.call(name, fn, n, args)


def scope(prefix):
    """Prefix the names of the sub-layers that follow (when a tracer is on)."""
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
