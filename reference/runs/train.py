"""The training loop of the baked runs, their checkpoints and state documents (twin:
port_ts/src/runs/train.ts; the contract is docs/training.md).

train(params, names, step_fn, steps, lr, clip, checkpoint_every, state=None) -> (history, checkpoints)
    params            {name: float64 array}, updated in place (the dict's entries are replaced)
    names             the model's parameter order: every sum, loop and digest walks it
    step_fn(params, t) -> (loss, grads) for the batch of step t (a deterministic function of
                      the data and t); grads keyed by the same names
    steps             the last step to run: a fresh run does steps 1..steps, a run resumed from
                      a state at step t0 does t0+1..steps
    lr, clip          Adam's learning rate; the clipping threshold theta (None: never clip)
    checkpoint_every  K: the state is kept at every step t with t % K == 0, at the starting
                      step when it is such a multiple (t = 0 for a fresh run) and at the last
    state             the optimiser state to resume from (optim.adam_init's form), or None
  Each step t: (loss, grads) = step_fn(params, t); n = clip_gradients(grads) (the norm before
  clipping; global_norm when clip is None); record loss and n; adam_step. So the loss and n of
  step t are those of the parameters before update t. A traced run (core/trace.py) traces each
  step's four stages: step<t>.forward (loss), .backward (grads), .clipping (grads, norm) and
  .adam (params, m, v).
  history = {"loss": [...], "grad_norm": [...]} for steps t0+1..steps, in order;
  checkpoints = {t: (params copy, state copy)}.

A state document is a golden-layout document (docs/goldens.md) with empty inputs, outputs
"param.<name>", "m.<name>", "v.<name>" and "opt" = [t, b1t, b2t], and digests {"state": hex}.
Its digest is the SHA-256 of the little-endian float64 bytes of each parameter (names order),
then each m, then each v, then [t, b1t, b2t]; with no optimiser state, the parameters alone.
"""

import numpy as np

from ..core.digest import float64_digest
from ..core.golden import ENGINE, SCHEMA_VERSION, tensor_doc
from .optim import adam_init, adam_step, clip_gradients, global_norm
from ..core.rng import GENERATOR
from ..core.trace import record, untraced


def copy_state(params, names, state):
    """An independent copy (params, state) of a run's state."""
    return ({name: np.array(params[name], dtype=np.float64) for name in names},
            {"t": state["t"], "b1t": state["b1t"], "b2t": state["b2t"],
             "m": {name: np.array(state["m"][name]) for name in names},
             "v": {name: np.array(state["v"][name]) for name in names}})


def train(params, names, step_fn, steps, lr, clip, checkpoint_every, state=None):
    """Adam (with the book's clipping) from the state (or step 0) to step `steps`; see the module doc."""
    if not (isinstance(checkpoint_every, int) and checkpoint_every >= 1):
        raise ValueError(f"train: checkpoint_every must be a positive integer, got {checkpoint_every!r}")
    if state is None:
        state = adam_init(params, names)
    start = state["t"]
    if not (isinstance(steps, int) and steps >= start):
        raise ValueError(f"train: steps must be an integer >= the state's step {start}, got {steps!r}")
    history = {"loss": [], "grad_norm": []}
    checkpoints = {}
    if start % checkpoint_every == 0:
        checkpoints[start] = copy_state(params, names, state)
    for t in range(start + 1, steps + 1):
        loss, grads = untraced(step_fn, params, t)  # a traced run traces its steps' stages, not the model
        loss = float(record(f"step{t}.forward", {"loss": np.array(loss)})["loss"])
        grads = record(f"step{t}.backward", {"grads": {name: grads[name] for name in names}})["grads"]
        grads = dict(grads)  # clipping replaces entries of this dict only
        n = global_norm(grads, names) if clip is None else clip_gradients(grads, names, clip)
        clipped = record(f"step{t}.clipping", {"grads": grads, "norm": np.array(n)})
        grads, n = clipped["grads"], float(clipped["norm"])
        history["loss"].append(loss)
        history["grad_norm"].append(n)
        adam_step(params, grads, names, state, lr)
        after = record(f"step{t}.adam", {"params": {name: params[name] for name in names}, "m": state["m"], "v": state["v"]})
        params.update(after["params"])
        state["m"], state["v"] = dict(after["m"]), dict(after["v"])
        if t % checkpoint_every == 0 or t == steps:
            checkpoints[t] = copy_state(params, names, state)
    return history, checkpoints


def state_digest(params, names, state=None):
    """SHA-256 (hex) of the state's little-endian float64 bytes; the parameters alone when
    state is None (the initial-parameter digest)."""
    parts = [params[name] for name in names]
    if state is not None:
        parts += [state["m"][name] for name in names]
        parts += [state["v"][name] for name in names]
        parts.append([state["t"], state["b1t"], state["b2t"]])
    return float64_digest(parts)


def state_document(params, names, state):
    """The state as a golden-layout document (no "case": cases.py echoes the case into it)."""
    outputs = {}
    for name in names:
        outputs[f"param.{name}"] = tensor_doc(params[name])
        outputs[f"m.{name}"] = tensor_doc(state["m"][name])
        outputs[f"v.{name}"] = tensor_doc(state["v"][name])
    outputs["opt"] = tensor_doc(np.array([state["t"], state["b1t"], state["b2t"]], dtype=np.float64))
    return {"schema_version": SCHEMA_VERSION, "engine": dict(ENGINE), "generator": GENERATOR,
            "inputs": {}, "outputs": outputs, "digests": {"state": state_digest(params, names, state)}}


def state_from_document(doc, names):
    """(params, state) read back from a state document; checks every tensor is there and the
    digest, when the document has one, matches what was read."""
    outputs = doc.get("outputs", {})

    def read(key):
        if key not in outputs:
            raise ValueError(f"state document: missing tensor {key!r}; it has {sorted(outputs)}")
        t = outputs[key]
        return np.array([float(x) for x in t["data"]], dtype=np.float64).reshape(t["shape"])

    params = {name: read(f"param.{name}") for name in names}
    opt = read("opt")
    if opt.shape != (3,) or opt[0] != int(opt[0]) or opt[0] < 0:
        raise ValueError(f"state document: opt must be [t, b1t, b2t] with t a step count, got {opt.tolist()}")
    state = {"t": int(opt[0]), "b1t": float(opt[1]), "b2t": float(opt[2]),
             "m": {name: read(f"m.{name}") for name in names},
             "v": {name: read(f"v.{name}") for name in names}}
    want = doc.get("digests", {}).get("state")
    if want is not None and want != state_digest(params, names, state):
        raise ValueError(f"state document of step {state['t']}: its digest {want} does not match its tensors")
    return params, state
