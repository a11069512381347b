"""Where the wall time of a run goes (`--timings`): named sections measured with a context
manager, plus the engines' own figures (start-up, run, the seconds each case took)."""

import time
from contextlib import contextmanager


class Timings:
    def __init__(self):
        self.sections = {}  # name -> seconds, in the order first measured
        self.engines = {}  # name -> {"processes", "wall", "startup", "cases"}
        self.families = {}  # op -> {engine: seconds}
        self.started = time.monotonic()

    @contextmanager
    def section(self, name):
        t0 = time.monotonic()
        try:
            yield
        finally:
            self.add(name, time.monotonic() - t0)

    def add(self, name, seconds):
        self.sections[name] = self.sections.get(name, 0.0) + seconds

    def engine(self, run):
        """Record one EngineRun's figures."""
        self.engines[run.engine.name] = {
            "processes": run.processes,
            "wall": round(run.wall, 4),
            "startup": None if run.startup is None else round(run.startup, 4),
            "cases": round(sum(s["seconds"] for s in run.statuses.values()
                               if isinstance(s.get("seconds"), (int, float)) and not isinstance(s.get("seconds"), bool)), 4),
        }

    def case(self, op, engine, seconds):
        if not isinstance(seconds, (int, float)) or isinstance(seconds, bool):
            seconds = 0.0
        family = self.families.setdefault(op, {})
        family[engine] = round(family.get(engine, 0.0) + float(seconds), 4)

    def to_dict(self):
        return {
            "total": round(time.monotonic() - self.started, 4),
            "sections": {k: round(v, 4) for k, v in self.sections.items()},
            "engines": self.engines,
            "families": self.families,
        }
