"""Run one case of the catalogue: draw its inputs from its seed, compute, and return the golden
document (twin: cases.ts). The builders live in one module per family."""

from . import cases_attention, cases_gradcheck, cases_layers, cases_lesson, cases_models
from .case_config import CaseError
from .golden import case_document
from .rng import Generator

BUILDERS = {}
for _family in (cases_attention, cases_layers, cases_models, cases_lesson, cases_gradcheck):
    BUILDERS.update(_family.BUILDERS)


def run_case(case):
    """The golden document of one case {id, kind, op, seed, config}."""
    builder = BUILDERS.get(case.get("op"))
    if builder is None:
        raise CaseError(f"unknown op {case.get('op')!r}; this engine knows {sorted(BUILDERS)}")
    inputs, outputs = builder(case.get("config", {}), Generator(case["seed"]))
    return case_document(case, inputs, outputs)
