"""The 8x8 garment data set and the ViT run (docs/garments.md).

- the data are bit-identical across engines (SHA-256 of the float64 bytes, Node's own hashing);
- classes are balanced, pixels in [0, 1], every image is its template moved, scaled and noised;
- the first 20 steps of the run in PyTorch float64 (torch.optim.Adam with its defaults, the book's
  clipping by hand, autograd through a torch ViT written here) match the reference to <= 1e-9;
- a run resumed from a checkpoint reproduces the uninterrupted run bit for bit;
- the reference's held-out accuracy clears the bar, and the port's free run matches the
  reference's within the runner's 1e-6 rule at every step, with identical predictions.
"""

import hashlib
import json

import numpy as np
import pytest
import torch
from torch import nn

from reference.runs.garments import (GARMENTS, batch_indices, garment_splits, garment_templates, make_garments,
                                 shift_image, vit_model_config, vit_setup)
from reference.core.rng import Generator
from reference.runs.train import state_digest, train
from reference.models.vit import init_vit_params
from toolkit import catalogue_cases, run_port, tolerance

# The train_vit case (docs/garments.md); ops/attention/train_vit.json must hold the same.
VIT_CASE = {
    "id": "train.vit", "kind": "training", "op": "train_vit", "seed": 602,
    "config": {"patch": 4, "d": 16, "heads": 2, "mlp_hidden": 32, "blocks": 1, "classes": 8, "dropout": 0.0,
               "n_train": 1000, "n_test": 200, "batch": 40,
               "steps": 300, "lr": 0.005, "clip": 5.0, "checkpoint_every": 50},
}
ACCURACY_BAR = 0.75  # chance is 1/8; docs/garments.md says why 0.75
TORCH_TOL = tolerance("train_vit", "torch")  # declared in ops/attention/train_vit.json, with its reason
RUNNER_TOL = tolerance("train_vit", "runner")


def sha(a):
    return hashlib.sha256(np.ascontiguousarray(a, dtype="<f8").tobytes()).hexdigest()


def run_node(node, repo_root, script):
    return run_port(node, repo_root, script)


def test_catalogue_entry_matches_the_documented_case(repo_root):
    entry = catalogue_cases(op="train_vit")
    assert entry, "train_vit is missing from ops/attention/train_vit.json (docs/garments.md describes it)"
    mine = {k: VIT_CASE[k] for k in ("op", "seed", "config")}
    assert {k: entry[0][k] for k in mine} == mine, "the catalogue's train_vit differs from the case here (docs/garments.md)"


# ---- the data ----

SPLITS = [(1, 40, 8), (2, 37, 5), (3, 0, 8), (602, 1000, 8)]


def test_data_are_bit_identical_across_engines(node, repo_root):
    script = f"""
import {{ createHash }} from "node:crypto";
import {{ Generator }} from "./port_ts/src/core/rng.ts";
import {{ makeGarments, garmentTemplates }} from "./port_ts/src/runs/garments.ts";
const h = (a) => {{ const b = Buffer.alloc(a.length * 8); a.forEach((v, i) => b.writeDoubleLE(v, i * 8));
  return createHash("sha256").update(b).digest("hex"); }};
const out = {{ templates: h(garmentTemplates().data), splits: [] }};
for (const [seed, n, k] of {json.dumps(SPLITS)}) {{
  const g = new Generator(seed);
  const s = makeGarments(g, n, k);
  out.splits.push([h(s.images.data), h(s.labels.data), g.counter]);
}}
console.log(JSON.stringify(out));
"""
    port = run_node(node, repo_root, script)
    assert port["templates"] == sha(garment_templates())
    for (seed, n, k), (img_hash, lab_hash, counter) in zip(SPLITS, port["splits"]):
        g = Generator(seed)
        images, labels = make_garments(g, n, k)
        assert (sha(images), sha(labels)) == (img_hash, lab_hash), f"seed {seed}, n {n}, classes {k}: data differ"
        assert g.counter == counter, f"seed {seed}: the engines used {g.counter} and {counter} draws"


def test_classes_are_balanced_and_pixels_in_the_unit_interval():
    data = garment_splits(Generator(602), 1000, 200, 8)
    for split, n in (("train", 1000), ("test", 200)):
        images, labels = data[f"{split}_images"], data[f"{split}_labels"]
        assert images.shape == (n, 1, 8, 8) and images.dtype == np.float64 and labels.dtype == np.int64
        assert np.array_equal(np.bincount(labels, minlength=8), np.full(8, n // 8)), f"{split}: unbalanced"
        assert images.min() >= 0.0 and images.max() <= 1.0
        assert images.min() == 0.0 and images.max() == 1.0, "the clamps should be reached somewhere"
    assert not np.array_equal(data["train_labels"][:200], data["test_labels"]), "the splits must be separate draws"


def test_every_image_is_a_template_moved_scaled_and_noised():
    """Redraw the parameters from the documented order and rebuild each image directly."""
    n, k = 60, 8
    images, labels = make_garments(Generator(9), n, k)
    g = Generator(9)
    perm = g.permutation(n)
    variant = g.integers((n,), 0, 2)
    shift = g.integers((n, 2), -1, 2)
    scale = g.uniform((n,), 0.6, 1.0)
    noise = g.uniform((n, 8, 8), -0.15, 0.15)
    assert np.array_equal(labels, perm % k)
    assert set(np.unique(shift)) == {-1, 0, 1} and set(np.unique(variant)) == {0, 1}
    templates = garment_templates()
    for i in range(n):
        dy, dx = shift[i]
        moved = np.zeros((8, 8))
        for y in range(8):
            for x in range(8):
                if 0 <= y - dy < 8 and 0 <= x - dx < 8:
                    moved[y, x] = templates[labels[i], variant[i], y - dy, x - dx]
        want = np.clip(scale[i] * moved + noise[i], 0.0, 1.0)
        assert np.array_equal(images[i, 0], want), f"image {i} ({GARMENTS[labels[i]]})"


def test_templates_are_distinct_and_shifts_move_pixels():
    t = garment_templates().reshape(16, 64)
    assert set(np.unique(t)) == {0.0, 0.5, 1.0}
    assert len({row.tobytes() for row in t}) == 16, "two templates are the same picture"
    img = np.arange(64, dtype=np.float64).reshape(8, 8)
    assert shift_image(img, 1, 0)[1, 3] == img[0, 3] and np.all(shift_image(img, 1, 0)[0] == 0)
    assert shift_image(img, 0, -1)[2, 6] == img[2, 7] and np.all(shift_image(img, 0, -1)[:, 7] == 0)
    assert np.array_equal(shift_image(img, 0, 0), img)


def test_batches_cycle_through_the_training_set():
    seen = np.concatenate([batch_indices(t, 40, 1000) for t in range(1, 26)])
    assert np.array_equal(seen, np.arange(1000)), "one epoch of 25 steps visits every image once, in order"
    assert np.array_equal(batch_indices(26, 40, 1000), np.arange(40))
    assert np.array_equal(batch_indices(3, 3, 7), [6, 0, 1])


# ---- PyTorch float64 as the third oracle: 20 steps ----

def torch_vit_logits(p, c, images):
    """The pre-norm ViT written with torch operations: conv patches, <cls> first, learnable
    positions, per-head attention by hand, exact GELU, LayerNorm + Linear head on <cls>."""
    d, h = c["d"], c["heads"]
    D = d // h
    e = nn.functional.conv2d(images, p["patch.W"], p["patch.b"], stride=c["patch"])  # (B, d, G, G)
    e = e.flatten(2).transpose(1, 2)  # (B, N, d)
    B = e.shape[0]
    x = torch.cat([p["cls"].reshape(1, 1, d).expand(B, 1, d), e], dim=1) + p["pos"]  # (B, N+1, d)

    def ln(z, pre):
        return nn.functional.layer_norm(z, (d,), p[pre + "gamma"], p[pre + "beta"], eps=1e-5)

    def heads(z):  # (B, T, d) -> (B, h, T, D)
        return z.reshape(B, -1, h, D).transpose(1, 2)

    for i in range(c["blocks"]):
        b = f"blk{i}."
        n1 = ln(x, b + "ln1.")
        q, k, v = (heads(n1 @ p[b + f"attn.W_{w}"].T) for w in "qkv")
        w = torch.softmax(q @ k.transpose(-1, -2) / D ** 0.5, dim=-1)  # (B, h, T, T)
        a = (w @ v).transpose(1, 2).reshape(B, -1, d) @ p[b + "attn.W_o"].T
        x = x + a
        m = nn.functional.gelu(ln(x, b + "ln2.") @ p[b + "mlp.W1"].T + p[b + "mlp.b1"])
        x = x + (m @ p[b + "mlp.W2"].T + p[b + "mlp.b2"])
    return ln(x[:, 0], "head.ln.") @ p["head.W"].T + p["head.b"]


@pytest.mark.parametrize("clip", [VIT_CASE["config"]["clip"], 1.0])
def test_first_20_steps_match_torch_adam_with_the_books_clipping(clip):
    """The case's threshold clips none of the first 20 steps (their norms stay below 1.8); 1.0
    clips some, so the clipping branch is compared too."""
    cfg = dict(VIT_CASE["config"], steps=20, checkpoint_every=20, clip=clip)
    run = vit_setup(cfg, Generator(VIT_CASE["seed"]))
    names = run["names"]
    leaves = {n: torch.tensor(run["params"][n], dtype=torch.float64, requires_grad=True) for n in names}
    g = Generator(VIT_CASE["seed"])  # the run's data: the parameters are drawn first (docs/training.md)
    init_vit_params(g, vit_model_config(cfg))
    splits = garment_splits(g, cfg["n_train"], cfg["n_test"], cfg["classes"])
    X, Y = torch.tensor(splits["train_images"]), torch.tensor(splits["train_labels"])
    opt = torch.optim.Adam([leaves[n] for n in names], lr=cfg["lr"])  # betas (0.9, 0.999), eps 1e-8
    torch_loss, torch_norm = [], []
    for t in range(1, 21):
        idx = torch.tensor(batch_indices(t, cfg["batch"], cfg["n_train"]))
        opt.zero_grad()
        loss = nn.functional.cross_entropy(torch_vit_logits(leaves, cfg, X[idx]), Y[idx])
        loss.backward()
        with torch.no_grad():  # the book's clipping: scale by theta / n only when n > theta
            n = torch.sqrt(sum((leaves[k].grad ** 2).sum() for k in names))
            if n > cfg["clip"]:
                for k in names:
                    leaves[k].grad *= cfg["clip"] / n
        opt.step()
        torch_loss.append(loss.item())
        torch_norm.append(n.item())
    history, _ = train(run["params"], names, run["step_fn"], 20, run["lr"], run["clip"], 20)
    assert np.max(np.abs(np.array(history["loss"]) - torch_loss)) <= TORCH_TOL
    assert np.max(np.abs(np.array(history["grad_norm"]) - torch_norm)) <= TORCH_TOL
    for k in names:
        diff = np.max(np.abs(run["params"][k] - leaves[k].detach().numpy()))
        assert diff <= TORCH_TOL, f"{k}: greatest absolute difference {diff:.3e} after 20 steps (allowed {TORCH_TOL})"
    assert history["loss"][-1] < history["loss"][0], "the 20 steps should make progress"
    if clip == 1.0:
        assert sum(n > clip for n in torch_norm) >= 1, "threshold 1.0 should clip at least one of the 20 steps"


def test_a_resumed_run_reproduces_the_uninterrupted_one():
    cfg = dict(VIT_CASE["config"], steps=12, checkpoint_every=6)
    whole = vit_setup(cfg, Generator(VIT_CASE["seed"]))
    h_whole, cps = train(whole["params"], whole["names"], whole["step_fn"], 12, whole["lr"], whole["clip"], 6)
    part = vit_setup(cfg, Generator(VIT_CASE["seed"]))
    params, state = cps[6]
    params = {k: v.copy() for k, v in params.items()}
    h_part, _ = train(params, part["names"], part["step_fn"], 12, part["lr"], part["clip"], 6,
                      {**state, "m": dict(state["m"]), "v": dict(state["v"])})
    assert h_part["loss"] == h_whole["loss"][6:]
    assert state_digest(params, part["names"]) == state_digest(whole["params"], whole["names"])


# ---- the whole run: the reference's quality, the port's free run ----

@pytest.fixture(scope="module")
def reference_run():
    run = vit_setup(VIT_CASE["config"], Generator(VIT_CASE["seed"]))
    init = state_digest(run["params"], run["names"])
    history, checkpoints = train(run["params"], run["names"], run["step_fn"], run["steps"], run["lr"], run["clip"],
                                 run["checkpoint_every"])
    return {"init": init, "digests": run["digests"], "history": history,
            "report": {**run["evaluate"](run["params"]), **run["report"](run["params"], history, checkpoints)}}


def test_reference_held_out_accuracy_clears_the_bar(reference_run):
    rep = reference_run["report"]
    acc = float(rep["accuracy"])
    assert acc >= ACCURACY_BAR, f"held-out accuracy {acc} below the bar {ACCURACY_BAR} (chance 1/8)"
    assert float(rep["train_accuracy"]) >= ACCURACY_BAR
    assert rep["predictions"].dtype == np.int64 and rep["predictions"].shape == (200,)
    w = rep["cls_attention"]
    assert w.shape == (8, 2, 5) and np.allclose(w.sum(-1), 1.0, atol=1e-12, rtol=0)
    loss = np.array(reference_run["history"]["loss"])
    assert loss[-25:].mean() < 0.5 * loss[:25].mean(), "an epoch's mean loss should at least halve"


def test_port_free_run_matches_the_reference_at_every_step(node, repo_root, reference_run):
    script = f"""
import {{ Generator }} from "./port_ts/src/core/rng.ts";
import {{ vitSetup }} from "./port_ts/src/runs/garments.ts";
import {{ stateDigest, train }} from "./port_ts/src/runs/train.ts";
const c = {json.dumps(VIT_CASE)};
const run = vitSetup(c.config, new Generator(c.seed));
const init = stateDigest(run.params, run.names);
const {{ history, checkpoints }} = train(run.params, run.names, run.stepFn, run.steps, run.lr, run.clip, run.checkpointEvery);
const rep = {{ ...run.evaluate(run.params), ...run.report(run.params, history, checkpoints) }};
console.log(JSON.stringify({{ init, digests: run.digests, loss: history.loss, grad_norm: history.gradNorm,
  predictions: Array.from(rep.predictions.data), accuracy: rep.accuracy.data[0],
  cls: Array.from(rep.cls_attention.data), acc_cp: Array.from(rep["accuracy.checkpoints"].data) }}));
"""
    port = run_node(node, repo_root, script)
    ref = reference_run
    assert port["init"] == ref["init"], "the initial parameters differ between engines"
    assert port["digests"] == ref["digests"], "the data differ between engines"
    for key, name in (("loss", "loss"), ("grad_norm", "grad_norm")):
        e, a = np.array(ref["history"][key]), np.array(port[name])
        assert a.shape == e.shape == (300,)
        beyond = np.flatnonzero(np.abs(a - e) > RUNNER_TOL * (1 + np.abs(e)))
        assert beyond.size == 0, f"{name}: first step beyond the rule {beyond[0] + 1 if beyond.size else None}"
    assert port["predictions"] == ref["report"]["predictions"].tolist(), "a held-out prediction differs"
    assert port["accuracy"] == float(ref["report"]["accuracy"])
    assert port["acc_cp"] == ref["report"]["accuracy.checkpoints"].tolist()
    cls = np.array(port["cls"]).reshape(8, 2, 5)
    assert np.max(np.abs(cls - ref["report"]["cls_attention"])) <= RUNNER_TOL
