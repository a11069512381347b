"""The reference's case configs: every draw and builder rejects a malformed count or rate with a
CaseError naming the key, before it computes anything, as the port's builders do (twin:
port_ts/test/core/caseConfig.test.ts; both read port_ts/test/small-configs.json). true is no count in
either engine, though Python's bool is an int."""

import json
import math
import re
from pathlib import Path

import pytest

from reference.core.case_config import CaseError, positive_int, positive_number
from reference.cases.cases import run_case, run_case_with_states

ROOT = Path(__file__).resolve().parent.parent
SHARED = json.loads((ROOT / "port_ts" / "test" / "small-configs.json").read_text())
BASE = SHARED["cases"]
FLOAT_KEYS = {"lr", "clip"}  # numbers that may happen to be whole (clip 1.0)


def _is_count(v):
    return isinstance(v, int) and not isinstance(v, bool) and v >= 1


COUNTS = [(base, key) for base in BASE for key, value in base.get("config", {}).items()
          if _is_count(value) and key not in FLOAT_KEYS]


@pytest.mark.parametrize("base", BASE, ids=[b["op"] for b in BASE])
def test_the_small_config_is_valid(base):
    assert isinstance(run_case(base), dict)


@pytest.mark.parametrize("base, key", COUNTS, ids=[f"{b['op']}.{k}" for b, k in COUNTS])
@pytest.mark.parametrize("bad", [0, -1, 2.5, "3", True])
def test_a_bad_count_is_named(base, key, bad):
    with pytest.raises(CaseError, match=rf"\b{re.escape(key)}\b"):
        run_case({**base, "config": {**base["config"], key: bad}})


@pytest.mark.parametrize("base", [b for b in BASE if b["kind"] == "training"], ids=lambda b: b["op"])
@pytest.mark.parametrize("key", ["lr", "clip"])
@pytest.mark.parametrize("bad", [0, -0.5, "0.1", True])
def test_a_bad_rate_is_named(base, key, bad):
    with pytest.raises(CaseError, match=rf"'{key}' must be a positive number, got {re.escape(repr(bad))}"):
        run_case({**base, "config": {**base["config"], key: bad}})


def test_the_helpers_say_what_was_expected_and_found():
    assert positive_int({"n": 3}, "n") == 3
    assert positive_int({}, "n", 4) == 4
    with pytest.raises(CaseError, match=r"^config 'n' must be a positive integer, got 0$"):
        positive_int({"n": 0}, "n")
    with pytest.raises(CaseError, match=r"^config 'n' must be a positive integer, got True$"):
        positive_int({"n": True}, "n")
    assert positive_number({"lr": 1}, "lr") == 1.0 and isinstance(positive_number({"lr": 1}, "lr"), float)
    with pytest.raises(CaseError, match=r"^config 'lr' must be a positive number, got -0\.5$"):
        positive_number({"lr": -0.5}, "lr")


def test_a_drawn_shape_says_what_is_allowed():
    with pytest.raises(CaseError, match=r"config 'shape' must be \[B, Q, K\] or \[B, H, Q, K\], got \[2, 3\]"):
        run_case({"id": "t", "kind": "forward", "op": "masked_softmax", "seed": 1, "config": {"shape": [2, 3]}})


def test_handed_inputs_are_read_back_exactly_or_refused():
    """A case handed inputs (docs/protocol.md) computes from them; a malformed document is a CaseError."""
    case = {"id": "t", "kind": "forward", "op": "layer_norm", "seed": 1, "config": {}}
    x = {"dtype": "float64", "shape": [1, 2], "data": [1, "NaN"]}
    ones, zeros = {"dtype": "float64", "shape": [2], "data": [1, 1]}, {"dtype": "float64", "shape": [2], "data": [0, 0]}
    doc = run_case(case, handed={"inputs": {"x": x, "gamma": ones, "beta": zeros}, "position": 0})
    assert doc["inputs"]["x"]["data"][0] == 1.0 and math.isnan(doc["inputs"]["x"]["data"][1]) and sorted(doc["outputs"]) == ["mean", "out", "rstd"]
    with pytest.raises(CaseError, match=r"^the handed inputs lack \[gamma, beta\]; they hold \[x\]$"):
        run_case(case, handed={"inputs": {"x": x}, "position": 0})
    for broken, says in (({**x, "data": [1]}, "without a shape and as many items"), ({**x, "dtype": "float32"}, "dtype"),
                         ({**x, "data": [1, "nan"]}, "neither a number nor")):
        with pytest.raises(CaseError, match=says):
            run_case(case, handed={"inputs": {"x": broken, "gamma": ones, "beta": zeros}, "position": 0})
    for position in (None, -1, 2.5, "3", True):
        with pytest.raises(CaseError, match=r"^the document handed to 't' needs 'position', the generator's counter"):
            run_case(case, handed={"inputs": {"x": x, "gamma": ones, "beta": zeros}, "position": position})


def test_a_handed_case_resumes_the_stream_where_the_draws_ended():
    """Handed what it drew itself, with the position after the draws, an engine writes the same
    document for a case whose forward draws dropout masks and for a gradient check."""
    for case in ({"id": "d", "kind": "forward", "op": "dropout", "seed": 3, "config": {"shape": [4, 5], "p": 0.5}},
                 {"id": "g", "kind": "gradcheck", "op": "gradcheck_rope", "seed": 4,
                  "config": {"lead": [1], "Q": 2, "K": 3, "D": 2, "V": 2, "full_max": 4, "samples": 2, "directions": 1}}):
        doc, _, given = run_case_with_states(case)
        assert json.loads(json.dumps(run_case(case, handed=json.loads(json.dumps(given))))) == json.loads(json.dumps(doc))
        moved = dict(given, position=given["position"] + 1)
        assert run_case(case, handed=moved)["outputs"] != doc["outputs"]  # the position is what the masks and checks follow


@pytest.mark.parametrize("bad", SHARED["bad_numbers"], ids=lambda b: f"{b['op']}.{next(iter(b['set']))}")
def test_a_number_that_is_not_finite_is_refused(bad):
    """small-configs.json's bad numbers: 1e400 (Infinity after parsing), "NaN", true."""
    base = next(b for b in BASE if b["op"] == bad["op"])
    with pytest.raises(CaseError) as caught:
        run_case({**base, "config": {**base["config"], **bad["set"]}})
    assert str(caught.value) == bad["error"]
