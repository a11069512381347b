"""Where things are in an engine's output directory (docs/protocol.md), and in one run's work
directory and a kept run: the one module that spells these names.

    <out_dir>/<id>.json                   the case's main document (a golden's form)
    <out_dir>/<id>.full.json              a pretrained case's every hidden state and attention weight
    <out_dir>/<id>.handed.json            the inputs the reference drew, to hand the port (docs/protocol.md)
    <out_dir>/<id>.states/step_<t>.json   a training run's state at step t (its checkpoints)
    <out_dir>/<id>.replay/step_<t>.json   the port's state at t1 after replaying a segment [t0, t1]
    <out_dir>/<id>.replay/evaluate_<t>.json  the port's evaluation of the reference's state at t
    <out_dir>/<id>.trace.json             a traced case's sub-layers' tensors (docs/protocol.md, "Traces")

A run's work directory holds one out_dir per engine (`engine_dir`) and the port's replays
(`replay_dir`); a kept run (verify/cached_engine.py answers from it) is <dir>/out and
<dir>/statuses.json."""

from pathlib import Path

# An id that is another id plus one of these suffixes would share its files (verify/catalogue.py).
RESERVED_SUFFIXES = (".full", ".handed", ".states", ".replay", ".trace")
STATUSES = "statuses.json"  # a kept run's status lines, {case id: status}
KEPT_OUT = "out"  # a kept run's output directory


def main(out_dir, case_id):
    return Path(out_dir) / f"{case_id}.json"


def full(out_dir, case_id):
    return Path(out_dir) / f"{case_id}.full.json"


def drawn(out_dir, case_id):
    return Path(out_dir) / f"{case_id}.handed.json"


def states(out_dir, case_id):
    return Path(out_dir) / f"{case_id}.states"


def state(out_dir, case_id, step):
    return states(out_dir, case_id) / f"step_{step}.json"


def replayed_state(out_dir, case_id, step):
    return Path(out_dir) / f"{case_id}.replay" / f"step_{step}.json"


def evaluation(out_dir, case_id, step):
    return Path(out_dir) / f"{case_id}.replay" / f"evaluate_{step}.json"


def trace(out_dir, case_id):
    return Path(out_dir) / f"{case_id}.trace.json"


def case_files(case_id):
    """The names a case's free run may leave in its engine's directory (the replay's are apart)."""
    return (f"{case_id}.json", f"{case_id}.full.json", f"{case_id}.handed.json", f"{case_id}.states")


def engine_dir(work_dir, name):
    """The directory an engine's processes of one run write into."""
    return Path(work_dir) / name


def handed(work_dir, case_id):
    """The inputs of a case the runner hands to the port (docs/protocol.md)."""
    return Path(work_dir) / "handed" / f"{case_id}.json"


def attribution_dir(work_dir, name):
    """Where the attribution's engine runs of one run write (reference, port, fed)."""
    return Path(work_dir) / "attribution" / name


def replay_dir(work_dir):
    """The directory the port's replay processes of one run write into."""
    return Path(work_dir) / "port-replay"
