"""The alignment run (ops/attention/train_alignment.json, train.alignment): its first 20 steps
reproduced in PyTorch (autograd for the scorer, torch.optim.Adam, the book's clipping written by
hand), the final argmax alignment, replay of every checkpoint segment in the reference, and the
port's free run and replay through both command lines."""

import json
import math
import subprocess
import sys

import numpy as np
import pytest
import torch

from reference.models.alignment import ALIGNMENT, alignment_data, init_alignment_params
from reference.cases.cases import run_case_with_states
from reference.cases.cases_training import replay_segment
from reference.core.rng import Generator
from reference.runs.train import state_from_document
from toolkit import catalogue_case, tolerance

TOL = tolerance("train_alignment", "runner")  # the runner's rule: |port - reference| <= TOL * (1 + |reference|)
NAMES = ["W_q", "W_k", "w_v"]


@pytest.fixture(scope="module")
def case():
    return catalogue_case("train.alignment")  # fails unless the catalogue holds it once


@pytest.fixture(scope="module")
def reference_run(case):
    doc, states, _ = run_case_with_states(case)
    return doc, states


def _values(doc, part, name):
    t = doc[part][name]
    return np.array([float(x) for x in t["data"]], dtype=np.float64).reshape(t["shape"])


def torch_first_steps(case, steps):
    """The run in PyTorch: the same draws, the scorer written with torch ops (autograd),
    torch.optim.Adam, d2l's clipping by hand. Returns (losses, norms, params)."""
    config = case["config"]
    rng = Generator(case["seed"])
    init = init_alignment_params(rng, config["E"], config["H"])
    data = alignment_data(rng, config["E"], config.get("pairs", 1))
    q, k = torch.tensor(data["queries"]), torch.tensor(data["keys"])
    gold = torch.tensor(data["gold"])
    params = [torch.nn.Parameter(torch.tensor(init[n])) for n in NAMES]
    opt = torch.optim.Adam(params, lr=config["lr"])
    theta = config["clip"]
    losses, norms = [], []
    for _ in range(steps):
        W_q, W_k, w_v = params
        features = (q @ W_q.T)[:, :, None, :] + (k @ W_k.T)[:, None, :, :]  # (B, Q, K, H)
        scores = (torch.tanh(features) @ w_v.T)[..., 0]  # (B, Q, K)
        weights = torch.softmax(scores, dim=-1)
        loss = -torch.log(torch.gather(weights, -1, gold[..., None])[..., 0]).mean()
        opt.zero_grad()
        loss.backward()
        with torch.no_grad():  # the book's clip_gradients: no epsilon, strict >
            n = math.sqrt(sum(float((p.grad * p.grad).sum()) for p in params))
            if n > theta:
                for p in params:
                    p.grad.mul_(theta / n)
        losses.append(float(loss.detach()))
        norms.append(n)
        opt.step()
    return np.array(losses), np.array(norms), {n: p.detach().numpy().copy() for n, p in zip(NAMES, params)}


def test_the_case_is_documented_and_clips_early(case, reference_run):
    doc, _ = reference_run
    norms = _values(doc, "outputs", "grad_norm")
    steps = case["config"]["steps"]
    assert norms.shape == (steps,) and _values(doc, "outputs", "loss").shape == (steps,)
    clipped = norms > case["config"]["clip"]
    assert clipped.any() and not clipped.all(), "the run should exercise both branches of the clipping"


def test_first_20_steps_match_pytorch(case, reference_run):
    doc, states = reference_run
    steps = 20
    losses, norms, params = torch_first_steps(case, steps)
    ours_loss = _values(doc, "outputs", "loss")[:steps]
    ours_norm = _values(doc, "outputs", "grad_norm")[:steps]
    assert np.max(np.abs(ours_loss - losses)) <= 1e-9
    assert np.max(np.abs(ours_norm - norms)) <= 1e-9
    assert np.any(norms > case["config"]["clip"]), "the first 20 steps should include clipped ones"
    # the reference's parameters after step 20: replay 0 -> 20 from the state at step 0
    after = state_from_document(replay_segment(case, states[0], steps), NAMES)[0]
    for name in NAMES:
        assert np.max(np.abs(after[name] - params[name])) <= 1e-9, name
    moved = max(float(np.max(np.abs(after[n] - state_from_document(states[0], NAMES)[0][n]))) for n in NAMES)
    assert moved > 1e-2, "twenty steps should move the parameters"


def test_the_final_alignment_is_exact_well_before_the_end(case, reference_run):
    doc, _ = reference_run
    out = doc["outputs"]
    weights = _values(doc, "outputs", "alignment.weights")  # (Q, K)
    assert list(np.argmax(weights, axis=-1)) == list(ALIGNMENT)  # la->the, voiture->car, rouge->red, <eos>-><eos>
    assert out["alignment.argmax"]["data"] == list(ALIGNMENT) * case["config"].get("pairs", 1)
    assert out["alignment.exact"]["data"] == [1]
    np.testing.assert_allclose(weights.sum(axis=-1), 1.0, rtol=0, atol=1e-15)
    gold = weights[np.arange(4), list(ALIGNMENT)]
    assert gold.min() >= 0.9, f"gold weights {gold}"
    exact = np.array(out["alignment.exact_steps"]["data"])
    bad = np.flatnonzero(exact == 0)
    exact_from = int(bad[-1]) + 2 if bad.size else 1
    assert exact_from <= case["config"]["steps"] // 4, f"exact only from step {exact_from}"
    loss = _values(doc, "outputs", "loss")
    assert loss[-1] < 0.05 * loss[0]


def test_replay_of_every_segment_reproduces_the_next_checkpoint_exactly(case, reference_run):
    doc, states = reference_run
    ckpts = doc["outputs"]["checkpoint_steps"]["data"]
    K, steps = case["config"]["checkpoint_every"], case["config"]["steps"]
    assert ckpts == list(range(0, steps + 1, K)) and sorted(states) == ckpts
    assert set(doc["digests"]) == {"init_params"} | {f"state.{t}" for t in ckpts}
    segments = case["expect"]["replay_segments"]
    assert segments == [[t, t + K] for t in range(0, steps, K)]
    for t0, t1 in segments:
        replayed = replay_segment(case, states[t0], t1)
        assert replayed == states[t1], f"replay [{t0}, {t1}] differs from the checkpoint"
        assert replayed["digests"]["state"] == doc["digests"][f"state.{t1}"]


def test_replay_refuses_a_segment_past_the_run(case, reference_run):
    from reference.core.case_config import CaseError

    _, states = reference_run
    with pytest.raises(CaseError, match="last step"):
        replay_segment(case, states[case["config"]["steps"]], case["config"]["steps"] + 1)


def _run_engine(cmd, request, cwd):
    out = subprocess.run(cmd, input=json.dumps(request), capture_output=True, text=True, cwd=cwd, check=True)
    status = [json.loads(line) for line in out.stdout.splitlines()]
    assert all(s["ok"] for s in status), status
    return status


def test_port_free_run_and_replay_match_the_reference(case, node, repo_root, tmp_path):
    ref_dir, port_dir = tmp_path / "reference", tmp_path / "port"
    _run_engine([sys.executable, "-m", "reference", "run"],
                {"protocol": 1, "out_dir": str(ref_dir), "cases": [case]}, repo_root)
    segments = case["expect"]["replay_segments"]
    replay = {case["id"]: {"from_dir": str(ref_dir / f"{case['id']}.states"), "segments": segments}}
    status = _run_engine([str(node), "port_ts/src/cli.ts", "run"],
                         {"protocol": 1, "out_dir": str(port_dir), "cases": [case], "replay": replay}, repo_root)
    assert status[0]["replayed"] == len(segments)
    ref = json.loads((ref_dir / f"{case['id']}.json").read_text())
    port = json.loads((port_dir / f"{case['id']}.json").read_text())
    assert ref["digests"]["init_params"] == port["digests"]["init_params"]
    assert sorted(ref["digests"]) == sorted(port["digests"])
    for name in ("loss", "grad_norm"):
        e, a = _values(ref, "outputs", name), _values(port, "outputs", name)
        assert e.shape == a.shape
        beyond = np.flatnonzero(np.abs(a - e) > TOL * (1 + np.abs(e)))
        assert beyond.size == 0, f"{name}: first step beyond the tolerance {int(beyond[0]) + 1}"
    for name in ("alignment.argmax", "alignment.exact", "alignment.exact_steps", "checkpoint_steps"):
        assert ref["outputs"][name] == port["outputs"][name], name
    assert set(ref["inputs"]) == set(port["inputs"])
    for name in ref["inputs"]:
        assert np.array_equal(_values(ref, "inputs", name), _values(port, "inputs", name)), name  # drawn bit for bit
    for t0, t1 in segments:
        want = json.loads((ref_dir / f"{case['id']}.states" / f"step_{t1}.json").read_text())
        got = json.loads((port_dir / f"{case['id']}.replay" / f"step_{t1}.json").read_text())
        assert got["case"] == case and set(got["outputs"]) == set(want["outputs"])
        for name in want["outputs"]:
            e, a = _values(want, "outputs", name), _values(got, "outputs", name)
            assert np.all(np.abs(a - e) <= TOL * (1 + np.abs(e))), f"replay [{t0}, {t1}] {name}"
        assert got["outputs"]["opt"]["data"][0] == t1
