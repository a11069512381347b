"""The 8x8 garment data set and the ViT training run (twin: port_ts/src/runs/garments.ts).

No garment data set can be downloaded here, so both engines draw one from the shared generator.
Eight classes, each with two hand-drawn 8x8 templates ('#' 1.0, '+' 0.5, '.' 0.0); see
docs/garments.md for the pictures and the reasons. One split of n images is drawn in this order:
    perm    = permutation(n)                          label[i] = perm[i] mod classes (balanced)
    variant = integers((n,), 0, 2)                    which of the class's two templates
    shift   = integers((n, 2), -1, 2)                 (dy, dx) in {-1, 0, 1}; pixels moved off the
                                                      frame are lost, the uncovered ones are 0
    scale   = uniform((n,), 0.6, 1.0)                 the garment's brightness
    noise   = uniform((n, 8, 8), -0.15, 0.15)         per pixel
    image   = min(max(scale * shifted + noise, 0), 1) one product, one add, two exact clamps
Every step is exactly rounded (or exact), so the engines build bit-identical images.

Shape legend: n images, C = 1 channel, S = 8 image side, K classes, B batch.
"""

import numpy as np

from ..core import case_config as cc
from ..core.digest import float64_digest
from ..models.vit import init_vit_params, vit_forward, vit_loss, vit_loss_backward

SIDE = 8
GARMENTS = ("t-shirt", "trouser", "pullover", "dress", "sandal", "sneaker", "bag", "ankle boot")

# Two templates per class, rows top to bottom; '#' 1.0, '+' 0.5, '.' 0.0.
TEMPLATES = (
    (("........", ".##..##.", "########", "########", "..####..", "..####..", "..####..", "........"),
     (".##..##.", "########", "########", "..####..", "..####..", "..####..", "..####..", "........")),
    (("..####..", "..####..", "..#..#..", "..#..#..", "..#..#..", "..#..#..", "..#..#..", "........"),
     (".######.", ".######.", ".##..##.", ".##..##.", ".##..##.", ".##..##.", ".##..##.", "........")),
    (("........", ".######.", "########", "#.####.#", "#.####.#", "#.####.#", "..####..", "........"),
     (".##..##.", "########", "########", "#.####.#", "#.####.#", "#.####.#", "#.####.#", "........")),
    (("...##...", "..####..", "..####..", "..####..", ".######.", ".######.", "########", "........"),
     ("..####..", "..####..", "..####..", ".######.", ".######.", "########", "########", "........")),
    (("........", "........", "........", "..#.#.#.", ".#.#.#..", "########", "........", "........"),
     ("........", "........", "...#.#..", "..#.#.#.", ".#.#.#..", "########", "........", "........")),
    (("........", "........", "........", "........", "....##..", "..#####.", "########", "++++++++"),
     ("........", "........", "........", "...###..", "..#####.", "########", "++++++++", "........")),
    (("........", "..++++..", ".+....+.", "########", "########", "########", "########", "........"),
     ("...++...", "..+..+..", ".######.", ".######.", ".######.", ".######.", ".######.", "........")),
    (("....###.", "....###.", "....###.", "....###.", "...####.", ".#######", "########", "........"),
     ("........", "...###..", "...###..", "...####.", "..######", "########", "++++++++", "........")),
)
_PIXEL = {".": 0.0, "+": 0.5, "#": 1.0}

SCALE_RANGE = (0.6, 1.0)
NOISE_RANGE = (-0.15, 0.15)


def garment_templates():
    """(8 classes, 2 variants, S, S) float64 in {0, 0.5, 1}, from the ASCII pictures."""
    out = np.zeros((len(TEMPLATES), 2, SIDE, SIDE))
    for k, variants in enumerate(TEMPLATES):
        for v, rows in enumerate(variants):
            for y, row in enumerate(rows):
                for x, ch in enumerate(row):
                    out[k, v, y, x] = _PIXEL[ch]
    return out


def shift_image(img, dy, dx):
    """img (S, S) moved down by dy and right by dx: out[y, x] = img[y - dy, x - dx], 0 outside."""
    out = np.zeros_like(img)
    ys, yd = (slice(0, SIDE - dy), slice(dy, SIDE)) if dy >= 0 else (slice(-dy, SIDE), slice(0, SIDE + dy))
    xs, xd = (slice(0, SIDE - dx), slice(dx, SIDE)) if dx >= 0 else (slice(-dx, SIDE), slice(0, SIDE + dx))
    out[yd, xd] = img[ys, xs]
    return out


def make_garments(rng, n, classes):
    """One split drawn in the module doc's order: (images (n, 1, S, S) in [0, 1], labels int64 (n,))."""
    if not 2 <= classes <= len(TEMPLATES):
        raise cc.CaseError(f"garments: classes must be in [2, {len(TEMPLATES)}], got {classes}")
    templates = garment_templates()
    labels = rng.permutation(n) % classes  # (n,)
    variant = rng.integers((n,), 0, 2)  # (n,)
    shift = rng.integers((n, 2), -1, 2)  # (n, 2)  (dy, dx)
    scale = rng.uniform((n,), *SCALE_RANGE)  # (n,)
    noise = rng.uniform((n, SIDE, SIDE), *NOISE_RANGE)  # (n, S, S)
    shifted = np.stack([shift_image(templates[labels[i], variant[i]], int(shift[i, 0]), int(shift[i, 1]))
                        for i in range(n)]) if n else np.zeros((0, SIDE, SIDE))  # (n, S, S)
    images = np.minimum(np.maximum(scale[:, None, None] * shifted + noise, 0.0), 1.0)  # (n, S, S)
    return images.reshape(n, 1, SIDE, SIDE), labels.astype(np.int64)


def garment_splits(rng, n_train, n_test, classes):
    """The train split, then the held-out test split, from one generator: a dict of four arrays."""
    train_x, train_y = make_garments(rng, n_train, classes)
    test_x, test_y = make_garments(rng, n_test, classes)
    return {"train_images": train_x, "train_labels": train_y, "test_images": test_x, "test_labels": test_y}


# ---- The ViT run (case train_vit, registered in cases_training.RUNS) ----

def vit_model_config(config):
    """The ViT's config (vit.py) from a case config: image 8 and channels 1 are the data's."""
    model = {"image": SIDE, "channels": 1, "dropout": 0.0}
    for key in ("patch", "d", "heads", "mlp_hidden", "blocks", "classes"):
        model[key] = cc.positive_int(config, key)
    if cc.get(config, "dropout", 0.0) != 0.0:
        raise cc.CaseError(f"train_vit: the baked run has dropout 0 (docs/training.md), got {config['dropout']!r}")
    return model


def batch_indices(t, batch, n):
    """The training images of step t (1-based), a fixed cyclic order: ((t - 1) * batch + j) mod n."""
    return ((t - 1) * batch + np.arange(batch, dtype=np.int64)) % n


def predict(params, model, images):
    """(predictions int64 (n,), logits (n, K), forward cache): the first largest logit wins a tie."""
    logits, cache = vit_forward(images, params, model)
    return np.argmax(logits, axis=-1).astype(np.int64), logits, cache


def accuracy(predictions, labels):
    """The fraction of correct predictions: (number correct) / n, one rounded division."""
    return float(int(np.count_nonzero(predictions == labels))) / float(len(labels))


def first_of_each_class(labels, classes):
    """int64 (classes,): the index of the first image of each class (the attention showcase)."""
    out = np.zeros(classes, dtype=np.int64)
    for k in range(classes):
        hits = np.flatnonzero(labels == k)
        if hits.size == 0:
            raise ValueError(f"garments: the split has no image of class {k} ({GARMENTS[k]})")
        out[k] = hits[0]
    return out


def vit_setup(config, rng):
    """The train_vit run: draws the ViT's initial parameters (vit.init_vit_params), then the train
    split, then the test split; returns the run dict of cases_training (names, params, step_fn,
    evaluate, report, inputs, digests, steps, lr, clip, checkpoint_every). docs/garments.md has the
    configuration, the outputs and the reasons."""
    model = vit_model_config(config)
    n_train, n_test, batch = (cc.positive_int(config, k) for k in ("n_train", "n_test", "batch"))
    params = init_vit_params(rng, model)
    names = list(params)
    data = garment_splits(rng, n_train, n_test, model["classes"])
    train_x, train_y = data["train_images"], data["train_labels"]
    test_x, test_y = data["test_images"], data["test_labels"]
    shown = first_of_each_class(test_y, model["classes"])  # (K,)

    def step_fn(p, t):
        idx = batch_indices(t, batch, n_train)
        loss, cache = vit_loss(p, model, train_x[idx], train_y[idx])
        return loss, vit_loss_backward(cache)

    def evaluate(p):
        predictions, _, cache = predict(p, model, test_x)
        final_loss, _ = vit_loss(p, model, test_x, test_y)
        train_pred, _, _ = predict(p, model, train_x)
        weights = cache["weights"][-1]  # (n_test, H, N+1, N+1)  the last block
        return {
            "final_loss": np.array(final_loss),
            "accuracy": np.array(accuracy(predictions, test_y)),
            "train_accuracy": np.array(accuracy(train_pred, train_y)),
            "predictions": predictions,  # (n_test,)
            "cls_attention": weights[shown, :, 0, :],  # (K, H, N+1)  column 0 is <cls> itself
            "cls_attention.images": shown,  # (K,)  test indices, one per class
        }

    def report(p, history, checkpoints):
        story = [accuracy(predict(snap[0], model, test_x)[0], test_y) for _, snap in sorted(checkpoints.items())]
        return {"accuracy.checkpoints": np.array(story)}  # (C,)

    data_digests = {
        "data.train": _data_digest(train_x, train_y),
        "data.test": _data_digest(test_x, test_y),
    }
    clip = cc.get(config, "clip")
    sched = {"steps": cc.positive_int(config, "steps"), "lr": cc.positive_number(config, "lr"),
             "clip": None if clip is None else cc.positive_number(config, "clip"),
             "checkpoint_every": cc.positive_int(config, "checkpoint_every")}
    return {"names": names, "params": params, "step_fn": step_fn, "evaluate": evaluate, "report": report,
            "inputs": {"attention_images": test_x[shown], "test_labels": test_y},
            "digests": data_digests, **sched}


def _data_digest(images, labels):
    """SHA-256 of the images' then the labels' little-endian float64 bytes (digest.float64_digest)."""
    return float64_digest([images, labels])
