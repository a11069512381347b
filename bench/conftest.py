"""Fixtures of the benchmarks (docs/performance.md): the table of medians and ratios printed at the
end of a run (the checkout and the Node 24 of the wheel: ../conftest.py, shared with tests/)."""

import os
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))  # bench/ modules: workloads, torch_ops, reversal_step
sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))  # the tests' toolkit (tests/toolkit.py)

RESULTS = {}  # workload name -> {engine: median ms}, filled by test_workloads.py
LOAD = {}  # the load average (1, 5, 15 min) at the start and at the end of the session


@pytest.fixture(scope="session")
def results():
    return RESULTS


def pytest_sessionstart(session):
    LOAD["start"] = os.getloadavg()


def _ms(x):
    if x is None:
        return "–"
    return f"{x:.3f}" if x < 1 else f"{x:.2f}" if x < 100 else f"{x:.0f}"


def _ratio(a, b):
    return "–" if a is None or b is None or b <= 0 else f"{a / b:.2f}"


def table_lines(results, threads):
    """The Markdown table: one row per workload that ran, in the order of workloads.WORKLOADS."""
    from workloads import WORKLOADS

    lines = ["| workload | reference ms | port ms | torch 1 thread ms | reference / port | torch 1 thread / port |"
             f" torch {threads} threads ms |",
             "|---|---:|---:|---:|---:|---:|---:|"]
    for w in WORKLOADS:
        r = results.get(w.name)
        if not r:
            continue
        ref, port, torch1, torchn = (r.get(e) for e in ("reference", "port", "torch", "torch_default"))
        lines.append(f"| {w.name} | {_ms(ref)} | {_ms(port)} | {_ms(torch1)} | {_ratio(ref, port)} | "
                     f"{_ratio(torch1, port)} | {_ms(torchn)} |")
    return lines


def pytest_terminal_summary(terminalreporter):
    if not RESULTS:
        return
    import torch

    end = os.getloadavg()
    start = LOAD.get("start", end)
    terminalreporter.section("medians per workload (ms) and ratios; port timed inside Node")
    terminalreporter.write_line(f"load average (1, 5, 15 min): start {start[0]:.2f} {start[1]:.2f} {start[2]:.2f}, "
                                f"end {end[0]:.2f} {end[1]:.2f} {end[2]:.2f}; {os.cpu_count()} cores")
    for line in table_lines(RESULTS, torch.get_num_threads()):
        terminalreporter.write_line(line)
    for name, what in (("reversal_step[train.reversal]", "reversal step"), ("vit_step[train.vit]", "ViT step")):
        step = RESULTS.get(name, {})
        if {"reference", "port", "torch"} <= step.keys():  # docs/performance.md, "Budgets"
            terminalreporter.write_line(
                f"{what}: reference / port = {step['reference'] / step['port']:.2f} (budget >= 3), "
                f"torch 1 thread / port = {step['torch'] / step['port']:.2f} (budget >= 2)")
