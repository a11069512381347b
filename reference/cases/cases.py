"""Run one case of the catalogue and return the golden document (twin: cases.ts).

Most forward ops have a draw function (DRAWS: config, generator -> named inputs) and a compute
function (COMPUTE: named inputs, config -> named outputs). The reference draws every case's
inputs from its seed; the runner hands what it drew to the other engines (docs/protocol.md,
"Handed inputs"), and a case the request hands inputs to computes from them here too. An op
whose draws are what its cases verify (parameter init, dropout masks, data sets, training) has a
builder instead, which draws and computes in every engine, returning (inputs, outputs).

A training builder (cases_training) returns (inputs, outputs, digests, states), the states
{t: state document} the command line writes to out_dir/<id>.states/step_<t>.json, each with the
case echoed into it. A pretrained builder (cases_pretrained) also takes the request's assets
{model name: directory}."""

from . import cases_attention, cases_faults, cases_gradcheck, cases_layers, cases_lesson, cases_models, cases_pretrained, cases_training
from . import cases_lm, cases_tiled
from ..core import case_config as cc
from ..core.golden import case_document
from ..core.rng import Generator

FAMILIES = (cases_attention, cases_layers, cases_models, cases_lesson, cases_gradcheck, cases_training,
            cases_pretrained, cases_faults, cases_lm, cases_tiled)
DRAWS, COMPUTE, BUILDERS = {}, {}, {}
for _family in FAMILIES:
    DRAWS.update(getattr(_family, "DRAWS", {}))
    COMPUTE.update(getattr(_family, "COMPUTE", {}))
    BUILDERS.update(_family.BUILDERS)


def _drawn(op):
    def build(config, rng):
        inputs = DRAWS[op](config, rng)
        return inputs, COMPUTE[op](inputs, config, rng)  # rng: the forward's dropout masks, if any
    return build


BUILDERS.update({op: _drawn(op) for op in COMPUTE})


def run_case(case, assets=None, handed=None):
    """The golden document of one case {id, kind, op, seed, config}."""
    return run_case_with_states(case, assets, handed)[0]


def run_case_with_states(case, assets=None, handed=None):
    """(the golden document, {t: state document}); the states are empty unless the case trains.
    handed: the `inputs` object of the document the request names for this case, if it names one."""
    op = case.get("op")
    builder = BUILDERS.get(op)
    if builder is None:
        raise cc.CaseError(f"unknown op {op!r}; this engine knows {sorted(BUILDERS)}")
    cc.check_numbers(case.get("config", {}))
    if handed is not None and op in COMPUTE and not cc.draws_masks(case.get("config", {})):
        inputs = cc.handed_inputs(handed, case.get("id"))
        return case_document(case, inputs, COMPUTE[op](inputs, case.get("config", {}))), {}
    extra = (assets or {},) if op in cases_pretrained.BUILDERS else ()
    result = builder(case.get("config", {}), Generator(case["seed"]), *extra)
    inputs, outputs = result[0], result[1]
    digests, states = (result[2], result[3]) if len(result) == 4 else (None, {})
    doc = case_document(case, inputs, outputs, digests)
    return doc, {t: {**state, "case": case} for t, state in states.items()}
