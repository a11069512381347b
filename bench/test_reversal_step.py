"""One training step of the reverse-the-digits model: reference, port and PyTorch float64 eager.

    python -m pytest bench/ -p no:cacheprovider --benchmark-columns=min,median,mean,rounds

(docs/performance.md). Not part of the default test command (testpaths is tests/). The same work in
each engine: the model of the case train.reversal (seed and config read from
cases/attention/training.json by bench/reversal_step.py; today d 16, heads 2, FFN 64, 1 + 1 blocks,
V 13), the batch of step t of its data (96 six-digit inputs, T 7), loss and gradients of every
parameter, no Adam update.

- reference: reversal_setup's step_fn, timed by pytest-benchmark.
- port: a Node process started once (bench/reversal_step.mts serve) runs the steps; each step is
  timed inside Node (process.hrtime around stepFn), so start-up and the pipe are not counted.
  pytest-benchmark times the round trip (the pipe adds ~0.05 ms); the ratios use Node's own times.
- torch: tests/test_reversal.py's torch composition of the same model (that file checks it against
  the reference to 1e-9 over 20 Adam steps), forward and autograd backward, float64, CPU, eager,
  with torch's default thread count (2 on a 2-core machine) and with 1 thread.
At the end bench/conftest.py prints the medians and the ratios.
"""

import importlib.util
import statistics
import subprocess
import sys

import numpy as np
import pytest
import torch

from reference import digits as dg
from reference.reversal import reversal_model_config, reversal_setup
from reference.rng import Generator

sys.path.insert(0, str(__import__("pathlib").Path(__file__).resolve().parent))
from reversal_step import CONFIG, SEED  # noqa: E402  the case's config, shared with the script

ROUNDS = 60


def _torch_loss():
    """torch_loss from tests/test_reversal.py (tests/ is not a package)."""
    path = __import__("pathlib").Path(__file__).resolve().parent.parent / "tests" / "test_reversal.py"
    spec = importlib.util.spec_from_file_location("_test_reversal", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.torch_loss


def test_reference_step(benchmark, medians):
    run = reversal_setup(CONFIG, Generator(SEED))
    ts = iter(range(1, 10**9))
    step = lambda: run["step_fn"](run["params"], next(ts) % 10 + 1)  # noqa: E731
    for _ in range(3):
        step()
    benchmark.pedantic(step, rounds=ROUNDS, iterations=1)
    medians["reference"] = 1e3 * benchmark.stats.stats.median


def test_port_step(benchmark, medians, node, repo_root):
    proc = subprocess.Popen([str(node), str(repo_root / "bench" / "reversal_step.mts"), "serve"], cwd=repo_root,
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, bufsize=1)
    inside = []
    ts = iter(range(1, 10**9))

    def step():
        proc.stdin.write(f"{next(ts) % 10 + 1}\n")
        proc.stdin.flush()
        inside.append(float(proc.stdout.readline()))

    try:
        for _ in range(20):  # warm the JIT
            step()
        inside.clear()
        benchmark.pedantic(step, rounds=ROUNDS, iterations=1)
    finally:
        proc.stdin.close()
        proc.wait(timeout=30)
    medians["port"] = statistics.median(inside)
    benchmark.extra_info["median_ms_inside_node"] = medians["port"]


@pytest.mark.parametrize("threads", ["default", 1])
def test_torch_step(benchmark, medians, threads):
    torch_loss = _torch_loss()
    default_threads = torch.get_num_threads()
    if threads != "default":
        torch.set_num_threads(threads)
    run = reversal_setup(CONFIG, Generator(SEED))
    rng = Generator(SEED)
    model = reversal_model_config(CONFIG)
    from reference.reversal import LAB_EXAMPLE
    from reference.transformer import init_transformer_params

    init_transformer_params(rng, model)  # the same draws as reversal_setup, then the data
    train = dg.digits_data(rng, CONFIG["n_train"], CONFIG["n_test"], CONFIG["min_digits"], CONFIG["max_digits"],
                           reserved=[LAB_EXAMPLE])["train"]
    P = {n: torch.tensor(run["params"][n], dtype=torch.float64, requires_grad=True) for n in run["names"]}
    batches = [dg.take_rows(train, dg.batch_rows(CONFIG["n_train"], CONFIG["batch"], t)) for t in range(1, 11)]
    ts = iter(range(1, 10**9))

    def step():
        for p in P.values():
            p.grad = None
        loss = torch_loss(P, model, batches[next(ts) % 10])
        loss.backward()
        return loss

    loss = step()
    ref_loss, _ = run["step_fn"](run["params"], 1)
    assert abs(float(torch_loss(P, model, batches[0]).detach()) - ref_loss) < 1e-9, "torch must compute the same loss"
    for _ in range(3):
        step()
    try:
        benchmark.pedantic(step, rounds=ROUNDS, iterations=1)
    finally:
        torch.set_num_threads(default_threads)
    medians["torch" if threads == "default" else f"torch_{threads}"] = 1e3 * benchmark.stats.stats.median
    benchmark.extra_info["threads"] = default_threads if threads == "default" else threads
    assert np.isfinite(float(loss.detach()))
