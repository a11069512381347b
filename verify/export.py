"""`verify export attention`: the baked training runs in the form a site replays (docs/training.md,
"Export"). For each training case the port (the engine the site runs) trains from the case's seed;
the export holds the run's configuration and seed, its per-step records, what the site shows
(decodes, attention maps, metrics), the trained parameters, and the digests that tie it to the
committed goldens. One JSON file per run, in the golden text layout (keys sorted, shortest
round-trip floats), so a re-export of an unchanged run changes no byte."""

from pathlib import Path

from . import engines as engines_mod
from . import lifecycle
from .documents import DocumentError, read
from .errors import InputError

EXPORT_VERSION = 1


def _state_params(state_doc):
    """{name: tensor doc} of the parameters in a state document (`param.<name>` outputs)."""
    return {name[len("param."):]: t for name, t in state_doc["outputs"].items() if name.startswith("param.")}


def build(case, golden_doc, final_state):
    """The export document of one run from the engine's golden document and its last state."""
    outputs = golden_doc["outputs"]
    steps = case.spec["config"].get("steps")
    return {
        "export_version": EXPORT_VERSION,
        "id": case.id,
        "op": case.op,
        "seed": case.spec["seed"],
        "config": case.spec["config"],
        "generator": golden_doc["generator"],
        "engine": golden_doc["engine"],
        "steps": steps,
        "history": {name: outputs[name] for name in ("loss", "grad_norm") if name in outputs},
        "shown": {name: t for name, t in outputs.items() if name not in ("loss", "grad_norm")},
        "parameters": _state_params(final_state),
        "digests": dict(golden_doc.get("digests") or {}, final_state=final_state.get("digests", {}).get("state")),
    }


def export(project, selected, out_dir, timeout, port_cmd=None):
    """Run the port on the selected training cases and write <out_dir>/<id>.json for each."""
    from reference.core.golden import dumps  # the golden text layout, shared with the reference engine

    training = [c for c in selected if c.kind == "training"]
    if not training:
        raise InputError("no training case selected: `verify export` exports the baked training runs (--case 'train.*')")
    port = engines_mod.port_engine(project.root, port_cmd)
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    written = []
    with lifecycle.temp_dir("verify-export-") as work:
        run = engines_mod.run(port, [c.spec for c in training], Path(work) / "port", timeout)
        for case in training:
            status = run.statuses.get(case.id) or {}
            if not status.get("ok"):
                raise InputError(f"the port failed on {case.id}: {status.get('error', 'no status line')}")
            try:
                golden_doc = read(run.out_dir / f"{case.id}.json")
                last = case.spec["config"]["steps"]
                final_state = read(run.out_dir / f"{case.id}.states" / f"step_{last}.json")
            except (DocumentError, KeyError) as exc:
                raise InputError(f"the port's output for {case.id} cannot be exported: {exc}") from None
            path = out_dir / f"{case.id}.json"
            path.write_text(dumps(build(case, golden_doc, final_state)) + "\n", encoding="utf-8")
            written.append(path)
    return written
