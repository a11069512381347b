"""`verify export attention`: the baked training runs in the form a site replays (docs/training.md,
"Export"). The port (the engine the site runs) is asked for them through the protocol, with a
request of kind "export" (docs/protocol.md, "Request kinds"): it trains each training case from
its seed and writes the run's export document, in its own golden text layout (keys sorted,
shortest round-trip floats), so a re-export of an unchanged run changes no byte. The runner
checks each document against its case and moves it into place; it writes nothing of its own."""

import argparse
import re
from pathlib import Path

from .. import cli, layout, lifecycle, options
from .. import engines as engines_mod
from ..documents import DocumentError, case_difference, decode_tensor, parse_bytes
from ..errors import EXIT_PASS, InputError
from ..files import check_outputs, write_atomically

EXPORT_VERSION = 1
KEYS = ("export_version", "id", "op", "seed", "config", "steps", "generator", "engine", "history", "shown",
        "parameters", "digests")
TENSOR_GROUPS = ("history", "shown", "parameters")
_HEX = re.compile(r"^[0-9a-f]{64}$")


def check(case, doc):
    """Why doc is not the export of this case (None when it is): the keys, the version, the case
    echoed, every tensor well formed, a digest of the final state."""
    if not isinstance(doc, dict):
        return "it is not a JSON object"
    missing = [k for k in KEYS if k not in doc]
    if missing:
        return f"it lacks {', '.join(missing)}"
    if doc["export_version"] != EXPORT_VERSION:
        return f"export_version is {doc['export_version']!r}, this runner reads {EXPORT_VERSION}"
    for key in ("id", "op", "seed", "config"):
        found = case_difference(case.spec[key], doc[key], key)
        if found:
            return found
    for group in TENSOR_GROUPS:
        if not isinstance(doc[group], dict) or not doc[group]:
            return f"{group} is not an object of tensors"
        for name, t in doc[group].items():
            try:
                decode_tensor(t, f"{group}.{name}")
            except DocumentError as exc:
                return str(exc)
            except (KeyError, TypeError, ValueError):
                return f"{group}.{name} is not a tensor document {{dtype, shape, data}}"
    final = doc["digests"].get("final_state") if isinstance(doc["digests"], dict) else None
    if not (isinstance(final, str) and _HEX.match(final)):
        return f"digests.final_state is {final!r}, not a SHA-256 (hex)"
    return None


def export(project, selected, out_dir, timeout, port_cmd=None):
    """Ask the port for the export of each selected training case; write <out_dir>/<id>.json for
    each, once every one has been received and checked."""
    training = [c for c in selected if c.kind == "training"]
    if not training:
        raise InputError("no training case selected: `verify export` exports the baked training runs (--case 'train.*')")
    port = engines_mod.port_engine(project.root, port_cmd)
    received = []
    with lifecycle.temp_dir("verify-export-") as work:
        run = engines_mod.run(port, [c.spec for c in training], Path(work) / "port", timeout, kind="export")
        for case in training:
            status = run.statuses.get(case.id) or {}
            if not status.get("ok"):
                raise InputError(f"the port failed on {case.id}: {status.get('error', 'no status line')}")
            try:
                data = layout.main(run.out_dir, case.id).read_bytes()
                why = check(case, parse_bytes(data))
            except OSError as exc:
                why = f"it cannot be read ({exc.strerror or exc})"
            except DocumentError as exc:
                why = str(exc)
            if why:
                raise InputError(f"the port's export of {case.id} is not an export document: {why}; an engine answers "
                                 f"a request of kind \"export\" as docs/protocol.md says ({port.command})")
            received.append((case, data))
    out_dir = Path(out_dir)
    written = []
    try:
        out_dir.mkdir(parents=True, exist_ok=True)
        for case, data in received:
            path = out_dir / f"{case.id}.json"
            write_atomically(path, data)
            written.append(path)
    except OSError as exc:
        raise InputError(f"cannot write the exports to {out_dir} ({exc.strerror or exc}); choose another --out") from None
    return written


def parser():
    p = argparse.ArgumentParser(prog="verify export",
                                description="Ask the port for its training runs (a request of kind export) and "
                                            "write, per run, one JSON file with its configuration and seed, loss and "
                                            "gradient norm per step, what the site shows (decodes, attention maps, "
                                            "metrics), the trained parameters and the digests that tie it to the "
                                            "goldens (docs/training.md, \"Export\").")
    p.add_argument("suite", choices=cli.SUITES, help="the suite whose training runs to export")
    p.add_argument("--case", action="append", metavar="PATTERN", help="select runs (default: every training case)")
    p.add_argument("--out", type=Path, metavar="DIR", help="where to write <id>.json (default exports/<suite>)")
    options.timeout_option(p, "stop the port if it runs longer than this")
    p.add_argument("--port-cmd", metavar="CMD", help="export from CMD instead of node port_ts/src/cli.ts run; it must "
                                                     "answer requests of kind export (docs/protocol.md)")
    return p


def run(args, out):
    """Carry out `verify export`: write the selected runs into --out (default exports/<suite>)."""
    if args.out:  # refused before anything runs
        check_outputs([], cli.protected(args), directories=[("--out", args.out)])
    project = cli.Project(args, args.suite)
    _, selected = project.cases(args.case)
    out_dir = args.out or project.root / "exports" / args.suite
    for path in export(project, selected, out_dir, args.timeout, args.port_cmd):
        print(f"wrote {project.display(path)}", file=out)
    return EXIT_PASS
