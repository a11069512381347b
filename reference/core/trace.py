"""Sub-layer tracing, for attribution inside a failing case (twin: port_ts/src/core/trace.ts).

A composed model calls each of its sub-layers through sublayer(name, fn, *args). Off (the
default: no tracer) that is fn(*args) after one check. On, the tracer keeps each sub-layer's
output as "<name>.out" (the first item when fn returns (out, cache)); fed another engine's
recorded outputs, it also hands on that engine's output in place of its own, so that every
sub-layer computes from the other engine's input to it (where the model routes its sub-layers
as that engine does) and its own output differs from the other engine's by what the sub-layer
itself introduces. The generator's draws stay in the same order either way.

Names are flat, in data-flow order: scope(prefix) sets the prefix of the names that follow (a
model's loop over blocks: "enc.blk0."), scope("") clears it. docs/runner.md, "Attribution"."""

_tracer = None  # the Tracer of the case being traced, or None (the default)


class Tracer:
    """Records every sub-layer's output; fed: {name: array} handed on in place of it."""

    def __init__(self, fed=None):
        self.fed = fed
        self.prefix = ""
        self.tensors = {}  # "<name>.out" -> array, in the order the sub-layers ran

    def call(self, name, fn, args):
        key = f"{self.prefix}{name}.out"
        if key in self.tensors:
            raise ValueError(f"sub-layer {key[:-4]!r} ran twice in one traced case; each name must be unique")
        result = fn(*args)
        self.tensors[key] = result[0] if isinstance(result, tuple) else result
        if self.fed is None:
            return result
        if key not in self.fed:
            raise ValueError(f"the trace fed to this case lacks {key!r}; it holds {len(self.fed)} tensors: "
                             "trace both engines at the same version")
        return (self.fed[key], *result[1:]) if isinstance(result, tuple) else self.fed[key]


def sublayer(name, fn, *args):
    """fn(*args), traced as sub-layer `name` when a tracer is on."""
    if _tracer is None:
        return fn(*args)
    return _tracer.call(name, fn, args)


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
