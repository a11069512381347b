"""The budgets of the full verification, measured in one session (docs/performance.md, "Budgets").

    python bench/budget.py [--runs N] [--reference fresh|cached|both] [--json FILE] [-- ARGS...]

1. The yardstick: PyTorch float64 eager on one thread trains the reversal model (the case
   train.reversal: its seed, data, batches, Adam at its lr, the book's clipping) for its 600
   steps, timed in this process (wall and CPU; the set-up of data and parameters not counted).
   It is taken again right before every timed run of verify attention, and each run is divided
   by its own yardstick: on a shared machine the load drifts (one session here saw the yardstick
   take 6.7 s and 15 s), and a run and the yardstick just before it see about the same.
2. `python -m verify attention --timings ARGS` (every case the catalogue has; the pretrained ones
   run once `verify fetch-model` has fetched the model), N times, each watched from outside:
   its wall time, the CPU time (user + sys) of its whole process tree (the runner and every
   engine process it waited for), and the peak of the summed resident memory of the tree
   (every process under the runner, /proc sampled every 50 ms). The runner's own work (its CPU
   time) and its share of the wall come from the run's JSON report (`timings`, docs/runner.md),
   and so does the runner's time not waiting for the engines, which is printed beside it.
   --reference says how the reference's side is answered (docs/runner.md, "The reference cache"):
   `fresh` runs with --fresh (the reference runs every case); `cached` fills a private cache of
   this session with one run (reported as the cold run, not counted), then the N timed runs
   answer the reference from it (the port runs every case afresh in every run); `both` (the
   default) does the fresh runs, then the cached ones.

It prints each figure, the median over the runs of each run's ratio to its yardstick (budget: <= 1.5
cached, <= 3 fresh), the runner's own CPU (budget <= 1.5 s, cached; its share of the wall for
information) and the peak memory (budget < 1.5 GB), with the load average
before and after and, from /proc/stat, the CPU time other processes took during the session and
the time the hypervisor stole from this machine's cores: above 5 % of the machine, the figures
were taken on a loaded machine and are not the budgets' figures.
Before anything is timed, the runner's and the reference's modules are compiled to bytecode, as
Python keeps it by default (an environment with PYTHONDONTWRITEBYTECODE set would have every process
compile them anew); the port's compiled modules are Node's compile cache, which the runner turns on
(docs/protocol.md). ARGS go to `verify attention` (e.g. `--jobs 1`). Exits 0 when every run of verify attention
passed, else 1.
"""

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))
sys.path.insert(0, str(ROOT / "tests"))  # torch_ops reads the tests' toolkit, as bench/conftest.py has it

BUDGET_RATIO = {"cached": 1.5, "fresh": 3.0}  # verify attention's wall over its yardstick's (docs/performance.md)
BUDGET_RUNNER_CPU, BUDGET_MEMORY = 1.5, 1.5e9  # seconds of the runner's own CPU in a cached run; bytes
QUIET_SHARE = 0.05  # other processes' CPU, or the hypervisor's steal, above this share of the machine: not quiet
CASE_ID = "train.reversal"


def _case():
    from catalogue import case

    return case(CASE_ID)


def yardstick():
    """(wall s, CPU s) of 600 training steps of the reversal model in torch float64 eager, 1 thread."""
    import torch

    from reference.core.rng import Generator
    from reference.models.transformer import init_transformer_params
    from reference.runs import digits as dg
    from reference.runs.reversal import LAB_EXAMPLE, reversal_model_config
    from torch_ops import _tests_module

    torch_loss = _tests_module("test_reversal").torch_loss
    case = _case()
    config = case["config"]
    model = reversal_model_config(config)
    rng = Generator(case["seed"])
    params = init_transformer_params(rng, model)  # the run's draws: parameters, then the data
    data = dg.digits_data(rng, config["n_train"], config["n_test"], config["min_digits"], config["max_digits"],
                          reserved=[LAB_EXAMPLE])
    steps, clip = config["steps"], config["clip"]
    batches = [dg.take_rows(data["train"], dg.batch_rows(config["n_train"], config["batch"], t))
               for t in range(1, steps + 1)]
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        P = {n: torch.tensor(v, dtype=torch.float64, requires_grad=True) for n, v in params.items()}
        opt = torch.optim.Adam(list(P.values()), lr=config["lr"])  # betas (0.9, 0.999), eps 1e-8, as ours
        c0, t0 = time.process_time(), time.perf_counter()
        for batch in batches:
            opt.zero_grad()
            loss = torch_loss(P, model, batch)
            loss.backward()
            with torch.no_grad():  # the book's clipping: scale by clip / n only when n > clip
                n = torch.sqrt(sum((p.grad ** 2).sum() for p in P.values()))
                if n > clip:
                    for p in P.values():
                        p.grad *= clip / n
            opt.step()
        wall, cpu = time.perf_counter() - t0, time.process_time() - c0
    finally:
        torch.set_num_threads(threads)
    if not float(loss.detach()) < 0.1:
        raise RuntimeError(f"the yardstick did not train: final loss {float(loss.detach())}")
    return wall, cpu


def _machine_cpu():
    """(busy, steal): CPU seconds every core of the machine has spent busy (user, nice, system,
    irq, softirq) and stolen by the hypervisor since boot (/proc/stat), or None where unreadable."""
    try:
        with open("/proc/stat") as fh:
            fields = [int(v) for v in fh.readline().split()[1:9]]
    except (OSError, ValueError):
        return None
    user, nice, system, _idle, _iowait, irq, softirq, steal = fields + [0] * (8 - len(fields))
    tick = os.sysconf("SC_CLK_TCK")
    return (user + nice + system + irq + softirq) / tick, steal / tick


def _own_cpu():
    """CPU seconds of this process and of every child it has waited for (the runs' whole trees)."""
    t = os.times()
    return t.user + t.system + t.children_user + t.children_system


def _tree(root):
    """The pids of root and everything under it (/proc/<pid>/task/<tid>/children)."""
    pids, todo = [], [root]
    while todo:
        pid = todo.pop()
        pids.append(pid)
        try:
            for tid in os.listdir(f"/proc/{pid}/task"):
                with open(f"/proc/{pid}/task/{tid}/children") as fh:
                    todo.extend(int(c) for c in fh.read().split())
        except OSError:
            pass
    return pids


def _rss(pid):
    try:
        with open(f"/proc/{pid}/statm") as fh:
            return int(fh.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
    except (OSError, IndexError, ValueError):
        return 0


def full_run(args, cache=None):
    """One `verify attention --timings ARGS`: exit code, wall s, CPU s of the tree, peak tree RSS
    (bytes), the report's timings and summary. cache: the reference cache's directory, or None
    for a run with --fresh."""
    env = dict(os.environ)
    env.pop("VERIFY_FRESH", None)
    if cache is not None:
        env["VERIFY_REFERENCE_CACHE"] = str(cache)
    with tempfile.TemporaryDirectory() as tmp:
        report = Path(tmp) / "report.json"
        cmd = [sys.executable, "-m", "verify", "attention", "--timings", "--report", str(report), *args,
               *(["--fresh"] if cache is None else [])]
        peak, done = [0, 0], threading.Event()
        t0 = time.perf_counter()
        proc = subprocess.Popen(cmd, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env)

        def watch():
            while not done.is_set():
                pids = _tree(proc.pid)
                total = sum(_rss(p) for p in pids)
                if total > peak[0]:
                    peak[:] = [total, len(pids)]
                done.wait(0.05)

        watcher = threading.Thread(target=watch, daemon=True)
        watcher.start()
        output = proc.stdout.read()
        _, status, usage = os.wait4(proc.pid, 0)
        wall = time.perf_counter() - t0
        done.set()
        watcher.join()
        proc.returncode = os.waitstatus_to_exitcode(status)
        doc = json.loads(report.read_text()) if report.exists() else {}
    # the runner says where the reference came from before the cases and again after them: once here
    tail = list(dict.fromkeys(line for line in output.splitlines() if line.startswith(("reference:", "reports:"))))
    return {"exit": proc.returncode, "wall": wall, "cpu": usage.ru_utime + usage.ru_stime, "peak_rss": peak[0],
            "peak_processes": peak[1], "timings": doc.get("timings", {}), "summary": doc.get("summary", {}),
            "cases": len(doc.get("cases", [])), "notes": tail, "output": output}


def warm_bytecode():
    """Compile the runner's and the reference's modules to bytecode, as Python keeps it by default
    beside each module (__pycache__), so that no timed run pays for compiling them: an environment
    with PYTHONDONTWRITEBYTECODE set never writes it, and every process of a run would compile its
    modules anew. Returns the line that says so."""
    done = subprocess.run([sys.executable, "-m", "compileall", "-q", "verify", "reference"], cwd=ROOT,
                          capture_output=True, text=True)
    said = "written or up to date" if done.returncode == 0 else f"not written ({done.stdout.strip() or done.stderr.strip()})"
    unset = " (PYTHONDONTWRITEBYTECODE is set here: Python would not write it)" if os.environ.get("PYTHONDONTWRITEBYTECODE") else ""
    return f"bytecode of verify/ and reference/: {said}, as Python keeps it by default{unset}"


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--runs", type=int, default=1, help="runs of verify attention (the median is used)")
    ap.add_argument("--reference", choices=("fresh", "cached", "both"), default="both",
                    help="the reference run afresh (--fresh), answered from a cache this session fills, or both")
    ap.add_argument("--json", help="also write every figure to this file")
    ap.add_argument("args", nargs="*", help="arguments for verify attention (after --)")
    a = ap.parse_args()
    load0 = os.getloadavg()
    machine0, own0, t0 = _machine_cpu(), _own_cpu(), time.perf_counter()
    print(f"load average (1, 5, 15 min) at the start: {load0[0]:.2f} {load0[1]:.2f} {load0[2]:.2f}; "
          f"{os.cpu_count()} cores", flush=True)
    print(f"yardstick: torch float64 eager, 1 thread, {_case()['config']['steps']} reversal training steps, "
          "taken before each timed run", flush=True)
    print(warm_bytecode(), flush=True)
    modes = {"fresh": ["fresh"], "cached": ["cached"], "both": ["fresh", "cached"]}[a.reference]
    runs = {mode: [] for mode in modes}
    with tempfile.TemporaryDirectory(prefix="budget-reference-cache-") as cache:
        for mode in modes:
            where = None if mode == "fresh" else Path(cache)
            if mode == "cached":
                cold = full_run(a.args, where)
                _say(cold, "cold: fills the cache, not counted")
            for i in range(a.runs):
                yard_wall, yard_cpu = yardstick()
                print(f"yardstick: {yard_wall:.2f} s wall, {yard_cpu:.2f} s CPU", flush=True)
                r = full_run(a.args, where)
                r["yardstick"] = [yard_wall, yard_cpu]
                runs[mode].append(r)
                _say(r, f"{mode}, run {i + 1}")
    load1 = os.getloadavg()
    machine1, own1, session = _machine_cpu(), _own_cpu(), time.perf_counter() - t0
    others = steal = None
    if machine0 is not None and machine1 is not None:
        others = max(0.0, (machine1[0] - machine0[0]) - (own1 - own0))
        steal = machine1[1] - machine0[1]
    figures = {}
    for mode, done in runs.items():
        ratios = [r["wall"] / r["yardstick"][0] for r in done]
        ratio = statistics.median(ratios)
        own = [r["timings"].get("sections", {}).get("runner's own work") for r in done]
        total = [r["timings"].get("total") for r in done]
        shares = [o / t for o, t in zip(own, total) if o is not None and t]
        busy = [r["timings"].get("sections", {}).get("runner, not waiting") for r in done]
        busy_shares = [b / t for b, t in zip(busy, total) if b is not None and t]
        peak = max(r["peak_rss"] for r in done)
        figures[mode] = {"ratio": ratio, "ratios": ratios, "runner_share": shares,
                         "runner_not_waiting_share": busy_shares, "peak_rss": peak}
        pairs = ", ".join(f"{r['wall']:.2f} / {r['yardstick'][0]:.2f}" for r in done)
        print(f"{mode}: ratio verify attention / its yardstick = {ratio:.2f}, the median of "
              f"{', '.join(f'{q:.2f}' for q in ratios)} ({pairs} s) (budget <= {BUDGET_RATIO[mode]:g}); best run {min(ratios):.2f}")
        if shares:
            mine = statistics.median(o for o in own if o is not None)
            print(f"{mode}: runner's own work {mine:.2f} s of CPU"
                  + (f" (budget <= {BUDGET_RUNNER_CPU:g} s)" if mode == "cached" else "")
                  + f", {100 * statistics.median(shares):.1f} % of the wall"
                  + (f"; the runner not waiting for the engines {100 * statistics.median(busy_shares):.1f} %" if busy_shares else ""))
        print(f"{mode}: peak memory of the process tree {peak / 1e6:.0f} MB (budget < {BUDGET_MEMORY / 1e9:g} GB)")
    print(f"load average (1, 5, 15 min) at the end: {load1[0]:.2f} {load1[1]:.2f} {load1[2]:.2f} (this session's own runs included)")
    if others is not None:
        capacity = session * os.cpu_count()
        quiet = others <= QUIET_SHARE * capacity and steal <= QUIET_SHARE * capacity
        print(f"other processes: {others:.1f} s of CPU during the session's {session:.0f} s "
              f"({100 * others / capacity:.1f} % of {os.cpu_count()} cores); stolen by the hypervisor: {steal:.1f} s "
              f"({100 * steal / capacity:.1f} %)"
              + ("" if quiet else f"  (above {100 * QUIET_SHARE:g} %: a loaded machine, these are not the budgets' figures)"))
    if a.json:
        _write_whole(Path(a.json), json.dumps({
            "load": [load0, load1], "other_cpu_s": others, "steal_s": steal, "session_s": session,
            "args": a.args, "figures": figures,
            "runs": {mode: [{k: v for k, v in r.items() if k != "output"} for r in done] for mode, done in runs.items()},
        }, indent=1) + "\n")
    return 0 if all(r["exit"] == 0 for done in runs.values() for r in done) else 1


def _write_whole(path, text):
    """path holds the whole text or what it held before (a temporary file, then a rename)."""
    temp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    try:
        temp.write_text(text, encoding="utf-8")
        os.replace(temp, path)
    finally:
        if temp.exists():
            temp.unlink()


def _say(r, what):
    share = r["timings"].get("sections", {}).get("runner's own work")
    print(f"verify attention ({what}): exit {r['exit']}, {r['cases']} cases, "
          f"{r['wall']:.2f} s wall, {r['cpu']:.2f} s CPU (the whole tree, user + sys), "
          f"runner's own work {share if share is None else f'{share:.2f} s of CPU'}, "
          f"peak memory {r['peak_rss'] / 1e6:.0f} MB ({r['peak_processes']} processes)", flush=True)
    for note in r["notes"]:
        print(f"  {note}")
    if r["exit"] != 0:
        print(r["output"][-3000:])


if __name__ == "__main__":
    sys.exit(main())
