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
  The derived workloads (`<op>.compute[<case id>]`) run in the reference and the port only.

Before timing, each engine's outputs of its first call are compared with the reference's:
the port to 1e-12, torch to 1e-9 (relative to max(1, max |reference|)), so a benchmark cannot
time the wrong work.
"""

import json
import math
import os
import statistics
import subprocess
import time

import numpy as np
import pytest
import torch

from catalogue import catalogue_cases
from reference.cases.cases import COMPUTE, run_case_with_states
from reference.core.rng import Generator
from torch_ops import torch_call
from workloads import (MAX_ROUNDS, MAX_WARMUP_CALLS, MIN_ROUNDS, REFERENCE, WARMUP, WORKLOADS, agree, budget,
                       handed, reference_call, rounds_for)

PORT_TOL, TORCH_TOL = 1e-12, 1e-9
SCALE = float(os.environ.get("BENCH_BUDGET_SCALE", "1"))
DEFAULT_THREADS = torch.get_num_threads()


def engines(workload):
    if workload.part == "compute":  # derived from the catalogue: torch has no composition of its own for it
        return ["reference", "port"]
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

    def run(self, workload, budget_s=None, rounds=(MIN_ROUNDS, MAX_ROUNDS), warm=WARMUP["node"]):
        request = {"op": workload.op, "part": workload.part, "config": workload.config, "seed": workload.seed,
                   "budget_ms": 1e3 * (budget(workload, SCALE) if budget_s is None else budget_s),
                   "min_rounds": rounds[0], "max_rounds": rounds[1], "warmup_calls": warm["calls"],
                   "warmup_ms": 1e3 * warm["seconds"]}
        if workload.part == "compute":  # the document the reference hands the port for the case
            request.update(id=workload.label, handed=handed(workload))
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


# ---- the derived workloads: what they cover, and that they compute the same (nothing timed) ----

@pytest.fixture(scope="session")
def port_compute(node, repo_root):
    """The ops of the port's COMPUTE (bench/workloads.mts compute)."""
    done = subprocess.run([str(node), "bench/workloads.mts", "compute"], cwd=repo_root, capture_output=True, text=True,
                          timeout=120)
    assert done.returncode == 0, done.stderr
    return set(json.loads(done.stdout))


def derived_problems(derived, cases, port_compute):
    """One line per way the derived workloads miss the rule: every op with forward cases and a
    COMPUTE entry in both engines has exactly one, from its largest forward case (most elements of
    the inputs the reference hands the port; ties by the smaller id), and no other op has one."""
    largest = {}  # op -> (elements, case id), from the handed documents themselves
    for case in cases:
        if case["kind"] != "forward" or case["op"] not in COMPUTE or case["op"] not in port_compute:
            continue
        _, _, given = run_case_with_states(case)
        size = sum(math.prod(t["shape"]) for t in given["inputs"].values())
        if case["op"] not in largest or (-size, case["id"]) < (-largest[case["op"]][0], largest[case["op"]][1]):
            largest[case["op"]] = (size, case["id"])
    problems = []
    for op, (size, case_id) in largest.items():
        names = [w.name for w in derived if w.op == op]
        if names != [f"{op}.compute[{case_id}]"]:
            problems.append(f"{op}: expected one derived workload, {op}.compute[{case_id}] (its largest forward case, "
                            f"{size} input elements), found {names or 'none'}; see derived_workloads in bench/workloads.py")
    for w in derived:
        if w.op not in largest:
            problems.append(f"{w.name}: op {w.op!r} has no forward case with a COMPUTE entry in both engines (the "
                            "port's: port_ts/src/cases/cases.ts); expected no derived workload for it")
    return problems


def test_every_op_with_forward_cases_and_compute_in_both_engines_has_one_derived_workload(port_compute):
    derived = [w for w in WORKLOADS if w.part == "compute"]
    problems = derived_problems(derived, catalogue_cases(), port_compute)
    assert not problems, f"{len(problems)} problem(s) with the derived workloads:\n  " + "\n  ".join(problems)
    # the check fails on what it is for: an op left out, an op twice, an op the port cannot compute
    broken = [w for w in derived if w.op != "gelu"] + [derived[0]]
    problems = derived_problems(broken, catalogue_cases(), port_compute - {"rope"})
    assert any(p.startswith("gelu: expected one derived workload") and "found none" in p for p in problems), problems
    assert any(p.startswith(f"{derived[0].op}: expected one") for p in problems), problems
    assert any(p.startswith("rope.compute[") and "no forward case with a COMPUTE entry" in p for p in problems), problems


def test_a_derived_workload_computes_the_references_outputs_in_the_port(port_server):
    """grouped_query_attention's largest case has dropout: the masks come from the generator at the
    handed position, the same in every call and in both engines."""
    workload = next(w for w in WORKLOADS if w.part == "compute" and w.op == "grouped_query_attention")
    call, outputs = reference_call(workload)
    again = call()
    assert all(np.array_equal(again[name], outputs[name]) for name in outputs), "a second call computed other outputs"
    answer = port_server.run(workload, budget_s=0, rounds=(1, 1), warm={"calls": 1, "seconds": 0})
    agree(answer["outputs"], outputs, PORT_TOL, f"{workload.name}: port")
