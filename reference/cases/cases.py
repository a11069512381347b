"""Run one case of the catalogue and return the golden document (twin: cases.ts).

Every forward op and every gradient check has a draw function (DRAWS: config, generator -> named
inputs, or (inputs, parameters) for a gradient check) and a compute function (COMPUTE: inputs,
config, generator[, parameters] -> named outputs). The reference draws a case's inputs from its
seed and hands them, with the generator's position after the draws, to the other engines
(docs/protocol.md, "Handed inputs"): the dropout masks and gradcheck's own draws are then made
by each engine from that position on. A case handed its inputs computes from them here too. An op
whose draws are what its cases verify (data sets, training) has a builder instead, which draws
and computes in every engine, returning (inputs, outputs).

A training builder (cases_training) returns (inputs, outputs, digests, states), the states
{t: state document} the command line writes to out_dir/<id>.states/step_<t>.json, each with the
case echoed into it. A pretrained builder (cases_pretrained) also takes the request's assets
{model name: directory}."""

from . import cases_attention, cases_faults, cases_gradcheck, cases_layers, cases_lesson, cases_models, cases_pretrained, cases_training
from . import cases_lm, cases_tiled
from ..core import case_config as cc
from ..core.golden import case_document, tensor_doc
from ..core.rng import Generator

FAMILIES = (cases_attention, cases_layers, cases_models, cases_lesson, cases_gradcheck, cases_training,
            cases_pretrained, cases_faults, cases_lm, cases_tiled)
DRAWS, COMPUTE, BUILDERS = {}, {}, {}
for _family in FAMILIES:
    DRAWS.update(getattr(_family, "DRAWS", {}))
    COMPUTE.update(getattr(_family, "COMPUTE", {}))
    BUILDERS.update(getattr(_family, "BUILDERS", {}))


def draw(op, config, rng):
    """(inputs, parameters or None) of a case of an op of COMPUTE, drawn from rng."""
    drawn = DRAWS[op](config, rng)
    return drawn if isinstance(drawn, tuple) else (drawn, None)


def compute(op, inputs, params, config, rng):
    """The outputs of an op of COMPUTE; rng stands where the inputs' draws ended."""
    return COMPUTE[op](inputs, config, rng, *(() if params is None else (params,)))


def build(op, config, rng):
    """(inputs, outputs) of a case of an op of COMPUTE, drawn and computed from rng."""
    inputs, params = draw(op, config, rng)
    return inputs, compute(op, inputs, params, config, rng)


def run_case(case, assets=None, handed=None):
    """The golden document of one case {id, kind, op, seed, config}."""
    return run_case_with_states(case, assets, handed)[0]


def run_case_with_states(case, assets=None, handed=None):
    """(the golden document, {t: state document}, the handed document or None): the states are
    empty unless the case trains; the handed document {inputs, parameters?, position} is what the
    runner may hand the other engines, for a case this engine drew the inputs of. handed: the
    document the request names for this case, if it names one."""
    op, config = case.get("op"), case.get("config", {})
    if op not in COMPUTE and op not in BUILDERS:
        raise cc.CaseError(f"unknown op {op!r}; this engine knows {sorted([*COMPUTE, *BUILDERS])}")
    cc.check_numbers(config)
    if op in COMPUTE:
        rng = Generator(case["seed"])
        if handed is None:
            inputs, params = draw(op, config, rng)
        else:
            inputs, params, rng.counter = cc.handed_document(handed, case.get("id"))
        position = rng.counter
        doc = case_document(case, inputs, compute(op, inputs, params, config, rng))
        if handed is not None:
            return doc, {}, None
        given = {"inputs": doc["inputs"], "position": position}
        if params is not None:
            given["parameters"] = [[name, tensor_doc(t)] for name, t in params.items()]  # in order: gradcheck's
        return doc, {}, given
    extra = (assets or {},) if op in cases_pretrained.BUILDERS else ()
    result = BUILDERS[op](config, Generator(case["seed"]), *extra)
    inputs, outputs = result[0], result[1]
    digests, states = (result[2], result[3]) if len(result) == 4 else (None, {})
    doc = case_document(case, inputs, outputs, digests)
    return doc, {t: {**state, "case": case} for t, state in states.items()}, None
