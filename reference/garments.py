"""The 8x8 garment data set and the ViT training run (twin: port_ts/src/garments.ts).

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

SIDE = 8
GARMENTS = ("t-shirt", "trouser", "pullover", "dress", "sandal", "sneaker", "bag", "ankle boot")

# Two templates per class, rows top to bottom; '#' 1.0, '+' 0.5, '.' 0.0.
TEMPLATES = (
    (("........", ".##..##.", "########", "########", "..####..", "..####..", "..####..", "........"),
     (".##..##.", "########", "########", ".######.", ".######.", ".######.", ".######.", "........")),
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
        raise ValueError(f"garments: classes must be in [2, {len(TEMPLATES)}], got {classes}")
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
