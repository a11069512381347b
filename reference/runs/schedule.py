"""The schedule of a baked run, read from its case's config (twin: port_ts/src/runs/schedule.ts;
docs/training.md): steps, the learning rate lr, the clipping threshold clip (null: never clip)
and checkpoint_every, config keys of the same names. Each run's setup returns it in its run dict
(cases/cases_training.py describes the dict).
"""

from ..core import case_config as cc


def schedule(config):
    """{steps, lr, clip, checkpoint_every} from the config; clip may be null (never clip)."""
    steps = cc.positive_int(config, "steps")
    every = cc.positive_int(config, "checkpoint_every")
    clip = None if cc.get(config, "clip") is None else cc.positive_number(config, "clip")
    return {"steps": steps, "lr": cc.positive_number(config, "lr"), "clip": clip, "checkpoint_every": every}
