"""One training step of the reverse-the-digits model (docs/performance.md), in the reference.

The run of cases/attention/training.json (train.reversal: d 16, heads 2, FFN 64, 1 + 1 blocks,
batch 64 of six-digit inputs, T 7) with a smaller training set (the step's cost does not depend on
n_train). `step(t)` is the loss and gradients of batch t, no Adam update, so repeats are the same work.

    python bench/reversal_step.py [--steps N] [--profile out.prof]   # median ms per step
"""

import argparse
import statistics
import time

from reference.reversal import reversal_setup
from reference.rng import Generator

SEED = 601
CONFIG = {"d": 16, "heads": 2, "ffn_hidden": 64, "enc_blocks": 1, "dec_blocks": 1,
          "min_digits": 6, "max_digits": 6, "n_train": 640, "n_test": 64, "batch": 64,
          "steps": 600, "lr": 0.01, "clip": 1.0, "checkpoint_every": 50}


def make_step():
    run = reversal_setup(CONFIG, Generator(SEED))
    params, step_fn = run["params"], run["step_fn"]
    return lambda t=1: step_fn(params, t)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--steps", type=int, default=50)
    ap.add_argument("--profile")
    args = ap.parse_args()
    step = make_step()
    for t in range(1, 4):
        step(t)
    if args.profile:
        import cProfile
        cProfile.runctx("for t in range(args.steps): step(t % 10 + 1)", globals(), {"step": step, "args": args},
                        filename=args.profile)
        return
    times = []
    for t in range(args.steps):
        t0 = time.perf_counter()
        step(t % 10 + 1)
        times.append(time.perf_counter() - t0)
    print(f"reference: median {1e3 * statistics.median(times):.2f} ms per step over {args.steps} "
          f"(min {1e3 * min(times):.2f})")


if __name__ == "__main__":
    main()
