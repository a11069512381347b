"""Are two port engines' documents the same bytes? Runs the port under several engine commands on
the same request and compares every file they write, case by case (docs/browsers.md):

    python scripts/engine_identity.py                                   # node vs the three browsers
    python scripts/engine_identity.py --engine chromium --engine node-js --case 'train.*'
    python scripts/engine_identity.py --engine 'mine=node my/cli.ts run'    # any protocol command

The first engine is the baseline (default `node`, port_ts/src/cli.ts). Named engines: node,
node-js, node-wasm (cli.ts with --kernel), chromium, firefox, webkit (port_ts/browser/engine.ts),
and chromium-js etc. (a browser with --kernel js); NAME=COMMAND names any other command.

Two requests per engine, as `verify attention` sends them: every selected case (the pretrained
ones with the model's directory when it is installed; each forward case handed the reference's
document, docs/protocol.md), then the training cases' replay, every segment from the reference's
states (the reference runs once, first, on the forward and training cases, for those). For
each engine: its wall time (both processes, start to exit), the reversal run's seconds per step
(its status line's seconds over its steps), and, against the baseline, how many cases wrote
byte-identical files (every file of the case: the golden, the full pretrained document, each
training state, each replayed state); for a file that differs, the tensor, its greatest ULP
distance and where. Exit 0 when every engine matches the baseline
on every case, 1 when one differs, 2 on a usage error or an engine that cannot run. It writes
the account to --json when asked. Wall times on a loaded machine are indicative only; with
--jobs N (default 1) N engines run at once (the reference's training run among them), which
shortens the whole but makes each engine's figures those of a shared machine.
"""

import argparse
import concurrent.futures
import json
import shlex
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from verify import assets as assets_mod  # noqa: E402
from verify import catalogue, engines, schedule  # noqa: E402
from verify.compare import ulp_distance  # noqa: E402
from verify.documents import DocumentError, Schemas, decode_tensors, read  # noqa: E402
from verify.errors import InputError  # noqa: E402
from verify.replay import request_entry  # noqa: E402

BROWSERS = ("chromium", "firefox", "webkit")
KERNELS = ("js", "wasm", "auto")


def engine_argv(spec, node):
    """(name, argv) for an --engine value."""
    if "=" in spec:
        name, command = spec.split("=", 1)
        return name, shlex.split(command)
    base, _, kernel = spec.partition("-")
    if kernel and kernel not in KERNELS:
        raise InputError(f"--engine {spec}: the kernel after '-' must be one of {', '.join(KERNELS)}")
    flag = ["--kernel", kernel] if kernel else []
    if base == "node":
        return spec, [node, "port_ts/src/cli.ts", "run", *flag]
    if base in BROWSERS:
        return spec, [node, "port_ts/browser/engine.ts", "--browser", base, "run", *flag]
    raise InputError(f"--engine {spec}: not one of node, {', '.join(BROWSERS)} (each may end in -js or -wasm), nor NAME=COMMAND")


def files_of(root, case_id):
    """The files a case wrote under root (its main and replay out_dirs), relative to root, sorted."""
    root = Path(root)
    found = []
    for out_dir in (root / "main", root / "replay"):
        found += [p for p in (out_dir / f"{case_id}.json", out_dir / f"{case_id}.full.json") if p.is_file()]
        for sub in ("states", "replay"):
            d = out_dir / f"{case_id}.{sub}"
            if d.is_dir():
                found += sorted(d.glob("step_*.json"))
    return sorted(str(p.relative_to(root)) for p in found)


def tensor_differences(a_path, b_path):
    """[(tensor, max ULP, flat index)] for the tensors that differ; [(what, None, None)] when the
    documents cannot be compared tensor by tensor."""
    try:
        a, b = decode_tensors(read(a_path)), decode_tensors(read(b_path))
    except DocumentError as exc:
        return [(f"unreadable: {exc}", None, None)]
    out = []
    for role in ("inputs", "outputs"):
        ta, tb = a.get(role, {}), b.get(role, {})
        for name in sorted(set(ta) | set(tb)):
            if name not in ta or name not in tb:
                out.append((f"{role}.{name} only in one", None, None))
                continue
            x, y = ta[name].values, tb[name].values
            if x.shape != y.shape or ta[name].dtype != tb[name].dtype:
                out.append((f"{role}.{name} {ta[name].dtype} {x.shape} vs {tb[name].dtype} {y.shape}", None, None))
                continue
            if ta[name].dtype == "float64":
                d = ulp_distance(x.ravel(), y.ravel())
                nan_mismatch = (x != x).ravel() != (y != y).ravel()
                if d.size and (int(d.max()) > 0 or nan_mismatch.any()):
                    out.append((f"{role}.{name}", int(d.max()), int(d.argmax())))
            elif (x != y).any():  # integers: how many differ, and the first
                out.append((f"{role}.{name}: {int((x != y).sum())} of {x.size} integers differ, the first at flat index "
                            f"{int((x != y).ravel().argmax())}", None, None))
    if not out:
        out.append(("same tensors, other bytes (metadata or layout)", None, None))
    return out


def compare(base_dir, other_dir, case_ids):
    """{case id: None when byte-identical, else a list of differences}."""
    result = {}
    for cid in case_ids:
        fa, fb = files_of(base_dir, cid), files_of(other_dir, cid)
        diffs = []
        if fa != fb:
            diffs.append({"file": None, "what": f"files differ: {sorted(set(fa) ^ set(fb))}"})
        for rel in sorted(set(fa) & set(fb)):
            pa, pb = Path(base_dir) / rel, Path(other_dir) / rel  # rel starts with main/ or replay/
            if pa.read_bytes() != pb.read_bytes():
                for what, ulp, where in tensor_differences(pa, pb):
                    diffs.append({"file": rel, "what": what, "max_ulp": ulp, "index": where})
        result[cid] = diffs or None
    return result


def _reference(needed, work, timeout):
    """The reference's run of the forward, gradient-check and training cases: the states it leaves
    in work/reference, and {case id: the document of what it drew} as verify hands them
    (schedule.hand_inputs)."""
    if not needed:
        return None, {}
    t0 = time.monotonic()
    engines.run(engines.reference_engine(ROOT), [c.spec for c in needed], work / "reference", timeout)
    print(f"reference: the handed cases' inputs and the training cases' states in {time.monotonic() - t0:.1f} s")
    handed = {c.id: schedule.hand_inputs(work / "reference", work, c.id) for c in needed if c.kind in schedule.HANDED_KINDS}
    return work / "reference", {cid: str(path) for cid, path in handed.items() if path is not None}


def _run_engine(argv_, cases, training, states, out, timeout, extra):
    """One engine's two requests: every case (the forward ones and the gradient checks handed what
    the reference drew), then the training cases' replay. (run, wall seconds of both, the cases whose replay was not ok)."""
    port = engines.Engine("port", argv_, ROOT)
    if any(c.kind in schedule.HANDED_KINDS for c in cases):
        extra = dict(extra, inputs_from=states.result()[1])
    run = engines.run(port, [c.spec for c in cases], out / "main", timeout, extra)
    wall, bad_replays = run.wall, []
    replayed = [c for c in training if request_entry(c)["segments"]]
    if replayed:
        from_dir = states.result()[0]
        replay = {c.id: dict(request_entry(c), from_dir=str(from_dir / f"{c.id}.states")) for c in replayed}
        again = engines.run(port, [c.spec for c in replayed], out / "replay", timeout, {"replay": replay})
        wall += again.wall
        bad_replays = [cid for cid, s in again.statuses.items() if not s.get("ok")]
    return run, wall, bad_replays


def per_step(status, case):
    steps = (case.spec.get("config") or {}).get("steps")
    seconds = status.get("seconds") if status else None
    return None if not steps or seconds is None else seconds / steps


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--engine", action="append", help="an engine to run (repeat); the first is the baseline")
    parser.add_argument("--case", action="append", default=[], help="a case pattern (glob or substring; repeat)")
    parser.add_argument("--timeout", type=float, default=3600.0)
    parser.add_argument("--json", help="write the account here")
    parser.add_argument("--keep", help="keep every engine's out_dir under this directory")
    parser.add_argument("--jobs", type=int, default=1, help="engines run at once (default 1: one after the other)")
    args = parser.parse_args(argv)
    try:
        node = str(engines.node_binary())
        wanted = args.engine or ["node", *BROWSERS]
        if len(wanted) == 1:
            wanted = ["node", *wanted]
        named = [engine_argv(s, node) for s in wanted]
        schemas = Schemas(ROOT / "golden" / "schemas")
        every = catalogue.load(ROOT / "ops" / "attention", schemas)
        selected = catalogue.select(every, args.case, "attention") if args.case else every
    except InputError as exc:
        print(f"engine_identity: {exc}", file=sys.stderr)
        return 2
    extra, not_run = assets_mod.plan(selected)
    cases = [c for c in selected if c.id not in not_run]
    for cid, why in not_run.items():
        print(f"{cid}: {why}")
    training = [c for c in cases if c.kind == "training"]
    with tempfile.TemporaryDirectory(prefix="engine-identity-") as tmp:
        work = Path(args.keep or tmp)
        account = {"engines": {}, "cases": [c.id for c in cases]}
        try:
            with concurrent.futures.ThreadPoolExecutor(max_workers=max(1, args.jobs)) as pool:
                needed = [c for c in cases if c.kind in (*schedule.HANDED_KINDS, "training")]
                states = pool.submit(_reference, needed, work, args.timeout)  # first: the engines wait for it
                jobs = [pool.submit(_run_engine, argv_, cases, training, states, work / name, args.timeout, extra)
                        for name, argv_ in named]
                done = [job.result() for job in jobs]
            for (name, argv_), (run, wall, bad_replays) in zip(named, done):
                bad = [cid for cid, s in run.statuses.items() if not s.get("ok")] + [f"{cid} (replay)" for cid in bad_replays]
                browser = next((s.get("browser") for s in run.statuses.values() if s.get("browser")), None)
                kernels = {"wasm": 0, "js": 0}
                for s in run.statuses.values():
                    for k in kernels:
                        kernels[k] += (s.get("kernel") or {}).get(k, 0)
                reversal = next((c for c in cases if c.op == "train_reversal"), None)
                step = per_step(run.statuses.get(reversal.id), reversal) if reversal else None
                account["engines"][name] = {
                    "command": shlex.join(argv_), "wall": wall, "failed_cases": bad, "browser": browser,
                    "products": kernels, "reversal_seconds_per_step": step,
                    "case_seconds": sum(float(s.get("seconds") or 0) for s in run.statuses.values()),
                }
                shown = f" ({browser['name']} {browser['version']})" if browser else ""
                print(f"{name}{shown}: {len(cases)} cases in {wall:.1f} s wall, products wasm {kernels['wasm']} / js {kernels['js']}"
                      + (f", reversal {step * 1000:.1f} ms/step" if step else "")
                      + (f"; {len(bad)} cases not ok: {', '.join(bad[:5])}" if bad else ""))
        except InputError as exc:
            print(f"engine_identity: {exc}", file=sys.stderr)
            return 2
        base = named[0][0]
        differs = False
        for name, _ in named[1:]:
            result = compare(work / base, work / name, [c.id for c in cases])
            same = [cid for cid, d in result.items() if d is None]
            account["engines"][name]["identical_to"] = base
            account["engines"][name]["identical"] = len(same)
            account["engines"][name]["differences"] = {cid: d for cid, d in result.items() if d}
            print(f"{name}: {len(cases)} cases, {len(same)} byte-identical to {base}")
            for cid, d in result.items():
                if d:
                    differs = True
                    for item in d[:8]:
                        ulp = f", max {item['max_ulp']} ULP at flat index {item['index']}" if item.get("max_ulp") is not None else ""
                        print(f"  {cid}: {item['file']}: {item['what']}{ulp}")
        if args.json:
            Path(args.json).write_text(json.dumps(account, indent=1) + "\n", encoding="utf-8")
    return 1 if differs else 0


if __name__ == "__main__":
    sys.exit(main())
