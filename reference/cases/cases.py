"""Run one case of the catalogue: draw its inputs from its seed, compute, and return the golden
document (twin: cases.ts). The builders live in one module per family.

A builder returns (inputs, outputs); a training builder (cases_training) returns
(inputs, outputs, digests, states), the states {t: state document} the command line writes to
out_dir/<id>.states/step_<t>.json, each with the case echoed into it. A pretrained builder
(cases_pretrained) also takes the request's assets {model name: directory}."""

from . import cases_attention, cases_faults, cases_gradcheck, cases_layers, cases_lesson, cases_models, cases_pretrained, cases_training
from . import cases_lm, cases_tiled
from ..core.case_config import CaseError, check_numbers
from ..core.golden import case_document
from ..core.rng import Generator

BUILDERS = {}
for _family in (cases_attention, cases_layers, cases_models, cases_lesson, cases_gradcheck, cases_training,
                cases_pretrained, cases_faults, cases_lm, cases_tiled):
    BUILDERS.update(_family.BUILDERS)


def run_case(case, assets=None):
    """The golden document of one case {id, kind, op, seed, config}."""
    return run_case_with_states(case, assets)[0]


def run_case_with_states(case, assets=None):
    """(the golden document, {t: state document}); the states are empty unless the case trains."""
    builder = BUILDERS.get(case.get("op"))
    if builder is None:
        raise CaseError(f"unknown op {case.get('op')!r}; this engine knows {sorted(BUILDERS)}")
    extra = (assets or {},) if case.get("op") in cases_pretrained.BUILDERS else ()
    check_numbers(case.get("config", {}))
    result = builder(case.get("config", {}), Generator(case["seed"]), *extra)
    inputs, outputs = result[0], result[1]
    digests, states = (result[2], result[3]) if len(result) == 4 else (None, {})
    doc = case_document(case, inputs, outputs, digests)
    return doc, {t: {**state, "case": case} for t, state in states.items()}
