"""The command-line options several commands share (`verify attention`, `verify regen`, and the side
commands of verify/tools/): their types, checks and help texts, declared once."""

import argparse
import math
import re
import sys
from pathlib import Path

from . import engines
from .compare import DEFAULT_TOL

# A number as a person writes it: digits, an optional fraction, an optional exponent. float() also
# reads '1_0' (10), ' 1', 'nan', 'inf', 'infinity', and float.fromhex '0x1p-3': all refused.
PLAIN_NUMBER = re.compile(r"(?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+)(?:[eE][+-]?[0-9]+)?")

# --tol is below 1: at 1 an element passes when it is within 1 + |reference| of the reference, so a
# port that doubles every output passes; beyond, tol * (1 + |reference|) overflows to infinity.
MAX_TOL = 1.0
MAX_JOBS = 64  # --jobs beyond this runs this many (with a note): each job is an engine process and a thread


def positive(text):
    value = float(text) if PLAIN_NUMBER.fullmatch(text) else math.nan
    if not (math.isfinite(value) and value > 0):
        raise argparse.ArgumentTypeError(f"expected a positive number written in decimal (30, 0.5, 1e-6), got {text!r}")
    return value


def tolerance(text):
    value = positive(text)
    if not value < MAX_TOL:
        raise argparse.ArgumentTypeError(f"expected a positive number below {MAX_TOL:g} (the default is {DEFAULT_TOL:g}), "
                                         f"got {text!r}: at {MAX_TOL:g} and beyond the rule passes a port that doubles "
                                         "every output")
    return value


class _Tol(argparse.Action):
    """--tol, given at most once; one warning line on stderr when it is looser than the default."""

    def __call__(self, parser, namespace, value, option_string=None):
        if getattr(namespace, "tol_given", False):
            parser.error(f"--tol given twice ({namespace.tol:g} and {value:g}); give it once")
        namespace.tol, namespace.tol_given = value, True
        if value > DEFAULT_TOL:
            print(f"verify: warning: --tol {value:g} is looser than the default {DEFAULT_TOL:g}: every case that does "
                  "not declare its own tolerance is judged at it", file=sys.stderr)


def tol_option(p, help):
    p.add_argument("--tol", type=tolerance, action=_Tol, default=DEFAULT_TOL, metavar="T",
                   help=help + f" (default {DEFAULT_TOL:g}; below {MAX_TOL:g}; a looser one than the default is warned of)")


def jobs(text):
    try:
        value = int(text)
    except ValueError:
        value = 0
    if value < 1:
        raise argparse.ArgumentTypeError(f"expected a whole number of processes (1 or more), got {text!r}")
    return value


def timeout_option(p, what="stop an engine that runs longer than this", default=engines.DEFAULT_TIMEOUT):
    p.add_argument("--timeout", type=positive, default=default, metavar="SECONDS", help=f"{what} (default {default:g})")


def output_options(p):
    p.add_argument("--html", type=Path, metavar="FILE",
                   help="also write a self-contained HTML report (heatmaps, loss curves, decode tables) to FILE")
    p.add_argument("--junit", type=Path, metavar="FILE",
                   help="also write JUnit XML (one testcase per case) to FILE")
    p.add_argument("--timings", action="store_true",
                   help="print where the wall time went: each engine's start-up and run, the replay, each case "
                        "family, the comparison, the report writing")


def bitwise_option(p):
    p.add_argument("--bitwise", action="store_true",
                   help="also fail anything short of bit identity between the engines: every tensor, the free runs "
                        "of the training cases, the replay, the evaluation, the bitwise-only digests, and each "
                        "engine's own goldens (the project's CI runs with it)")


def run_options(p):
    """The options of a verification run, `verify attention` and `verify regen` alike."""
    p.add_argument("--case", metavar="PATTERN", action="append", default=[],
                   help="select cases whose id matches PATTERN: a glob (fnmatch, on the whole id) or, "
                        "without * ? [, a substring; repeat to select more")
    tol_option(p, "tolerance: an element passes when |port - reference| <= T * (1 + |reference|); a case "
                  "may declare its own, in expect.tolerance")
    bitwise_option(p)
    timeout_option(p)
    p.add_argument("--jobs", type=jobs, default=2, metavar="N",
                   help="engine processes running at once (default 2); one work queue hands each process a "
                        "bundle of cases, the long ones first, so an engine may run several processes one after "
                        "another (docs/runner.md, Scheduling); 1: one reference process, then one port process, "
                        "then the replay")
    p.add_argument("--golden-dir", type=Path, metavar="DIR",
                   help="read (or regenerate) goldens in DIR/reference and DIR/port instead of golden/<suite>")
    p.add_argument("--cases-dir", type=Path, metavar="DIR",
                   help="read the cases from DIR/*.json instead of the bundles, ops/<suite>")


def engine_options(p):
    p.add_argument("--port-cmd", metavar="CMD",
                   help="run CMD (split like a shell) as the port instead of node port_ts/src/cli.ts run; it must "
                        "speak docs/protocol.md; its goldens are golden/<suite>/<the name its documents give>")
    p.add_argument("--port-kernel", choices=engines.KERNELS,
                   help="the product kernel the port must use: js forces the JavaScript fallback that readers without "
                        "WebAssembly SIMD run, wasm the SIMD kernel (default: auto, Wasm for the large products); "
                        "each case's line of the report says which ran")
    p.add_argument("--reference-cmd", metavar="CMD",
                   help="run CMD as the reference instead of python -m reference run (for instance "
                        "python -m verify.cached_engine DIR -- python -m reference run, a kept run); the report "
                        "names the command")
