"""The act-4 alignment run: the additive scorer of models/alignment.py trained on fixed random
embeddings of one sentence pair (twin: port_ts/src/runs/alignmentRun.ts; docs/training.md).

train_alignment (act 4). Config: E, H (embedding and scorer sizes), pairs (default 1), and the
schedule. Draws: init_alignment_params (W_q, W_k, w_v), then alignment_data (pair by pair, the
source then the target embeddings, N(0, 1), fixed: never trained). Every step uses the whole
data set (full batch). Outputs besides the common ones (evaluate: the first four; report: the
rest, which depend on the way there):
    final_loss            () the loss at the final parameters
    alignment.weights     (Q, K) pair 0's attention weights at the final parameters (the heatmap)
    alignment.argmax      int64 (B, Q) the source word each target word attends to most
    alignment.exact       int64 () 1 when every argmax is the gold alignment
    alignment.exact_steps int64 (steps,) 1 where the argmax at the parameters of step t
                          (before update t) is exact
    alignment.checkpoints (C, Q, K) pair 0's weights at each checkpoint (the heatmap's story)
"""

import numpy as np

from ..core import case_config as cc
from ..models.alignment import alignment_data, alignment_loss, alignment_loss_backward, init_alignment_params
from .schedule import schedule


def alignment_setup(config, rng):
    """The act-4 run: the additive scorer on fixed random embeddings of one sentence pair."""
    E, H, pairs = cc.positive_int(config, "E"), cc.positive_int(config, "H"), cc.positive_int(config, "pairs", 1)
    params = init_alignment_params(rng, E, H)
    data = alignment_data(rng, E, pairs)
    names = ["W_q", "W_k", "w_v"]
    exact_steps = []

    def step_fn(p, t):
        loss, cache = alignment_loss(p, data)
        exact_steps.append(int(np.array_equal(np.argmax(cache["weights"], axis=-1), data["gold"])))
        return loss, alignment_loss_backward(cache)

    def evaluate(p):
        loss, cache = alignment_loss(p, data)
        argmax = np.argmax(cache["weights"], axis=-1).astype(np.int64)  # (B, Q)
        return {
            "final_loss": np.array(loss),
            "alignment.weights": cache["weights"][0],  # (Q, K)
            "alignment.argmax": argmax,
            "alignment.exact": np.array(int(np.array_equal(argmax, data["gold"])), dtype=np.int64),
        }

    def report(p, history, checkpoints):
        story = [alignment_loss(snap[0], data)[1]["weights"][0] for _, snap in sorted(checkpoints.items())]
        return {
            "alignment.exact_steps": np.array(exact_steps, dtype=np.int64),
            "alignment.checkpoints": np.stack(story),  # (C, Q, K)
        }

    return {"names": names, "params": params, "step_fn": step_fn, "evaluate": evaluate, "report": report,
            "inputs": {"queries": data["queries"], "keys": data["keys"], "gold": data["gold"]},
            **schedule(config)}
