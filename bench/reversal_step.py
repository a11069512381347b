"""One training step of the reverse-the-digits model (docs/performance.md), in the reference.

The seed and config of the case train.reversal, read from the catalogue (bench/catalogue.py) so the
benchmark cannot drift from the real run (today d 16, heads 2, FFN 64, 1 + 1 blocks, batch 96 of
six-digit inputs, T 7). `step(t)` is the loss and gradients of batch t, no Adam update, so repeats
are the same work.

    python bench/reversal_step.py [--steps N] [--profile out.prof]   # median ms per step (wall, CPU)
"""

import argparse
import statistics
import time

from catalogue import case
from reference.runs.reversal import reversal_setup
from reference.core.rng import Generator

CASE_ID = "train.reversal"
SEED, CONFIG = case(CASE_ID)["seed"], case(CASE_ID)["config"]


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
    times, cpu = [], []
    for t in range(args.steps):
        c0, t0 = time.process_time(), time.perf_counter()
        step(t % 10 + 1)
        times.append(time.perf_counter() - t0)
        cpu.append(time.process_time() - c0)
    print(f"reference: median {1e3 * statistics.median(times):.2f} ms per step over {args.steps} "
          f"(min {1e3 * min(times):.2f}; median CPU time {1e3 * statistics.median(cpu):.2f})")


if __name__ == "__main__":
    main()
