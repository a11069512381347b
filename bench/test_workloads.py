"""Benchmarks of every workload of bench/workloads.py in the reference, the port and PyTorch
float64 on the CPU (docs/performance.md, "Benchmarks: every primitive, each model's step, a
gradient check"):

    python -m pytest bench/ -p no:cacheprovider
    BENCH_BUDGET_SCALE=0.2 python -m pytest bench/ -p no:cacheprovider -k 'chapter or step'   # a quick look

Not part of the default test command (testpaths is tests/). One test per workload and engine,
grouped by workload in pytest-benchmark's table; at the end bench/conftest.py prints one table
of the medians and the ratios reference / port and torch / port.

- reference: the call timed by pytest-benchmark (`benchmark.pedantic`, one call per round).
- port: one Node process for the session (bench/workloads.mts serve) sets the workload up, warms
  it up and times each round inside Node with process.hrtime, so neither start-up nor the pipe is
  counted. Node's own round times are fed into pytest-benchmark's statistics: the benchmark's
  clock is replaced by one that advances by exactly each of Node's round times
  (`record_node_times`), so pytest-benchmark's min, median, mean, ... are Node's.
- torch: the torch composition of bench/torch_ops.py on the reference's arrays, on 1 thread (the
  port and the reference use one core); the models' steps also on torch's default thread count.

Before timing, each engine's outputs of its first call are compared with the reference's:
the port to 1e-12, torch to 1e-9 (relative to max(1, max |reference|)), so a benchmark cannot
time the wrong work.
"""

import json
import os
import statistics
import subprocess
import time

import pytest
import torch

from reference.core.rng import Generator
from torch_ops import torch_call
from workloads import (MAX_ROUNDS, MAX_WARMUP_CALLS, MIN_ROUNDS, REFERENCE, WARMUP, WORKLOADS, agree, budget,
                       reference_call, rounds_for)

PORT_TOL, TORCH_TOL = 1e-12, 1e-9
SCALE = float(os.environ.get("BENCH_BUDGET_SCALE", "1"))
DEFAULT_THREADS = torch.get_num_threads()


def engines(workload):
    return ["reference", "port", "torch"] + (["torch_default"] if workload.part == "step" else [])


CASES = [(w, e) for w in WORKLOADS for e in engines(w)]


@pytest.fixture(scope="session")
def port_server(node, repo_root):
    server = PortServer(node, repo_root)
    yield server
    server.close()


class PortServer:
    """bench/workloads.mts serve: one request line per workload, one answer line."""

    def __init__(self, node, repo_root):
        self.proc = subprocess.Popen([str(node), str(repo_root / "bench" / "workloads.mts"), "serve"], cwd=repo_root,
                                     stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, bufsize=1)

    def run(self, workload):
        warm = WARMUP["node"]
        request = {"op": workload.op, "part": workload.part, "config": workload.config, "seed": workload.seed,
                   "budget_ms": 1e3 * budget(workload, SCALE), "min_rounds": MIN_ROUNDS,
                   "max_rounds": MAX_ROUNDS, "warmup_calls": warm["calls"],
                   "warmup_ms": 1e3 * warm["seconds"]}
        self.proc.stdin.write(json.dumps(request) + "\n")
        self.proc.stdin.flush()
        line = self.proc.stdout.readline()
        assert line, f"the port's benchmark process ended (exit code {self.proc.poll()})"
        answer = json.loads(line)
        if "error" in answer:
            pytest.fail(f"the port failed on {workload.name}: {answer['error']}")
        return answer

    def close(self):
        self.proc.stdin.close()
        self.proc.wait(timeout=30)


_REFERENCE_OUTPUTS = {}


def reference_outputs(workload):
    """The reference's outputs of the workload's first call (computed here when its own benchmark
    did not run, e.g. under -k port)."""
    if workload.name not in _REFERENCE_OUTPUTS:
        _REFERENCE_OUTPUTS[workload.name] = reference_call(workload)[1]
    return _REFERENCE_OUTPUTS[workload.name]


def time_python(benchmark, call, workload):
    """Warm up (WARMUP["python"]), then as many rounds as fill the workload's budget."""
    warm, t0 = [], time.perf_counter()
    while len(warm) < WARMUP["python"]["calls"] or time.perf_counter() - t0 < WARMUP["python"]["seconds"]:
        t1 = time.perf_counter()
        call()
        warm.append(time.perf_counter() - t1)
        if len(warm) >= MAX_WARMUP_CALLS:
            break
    rounds = rounds_for(statistics.median(warm), budget(workload, SCALE))
    benchmark.pedantic(call, rounds=rounds, iterations=1)


def record_node_times(benchmark, times_ms):
    """pytest-benchmark's statistics from Node's own round times. pytest-benchmark (5.x) reads its
    clock from the fixture's `_timer` when it makes each round's runner: a clock that only moves
    when `replay` adds the next of Node's times makes every measured round exactly that time."""
    assert hasattr(benchmark, "_timer"), "pytest-benchmark changed: record_node_times needs its _timer"
    elapsed = [0.0]
    pending = iter(times_ms)

    def node_hrtime():  # seconds of Node's rounds so far
        return elapsed[0]

    def replay():
        elapsed[0] += next(pending) / 1e3

    benchmark._timer = node_hrtime
    benchmark.pedantic(replay, rounds=len(times_ms), iterations=1)


@pytest.mark.parametrize("workload, engine", CASES, ids=[f"{w.name}-{e}" for w, e in CASES])
def test_workload(benchmark, workload, engine, port_server, results):
    benchmark.group = workload.name
    benchmark.extra_info["engine"] = engine
    if engine == "reference":
        call, outputs = reference_call(workload)
        _REFERENCE_OUTPUTS[workload.name] = outputs
        time_python(benchmark, call, workload)
    elif engine == "port":
        answer = port_server.run(workload)
        agree(answer["outputs"], reference_outputs(workload), PORT_TOL, f"{workload.name}: port")
        benchmark.extra_info.update(timer="process.hrtime inside Node", warmup_calls=answer["warmup_calls"])
        record_node_times(benchmark, answer["times_ms"])
        if benchmark.stats:  # (None under --benchmark-disable)
            assert abs(benchmark.stats.stats.median - statistics.median(answer["times_ms"]) / 1e3) < 1e-12
    else:
        threads = 1 if engine == "torch" else DEFAULT_THREADS
        case = REFERENCE[workload.op](workload.config, Generator(workload.seed))  # the reference's arrays
        _, cache = case.forward()  # and its first forward's dropout masks
        torch.set_num_threads(threads)
        try:
            call, outputs = torch_call(workload, case.inputs, cache)
            agree(outputs, reference_outputs(workload), TORCH_TOL, f"{workload.name}: torch",
                  complete=workload.part != "gradcheck")
            time_python(benchmark, call, workload)
        finally:
            torch.set_num_threads(DEFAULT_THREADS)
        benchmark.extra_info["threads"] = threads
    if benchmark.stats:
        results.setdefault(workload.name, {})[engine] = 1e3 * benchmark.stats.stats.median
