"""The runner's own work (verify/timings.py) is the CPU its process computed, not the wall it spent
off the engines' clock: time the runner sat idle (or was kept off the cores by the engines'
processes) counts under "runner, not waiting" alone."""

import time

from verify.timings import NOT_WAITING, OWN_WORK, Timings


def _spin(seconds):
    end = time.thread_time() + seconds
    while time.thread_time() < end:
        pass


def test_idle_time_is_not_own_work():
    t = Timings()
    time.sleep(0.4)  # neither computing nor waiting for an engine: the cores were someone else's
    sections = t.to_dict()["sections"]
    assert sections[NOT_WAITING] >= 0.35
    assert sections[OWN_WORK] < 0.1


def test_computing_is_own_work_and_waiting_for_engines_is_neither():
    t = Timings()
    _spin(0.3)
    t0 = time.monotonic()
    time.sleep(0.3)
    t.waited(time.monotonic() - t0)
    sections = t.to_dict()["sections"]
    assert 0.28 <= sections[OWN_WORK] < 0.5
    assert 0.28 <= sections[NOT_WAITING] < 0.5
