"""The finite-difference gradient checks (reference/runs/gradcheck.py, docs/gradcheck.md):

- every catalogue gradcheck case passes in the reference (every rel_err <= 1e-6, every parameter
  tensor covered, indices in range, the records consistent with the full gradient);
- the numeric error shrinks at the Taylor-remainder rate (x4 per halving of h for second-order
  central differences, x16 for the fourth-order stencil) along a random direction of each model;
- the ReLU kink detection: a case whose FFN pre-activation sits within the stencil's reach fails
  without it and passes with it;
- deliberately wrong backwards (a weight gradient transposed or scaled by 1.001, a missing
  residual path in the ViT block backward) fail the check in the reference, and through a copy of
  the port with the same one-line bug, fail `verify attention`'s cross-engine comparison.
"""

import json
import shutil
import subprocess
import sys
import types

import numpy as np
import pytest

from reference.cases import cases_gradcheck
from reference.runs import gradcheck as gc
from reference.cases.cases import run_case
from reference.core.rng import Generator
from toolkit import catalogue_cases, tolerance

# The bound on every relative error: each gradcheck op's declared `gradcheck` (its bundle, ops/attention/<op>.json),
# the one the runner holds the engines to.
OPS = ("gradcheck_transformer", "gradcheck_vit", "gradcheck_alignment", "gradcheck_rope")


@pytest.fixture(scope="module")
def catalogue():
    """The cases of the gradient checks of the three models and of RoPE (their bundles), less the
    cases added for the fault catalogue (seeds 900-999, docs/faults.md)."""
    return {c["id"]: c for op in OPS for c in catalogue_cases(op=op) if not 900 <= c["seed"] <= 999}


def outputs_of(case):
    doc = run_case(case)
    return {k: np.array(v["data"]).reshape(v["shape"]) for k, v in doc["outputs"].items()}


def rel_errs(outputs):
    return {k: v for k, v in outputs.items() if k.endswith(".rel_err")}


def failing(outputs, op):
    bound = tolerance(op, "gradcheck")
    return sorted(k for k, v in rel_errs(outputs).items() if v.max() > bound)


def captured(case, monkeypatch):
    """(params, loss_fn, grads) of a case, captured where its compute hands them to gradcheck."""
    box = {}
    monkeypatch.setattr(cases_gradcheck, "run_check",
                        lambda config, rng, params, loss_fn, grads, loss: box.update(x=(params, loss_fn, grads)) or {})
    run_case(case)
    monkeypatch.undo()
    return box["x"]


def test_catalogue_covers_the_three_models(catalogue):
    ops = {c["op"] for c in catalogue.values()}
    assert {"gradcheck_transformer", "gradcheck_vit", "gradcheck_alignment"} <= ops, ops
    assert all(500 <= c["seed"] <= 599 and c["kind"] == "gradcheck" for c in catalogue.values())


@pytest.mark.parametrize("case_id", ["gradcheck.transformer.padded", "gradcheck.transformer.dropout",
                                     "gradcheck.vit.p2_d8", "gradcheck.vit.c3_p4_dropout",
                                     "gradcheck.alignment.act4", "gradcheck.alignment.three_pairs",
                                     "gradcheck.rope.cross_lens"])
def test_catalogue_case_passes_in_the_reference(catalogue, case_id):
    out = outputs_of(catalogue[case_id])
    grads = [k[len("grad."):] for k in out if k.startswith("grad.")]
    assert grads, "a gradcheck case must report its gradients"
    for name in grads:
        index, analytic = out[f"check.{name}.index"], out[f"check.{name}.analytic"]
        assert index.size >= 1, f"{name} is not covered"
        assert np.all((index >= 0) & (index < out[f"grad.{name}"].size)), f"{name}: index out of range"
        assert np.array_equal(analytic, out[f"grad.{name}"].reshape(-1)[index]), f"{name}: analytic != grad[index]"
        size = out[f"grad.{name}"].size
        if size <= catalogue[case_id]["config"].get("full_max", 32):
            assert index.tolist() == list(range(size)), f"{name}: a small tensor must be checked everywhere"
    assert out["direction.rel_err"].size == catalogue[case_id]["config"].get("directions", 3)
    op = catalogue[case_id]["op"]
    assert not failing(out, op), f"{case_id}: rel_err above {tolerance(op, 'gradcheck')}: {failing(out, op)}"
    worst = max(v.max() for v in rel_errs(out).values())
    assert worst < 1e-7, f"{case_id}: a right gradient's worst error {worst:.2e} leaves < 10x margin"


def taylor_ratios(loss_fn, params, grads, seed, steps, order):
    analytic, numeric, _ = gc.step_sweep(loss_fn, params, grads, Generator(seed), steps, order)
    err = np.abs(numeric - analytic)
    return err[:-1] / err[1:]


@pytest.mark.parametrize("case_id", ["gradcheck.transformer.padded", "gradcheck.vit.p2_d8", "gradcheck.alignment.act4"])
def test_error_shrinks_at_the_taylor_rate(catalogue, case_id, monkeypatch):
    params, loss_fn, grads = captured(catalogue[case_id], monkeypatch)
    second = taylor_ratios(loss_fn, params, grads, 7, [1e-2 / 2**k for k in range(5)], 2)
    assert np.all(np.abs(second - 4.0) < 0.2), f"second order: error ratios per halving {second} (expected ~4)"
    fourth = taylor_ratios(loss_fn, params, grads, 7, [4e-2 / 2**k for k in range(3)], 4)
    assert np.all(np.abs(fourth - 16.0) < 2.0), f"fourth order: error ratios per halving {fourth} (expected ~16)"


def test_kink_detection_halves_the_step(catalogue, monkeypatch):
    """gradcheck.transformer.dropout has an FFN pre-activation at 2.3e-4, within the stencil's 2h:
    without detection, right gradients fail; with it, the crossing checks are repeated at a smaller
    step and pass."""
    case = catalogue["gradcheck.transformer.dropout"]
    out = outputs_of(case)
    assert int(out["kink_retries"]) > 0 and not failing(out, case["op"])
    params, loss_fn, grads = captured(case, monkeypatch)
    c = case["config"]
    blind = gc.gradcheck(lambda p: (loss_fn(p)[0], None), params, grads, Generator(3), c["full_max"], c["samples"], 1)
    worst = max(v["rel_err"].max() for v in blind["checks"].values())
    assert worst > 1e-3, f"without kink detection the worst error is only {worst:.2e}: the case no longer shows a kink"


def test_relative_error_floor():
    assert gc.relative_error(0.0, 0.0) == 0.0
    assert gc.relative_error(1e-12, 0.0) == pytest.approx(1e-12 / gc.FLOOR)
    assert gc.relative_error(2.0, 1.0) == 0.5


# --- deliberately wrong backwards ------------------------------------------------------------

def small(case, **overrides):
    return dict(case, config=dict(case["config"], **overrides))


def test_transposed_output_weight_gradient_fails(catalogue, monkeypatch):
    import reference.models.transformer as transformer

    real = transformer.linear_backward

    def transposed(dout, cache):
        dx, dW, db = real(dout, cache)
        return dx, (dW.T if dW.shape[0] == dW.shape[1] else dW), db

    monkeypatch.setattr(transformer, "linear_backward", transposed)  # only dec.out (V 8, d 8) uses it
    out = outputs_of(small(catalogue["gradcheck.transformer.padded"], samples=4))
    assert "check.dec.out.W.rel_err" in failing(out, "gradcheck_transformer"), failing(out, "gradcheck_transformer")
    assert out["check.dec.out.W.rel_err"].max() > 1e-2
    assert not any(k.startswith("check.enc.") for k in failing(out, "gradcheck_transformer")), "the bug is in dec.out.W only"


def test_scaled_weight_gradient_fails(catalogue, monkeypatch):
    """A 0.1% error in one linear layer's weight gradient is far above the check's noise."""
    import reference.models.vit as vit

    real = vit.linear_backward

    def scaled(dout, cache):
        dx, dW, db = real(dout, cache)
        return dx, (dW * 1.001 if dW.shape == (3, 8) else dW), db  # head.W only

    monkeypatch.setattr(vit, "linear_backward", scaled)
    out = outputs_of(catalogue["gradcheck.vit.p2_d8"])
    assert failing(out, "gradcheck_vit") == ["check.head.W.rel_err", "direction.rel_err"], failing(out, "gradcheck_vit")
    assert out["check.head.W.rel_err"].max() > 1e-4


def buggy_module(repo_root, module, old, new):
    """reference/<layer>/<module>.py with one line replaced, loaded as a sibling module."""
    source = (repo_root / "reference" / f"{module}.py").read_text()
    assert source.count(old) == 1, f"expected exactly one {old!r} in reference/{module}.py"
    layer, name = module.split("/")
    mod = types.ModuleType(f"reference.{layer}._buggy_{name}")
    mod.__package__ = f"reference.{layer}"
    exec(compile(source.replace(old, new), f"buggy {module}.py", "exec"), mod.__dict__)
    return mod


def test_missing_residual_in_vit_block_backward_fails(catalogue, repo_root, monkeypatch):
    bug = buggy_module(repo_root, "models/vit", "dx = dx1 + dx_ln  # x feeds", "dx = dx_ln  # x feeds")
    monkeypatch.setattr(cases_gradcheck, "vit_loss", bug.vit_loss)
    monkeypatch.setattr(cases_gradcheck, "vit_loss_backward", bug.vit_loss_backward)
    out = outputs_of(catalogue["gradcheck.vit.p2_d8"])
    bad = failing(out, "gradcheck_vit")
    # One block, and only the <cls> row reaches the head: the residual carries gradient in row 0
    # alone, so the bug shows in cls and pos (row 0); the patch rows get theirs through attention.
    assert {"check.pos.rel_err", "check.cls.rel_err", "direction.rel_err"} <= set(bad), bad
    assert not any(k.startswith("check.head.") for k in bad), "the head sits after the block: its gradient is right"


def test_transposed_scorer_gradient_fails(catalogue, monkeypatch):
    import reference.models.alignment as alignment

    real = alignment.additive_attention_backward

    def transposed(dout, cache):
        dq, dk, dv, grads = real(dout, cache)
        return dq, dk, dv, dict(grads, W_q=grads["W_q"].T.copy())

    monkeypatch.setattr(alignment, "additive_attention_backward", transposed)
    out = outputs_of(small(catalogue["gradcheck.alignment.three_pairs"]))  # E = H = 4: W_q is square
    assert "check.W_q.rel_err" in failing(out, "gradcheck_alignment") and "check.W_k.rel_err" not in failing(out, "gradcheck_alignment"), failing(out, "gradcheck_alignment")


# --- the same bugs in a copy of the port fail the cross-engine comparison ----------------------

PORT_BUGS = {
    "missing residual": ("models/vit.ts", "const dx = add(dx1, dxLn); // x feeds", "const dx = dxLn; // x feeds",
                         "gradcheck.vit.p2_d8", "grad.cls"),
    "scaled weight gradient": ("models/vit.ts", '"head.W": dWHead,',
                               '"head.W": { shape: dWHead.shape, data: dWHead.data.map((g) => g * 1.001) },',
                               "gradcheck.vit.p2_d8", "grad.head.W"),
    "transposed scorer gradient": ("models/alignment.ts", "return { W_q: grads.W_q,",
                                   "return { W_q: { shape: grads.W_q.shape, data: grads.W_q.data.map((_, i) => grads.W_q.data[(i % 4) * 4 + Math.floor(i / 4)]) },",
                                   "gradcheck.alignment.three_pairs", "grad.W_q"),
}


def run_verify(repo_root, args, report):
    cmd = [sys.executable, "-m", "verify", "attention", *args, "--report", str(report)]
    done = subprocess.run(cmd, cwd=repo_root, capture_output=True, text=True, timeout=300)
    return done.returncode, json.loads(report.read_text()) if report.exists() else None, done


@pytest.fixture(scope="module")
def golden_dir(repo_root, tmp_path_factory):
    """Goldens of the cases below, written by the unmodified engines into a scratch directory."""
    out = tmp_path_factory.mktemp("goldens")
    cases = sorted({bug[3] for bug in PORT_BUGS.values()})
    args = [a for c in cases for a in ("--case", c)]
    done = subprocess.run([sys.executable, "-m", "verify", "regen", "attention", *args, "--golden-dir", str(out)],
                          cwd=repo_root, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stdout + done.stderr
    return out


def port_copy(repo_root, tmp_path, file=None, old=None, new=None):
    dst = tmp_path / "port_ts"
    shutil.copytree(repo_root / "port_ts" / "src", dst / "src")
    if file is not None:
        path = dst / "src" / file
        text = path.read_text()
        assert text.count(old) == 1, f"expected exactly one {old!r} in port_ts/src/{file}"
        path.write_text(text.replace(old, new))
    return dst / "src" / "cli.ts"


def test_unmodified_port_copy_passes(repo_root, node, golden_dir, tmp_path):
    """The control: the copy itself, unmodified, passes (so the failures below come from the bug)."""
    cli = port_copy(repo_root, tmp_path)
    cases = sorted({bug[3] for bug in PORT_BUGS.values()})
    args = [a for c in cases for a in ("--case", c)] + ["--golden-dir", str(golden_dir), "--port-cmd", f"{node} {cli} run"]
    code, report, done = run_verify(repo_root, args, tmp_path / "r.json")
    assert code == 0, done.stdout + done.stderr


@pytest.mark.parametrize("bug", sorted(PORT_BUGS))
def test_port_bug_fails_the_cross_engine_comparison(repo_root, node, golden_dir, tmp_path, bug):
    file, old, new, case_id, tensor = PORT_BUGS[bug]
    cli = port_copy(repo_root, tmp_path, file, old, new)
    args = ["--case", case_id, "--golden-dir", str(golden_dir), "--port-cmd", f"{node} {cli} run"]
    code, report, done = run_verify(repo_root, args, tmp_path / "r.json")
    assert code == 1, f"expected exit 1 (a mismatch), got {code}:\n{done.stdout}{done.stderr}"
    (case,) = report["cases"]
    compared = {t["name"]: t for t in case["tensors"]}
    assert not compared[tensor]["passed"], f"{tensor} should differ between the engines: {compared[tensor]}"
    port_checks = [c for c in case["checks"] if c["engine"] == "port" and c["name"].endswith(".rel_err") and not c["passed"]]
    assert port_checks, "the port's own finite-difference check should fail too"
    ref_checks = [c for c in case["checks"] if c["engine"] == "reference"]
    assert all(c["passed"] for c in ref_checks), "the reference is unmodified and must pass its checks"
