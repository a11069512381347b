"""How far a training run's outcome moves with its seed and with faithful changes of arithmetic: the
measurement behind each training case's `expect.free_run` band (docs/runner.md, "Free runs").

    python scripts/free_run_spread.py [--case train.reversal ...] [--seeds 601-620]
                                      [--variant builtins ...] [--variant-seeds 601-605] [--jobs 2]

For every training case of the catalogue (the cases of ops/attention/*.json; or the chosen ones) it runs the port on copies of the case
that differ only in their seed (the case's own seed always among them), and each faithful variant
of the port (tests/port_variants.py) at the variant seeds, and prints per outcome (the names in the
case's `expect.free_run`): the spread over seeds (min, max, max - min), the greatest |variant -
unmodified| at the same seed, and the bands that follow from all the runs together: abs =
BAND_FACTOR * (max - min), ratio = (max / min) ** BAND_FACTOR (docs/runner.md, "Free runs", says
why 1.5). The port is bit-identical to the reference (verify attention --bitwise), so its free
runs are the reference's. Nothing is written into the checkout.
"""

import argparse
import json
import subprocess
import sys
import tempfile
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "tests"))

from verify.documents import decode_tensors, read  # noqa: E402
from verify.engines import node_binary  # noqa: E402

import port_variants  # noqa: E402

BAND_FACTOR = 1.5


def seeds(text):
    lo, _, hi = text.partition("-")
    return list(range(int(lo), int(hi or lo) + 1))


def outcomes(cli, specs, work):
    """{(case id, seed): {outcome name: value}} from one port process on the reseeded cases."""
    out_dir = Path(work) / "out"
    request = {"protocol": 1, "out_dir": str(out_dir), "cases": [s for s, _ in specs]}
    proc = subprocess.run([str(node_binary()), str(cli), "run"], input=json.dumps(request), text=True,
                          capture_output=True, cwd=ROOT)
    if proc.returncode != 0:
        raise SystemExit(f"the port failed: {proc.stderr[-2000:]}")
    found = {}
    for spec, (case_id, seed) in specs:
        outputs = decode_tensors(read(out_dir / f"{spec['id']}.json"))["outputs"]
        names = sorted(spec.get("expect", {}).get("free_run", {})) or sorted(
            n for n, t in outputs.items() if t.values.ndim == 0)
        found[(case_id, seed)] = {n: float(outputs[n].values) for n in names}
    return found


def run_all(cli, cases, seed_list, jobs, work):
    tasks = []
    for case in cases:
        for seed in seed_list:
            spec = dict(case, seed=seed, id=f"{case['id']}.seed{seed}")
            tasks.append((spec, (case["id"], seed)))
    chunks = [tasks[i::jobs] for i in range(jobs)]
    results = {}
    with ThreadPoolExecutor(jobs) as pool:
        for n, part in enumerate(pool.map(lambda c: outcomes(cli, c[1], Path(work) / f"p{c[0]}"), enumerate(chunks))):
            results.update(part)
    return results


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--case", action="append", default=[], help="training case ids (default: all)")
    parser.add_argument("--seeds", type=seeds, default=seeds("601-620"))
    parser.add_argument("--variant", action="append", default=[], choices=sorted(port_variants.VARIANTS))
    parser.add_argument("--variant-seeds", type=seeds, default=None, help="default: the case's own seed")
    parser.add_argument("--jobs", type=int, default=2)
    args = parser.parse_args()
    catalogue = [c for f in sorted((ROOT / "ops" / "attention").glob("*.json"))
                 for c in json.loads(f.read_text())["cases"] if c["kind"] == "training"]
    cases = [c for c in catalogue if not args.case or c["id"] in args.case]
    with tempfile.TemporaryDirectory(prefix="free-run-spread-") as work:
        plain = ROOT / "port_ts" / "src" / "cli.ts"
        base = {}
        for case in cases:
            own = sorted(set(args.seeds) | {case["seed"]})
            base.update(run_all(plain, [case], own, args.jobs, Path(work) / f"plain-all-{case['id']}"))
        variants = {}
        for name in args.variant:
            cli = port_variants.build(ROOT, name, Path(work) / f"variant-{name}")
            for case in cases:
                vseeds = args.variant_seeds or [case["seed"]]
                missing = [s for s in vseeds if (case["id"], s) not in base]
                if missing:
                    base.update(run_all(plain, [case], missing, args.jobs, Path(work) / f"plain-{case['id']}"))
                variants[name, case["id"]] = run_all(cli, [case], vseeds, args.jobs, Path(work) / f"v-{name}-{case['id']}")
    for case in cases:
        cid = case["id"]
        rows = {s: v for (c, s), v in base.items() if c == cid}
        names = sorted(next(iter(rows.values())))
        print(f"{cid} (seeds {min(args.seeds)}-{max(args.seeds)} and {case['seed']}, the catalogue's):")
        for name in names:
            values = [v[name] for v in rows.values()]
            line = (f"  {name:<14} seeds: min {min(values):.6g} max {max(values):.6g} "
                    f"spread {max(values) - min(values):.4g}; catalogue seed {rows[case['seed']][name]:.6g}")
            worst = [(abs(v[(cid, s)][name] - rows[s][name]), vname, s)
                     for (vname, c), v in variants.items() if c == cid for (_, s) in v]
            if worst:
                w = max(worst)
                line += f"; variants: max |variant - port| {w[0]:.4g} ({w[1]}, seed {w[2]})"
            every = values + [v[(cid, s)][name] for (vname, c), v in variants.items() if c == cid for (_, s) in v]
            lo, hi = min(every), max(every)
            line += f"\n  {'':<14} all {len(every)} runs: abs band {BAND_FACTOR * (hi - lo):.4g}"
            if lo > 0:
                line += f", ratio band {(hi / lo) ** BAND_FACTOR:.4g}"
            print(line)
        for (vname, c), v in sorted(variants.items()):
            if c == cid:
                shown = ", ".join(f"seed {s}: " + " ".join(f"{k} {val:.6g}" for k, val in v[(cid, s)].items())
                                  for (_, s) in sorted(v))
                print(f"    {vname}: {shown}")
        print("    plain at its seeds: " + "; ".join(f"{s}: " + " ".join(f"{k} {v:.6g}" for k, v in rows[s].items())
                                              for s in sorted(rows)))


if __name__ == "__main__":
    main()
