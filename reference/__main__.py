"""The reference engine's command line; the runner speaks to it as to the port (docs/protocol.md).

  python -m reference run            request on stdin, one golden file per case, status lines out
  python -m reference rng-hash --seed S --count N --kind uniform|normal
"""

import argparse
import hashlib
import json
import os
import sys
import time
import traceback

import numpy as np

from . import golden
from .case_config import CaseError
from .cases import run_case
from .rng import Generator


def _run(stream_in, stream_out):
    try:
        request = json.load(stream_in)
        out_dir = request["out_dir"]
        cases = request["cases"]
    except (ValueError, KeyError, TypeError) as exc:
        print(f"reference: the request on stdin must be JSON with 'out_dir' and 'cases': {exc}", file=sys.stderr)
        return 2
    os.makedirs(out_dir, exist_ok=True)
    for case in cases:
        start = time.perf_counter()
        status = {"id": case.get("id")}
        try:
            doc = run_case(case)
            golden.write(os.path.join(out_dir, f"{case['id']}.json"), doc)
            status["ok"] = True
        except CaseError as exc:
            status.update(ok=False, error=str(exc))
        except Exception as exc:  # a bug in the engine: report it on the case, keep going
            status.update(ok=False, error=f"{type(exc).__name__}: {exc}", trace=traceback.format_exc(limit=4))
        status["seconds"] = time.perf_counter() - start
        stream_out.write(json.dumps(status) + "\n")
        stream_out.flush()
    return 0


def _rng_hash(seed, count, kind):
    g = Generator(seed)
    draws = g.uniform(count) if kind == "uniform" else g.normal(count)
    print(hashlib.sha256(draws.astype("<f8").tobytes()).hexdigest())
    return 0


def main(argv=None):
    parser = argparse.ArgumentParser(prog="python -m reference", description="The NumPy reference engine.")
    sub = parser.add_subparsers(dest="command", required=True)
    sub.add_parser("run", help="run the cases of a request read from stdin (docs/protocol.md)")
    h = sub.add_parser("rng-hash", help="SHA-256 of COUNT draws as little-endian float64")
    h.add_argument("--seed", type=int, required=True)
    h.add_argument("--count", type=int, required=True)
    h.add_argument("--kind", choices=["uniform", "normal"], required=True)
    args = parser.parse_args(argv)
    if args.command == "run":
        return _run(sys.stdin, sys.stdout)
    return _rng_hash(args.seed, args.count, args.kind)


if __name__ == "__main__":
    sys.exit(main())
