"""Training cases (kind "training"): the baked runs of docs/training.md (twin: casesTraining.ts).

Every run is made from its case's config and seed alone by a setup function in RUNS,
setup(config, rng) -> run, a dict:
    names             the parameter order
    params            the initial parameters (drawn first from rng, then the data)
    step_fn(params, t) -> (loss, grads) for the batch of step t
    inputs            tensors the golden records as inputs (the data, or a small part of it)
    steps, lr, clip, checkpoint_every   the schedule (config keys of the same names)
    evaluate(params) -> outputs: what follows from the final parameters alone (metrics,
                      decodes, attention maps); also run on the reference's final state by the
                      port (evaluate_state, docs/training.md "Evaluation")
    report(params, history, checkpoints) -> outputs: optional, what depends on the way there
                      (a checkpoint's snapshot, a per-step record of the run's own)
    digests           optional {name: hex} of the run's own (e.g. its data sets), copied into
                      the golden's digests
The builder trains it (train.train) and returns (inputs, outputs, digests, states):
    outputs   loss (steps,), grad_norm (steps,), checkpoint_steps int64 (C,), then evaluate's and
              the report's
    digests   init_params (parameters before step 1), the run's own, and state.<t> for each
              checkpoint t
    states    {t: state document} (train.state_document; cases.py echoes the case into each)
replay_segment(case, state_doc, t1) rebuilds the run from the case, loads the state of step t0
from the document and runs steps t0+1..t1: the state document at t1. evaluate_state(case,
state_doc) rebuilds the run and evaluates the state's parameters: evaluate's outputs.
"""

import numpy as np

from ..core import case_config as cc
from ..runs.alignment_run import alignment_setup
from ..runs.garments import vit_setup
from ..runs.reversal import reversal_setup
from ..runs.sort_run import sort_setup
from ..core.rng import Generator
from ..runs.train import state_digest, state_document, state_from_document, train


RUNS = {
    "train_alignment": alignment_setup,  # alignment_run.py
    "train_reversal": reversal_setup,  # reversal.py
    "train_vit": vit_setup,  # garments.py
    "train_sort": sort_setup,  # sort_run.py
}


def _setup(case):
    setup = RUNS.get(case.get("op"))
    if setup is None:
        raise cc.CaseError(f"unknown training op {case.get('op')!r}; this engine knows {sorted(RUNS)}")
    return setup(case.get("config", {}), Generator(case["seed"]))


def _builder(setup):
    def build(config, rng):
        run = setup(config, rng)
        names, params = run["names"], run["params"]
        digests = {"init_params": state_digest(params, names), **run.get("digests", {})}
        history, checkpoints = train(params, names, run["step_fn"], run["steps"], run["lr"], run["clip"],
                                     run["checkpoint_every"])
        outputs = {
            "loss": np.array(history["loss"]),
            "grad_norm": np.array(history["grad_norm"]),
            "checkpoint_steps": np.array(sorted(checkpoints), dtype=np.int64),
            **run["evaluate"](params),
            **(run["report"](params, history, checkpoints) if "report" in run else {}),
        }
        states = {}
        for t, (p, s) in sorted(checkpoints.items()):
            digests[f"state.{t}"] = state_digest(p, names, s)
            states[t] = state_document(p, names, s)
        return run["inputs"], outputs, digests, states

    return build


def replay_segment(case, state_doc, t1):
    """Run the case's steps t0+1..t1 from the state document of step t0: the state document at t1
    (with the case echoed)."""
    run = _setup(case)
    params, state = state_from_document(state_doc, run["names"])
    if not (isinstance(t1, int) and state["t"] < t1 <= run["steps"]):
        raise cc.CaseError(f"replay of {case.get('id')!r}: segment [{state['t']}, {t1!r}] must end after its "
                           f"start and at most at the run's last step {run['steps']}")
    train(params, run["names"], run["step_fn"], t1, run["lr"], run["clip"], run["checkpoint_every"], state)
    return {**state_document(params, run["names"], state), "case": case}


def evaluate_state(case, state_doc):
    """The run's evaluate() at the parameters of a state document (the reference's final state,
    for the port): what the site shows of the baked run."""
    run = _setup(case)
    params, _ = state_from_document(state_doc, run["names"])
    return run["evaluate"](params)


BUILDERS = {op: _builder(setup) for op, setup in RUNS.items()}
