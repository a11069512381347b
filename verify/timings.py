"""Where the wall time of a run goes (`--timings`): named sections measured with a context
manager, plus the engines' own figures (start-up, run, the seconds each case took).

The engines, the replay and the first comparisons overlap (verify/schedule.py), so the sections do
not add up to the wall. "runner's own work" is the runner's CPU time (every thread); "runner, not
waiting" is the wall minus the time it waited for the engines: its own work plus the time the
engines' processes held the cores it was ready to run on."""

import os
import time
from contextlib import contextmanager

OWN_WORK = "runner's own work"
NOT_WAITING = "runner, not waiting"


def _cpu():
    """CPU seconds this process has used (user and system, every thread), from its start."""
    return sum(os.times()[:2])


def _is_seconds(value):
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def _process_age():
    """Seconds since this process started (Linux /proc; 0.0 elsewhere): the interpreter's start-up
    and imports are the runner's own work too."""
    try:
        with open("/proc/self/stat", encoding="ascii") as fh:
            start_ticks = int(fh.read().rsplit(")", 1)[1].split()[19])
        with open("/proc/uptime", encoding="ascii") as fh:
            uptime = float(fh.read().split()[0])
        return max(0.0, uptime - start_ticks / os.sysconf("SC_CLK_TCK"))
    except (OSError, ValueError, IndexError):
        return 0.0


class Timings:
    def __init__(self, from_process_start=False):
        self.sections = {}  # name -> seconds, in the order first measured
        self.engines = {}  # name -> {"processes", "wall", "startup", "cases"}
        self.families = {}  # op -> {engine: seconds}
        self.started = time.monotonic() - (_process_age() if from_process_start else 0.0)
        self.waiting = 0.0  # seconds the runner spent waiting for engine processes
        self.jobs = None  # --jobs: engine processes at once
        self.cpu_started = 0.0 if from_process_start else _cpu()
        if from_process_start:
            self.add("runner start-up", time.monotonic() - self.started)

    @contextmanager
    def section(self, name):
        t0 = time.monotonic()
        try:
            yield
        finally:
            self.add(name, time.monotonic() - t0)

    def add(self, name, seconds):
        self.sections[name] = self.sections.get(name, 0.0) + seconds

    def waited(self, seconds):
        self.waiting += seconds

    def engine(self, run, name=None):
        """Record one EngineRun's figures (under `name`, by default the engine's)."""
        self.engines[name or run.engine.name] = {
            "processes": run.processes,
            "wall": round(run.wall, 4),
            "startup": None if run.startup is None else round(run.startup, 4),
            "cases": round(sum(s["seconds"] for s in run.statuses.values()  # a cached case ran nowhere
                               if _is_seconds(s.get("seconds")) and "from_cache" not in s), 4),
        }

    def case(self, op, engine, seconds):
        family = self.families.setdefault(op, {})
        family[engine] = round(family.get(engine, 0.0) + (float(seconds) if _is_seconds(seconds) else 0.0), 4)

    def to_dict(self):
        total = time.monotonic() - self.started
        sections = dict(self.sections)
        sections[OWN_WORK] = max(0.0, _cpu() - self.cpu_started)
        sections[NOT_WAITING] = max(0.0, total - self.waiting)
        return {
            "total": round(total, 4),
            "sections": {k: round(v, 4) for k, v in sections.items()},
            "engines": self.engines,
            "families": self.families,
            **({"jobs": self.jobs} if self.jobs else {}),
        }
