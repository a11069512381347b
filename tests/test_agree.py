"""expect.agree (docs/runner.md, "Two ways of the same maths"): two outputs of one engine that
compute the same maths in two ways are held to the rule in each engine, reported bit-identical
or within the tolerance with the ULP figure, and a disagreement fails the case with or without
--bitwise; end to end, the tiled cases pass --bitwise with their agree checks within the
tolerance, and the KV cache's bit-identical. (A port whose online softmax forgets the rescale fails
them: the witness of fault port.tiled.missing_rescale, tests/test_faults.py.)"""

import json
import math

import numpy as np

from verify.compare import Tensor
from verify.expectations import agree_checks
from helpers import run_verify


def t(values, dtype="float64"):
    return Tensor(dtype, np.asarray(values, dtype=np.float64))


EXPECT = {"agree": {"out": "plain.out"}}


def test_bit_identical_within_and_beyond_the_tolerance():
    same = agree_checks("port", {"out": t([1.0, 2.0]), "plain.out": t([1.0, 2.0])}, EXPECT, 1e-6)
    assert [c["passed"] for c in same] == [True] and same[0]["detail"] == "bit-identical (2 elements)"
    close = agree_checks("port", {"out": t([1.0, math.nextafter(2.0, 3.0)]), "plain.out": t([1.0, 2.0])}, EXPECT, 1e-6)
    assert close[0]["passed"] and "within the tolerance" in close[0]["detail"] and "max 1 ULP" in close[0]["detail"]
    assert close[0]["value"] == 1 and close[0]["name"] == "agree out" and close[0]["required"] == "always"
    far = agree_checks("reference", {"out": t([1.0, 2.1]), "plain.out": t([1.0, 2.0])}, EXPECT, 1e-6)
    assert not far[0]["passed"] and "1 / 2 elements differ beyond the tolerance" in far[0]["detail"]


def test_integers_missing_outputs_and_shapes():
    tokens = {"agree": {"cached.tokens": "full.tokens"}}
    ints = agree_checks("port", {"cached.tokens": t([3, 1], "int64"), "full.tokens": t([3, 2], "int64")}, tokens, 1e-6)
    assert not ints[0]["passed"]
    missing = agree_checks("port", {"out": t([1.0])}, EXPECT, 1e-6)
    assert not missing[0]["passed"] and missing[0]["detail"] == "no such output: plain.out"
    shape = agree_checks("port", {"out": t([1.0]), "plain.out": t([1.0, 2.0])}, EXPECT, 1e-6)
    assert not shape[0]["passed"] and "shape differs" in shape[0]["detail"]


def test_the_tiled_cases_pass_bitwise_with_their_agree_checks_within_the_tolerance(repo_root, tmp_path):
    report = tmp_path / "report.json"
    proc = run_verify(repo_root, "attention", "--case", "tiled_attention.*", "--case", "kv_generate.*", "--bitwise",
                      "--report", report, timeout=300)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr
    cases = {c["id"]: c for c in json.loads(report.read_text())["cases"]}
    for cid in ("tiled_attention.no_mask", "tiled_attention.causal"):
        assert cases[cid]["status"] == "bit-identical", cid  # the engines agree bit for bit on each form
        agree = [c for c in cases[cid]["checks"] if c["name"].startswith("agree ")]
        assert len(agree) == 8 and all(c["passed"] and "within the tolerance" in c["detail"] for c in agree), agree
    kv = [c for c in cases["kv_generate.padded_batch"]["checks"] if c["name"].startswith("agree ")]
    assert len(kv) == 10 and all(c["detail"].startswith("bit-identical") for c in kv), kv
