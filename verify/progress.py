"""A one-line progress display for long runs (training cases take most of the time): per engine,
cases done / total, rewritten in place with a carriage return, shown only when the stream is a
terminal; and whole lines (each case's verdict as it is known) printed above it, on a terminal and
in a log alike."""

import threading
import time


class Progress:
    def __init__(self, stream, enabled=None, interval=0.1):
        self.stream = stream
        self.on = (hasattr(stream, "isatty") and stream.isatty()) if enabled is None else enabled
        self.interval = interval
        self.counts = {}  # label -> [done, total]
        self.started = time.monotonic()
        self._lock = threading.Lock()
        self._shown = 0.0
        self._width = 0

    def start(self, label, total):
        with self._lock:
            self.counts[label] = [0, total]
        self._draw(force=True)

    def advance(self, label, by=1):
        with self._lock:
            if label in self.counts:
                self.counts[label][0] += by
        self._draw()

    def line(self):
        parts = [f"{label} {done}/{total}" for label, (done, total) in self.counts.items()]
        return f"verify: {'  '.join(parts)}  ({time.monotonic() - self.started:.0f} s)"

    def _draw(self, force=False):
        if not self.on:
            return
        with self._lock:
            now = time.monotonic()
            if not force and now - self._shown < self.interval:
                return
            self._shown = now
            text = self.line()
            pad = max(0, self._width - len(text))
            self._width = len(text)
            self.stream.write("\r" + text + " " * pad)
            self.stream.flush()

    def print_lines(self, lines):
        """Print whole lines (a case's verdict as soon as it is known) above the progress line: on a
        terminal the line is erased first and drawn again after; elsewhere the lines are written and
        flushed at once, so a CI log shows progress."""
        if self.stream is None:
            return
        with self._lock:
            if self.on and self._width:
                self.stream.write("\r" + " " * self._width + "\r")
                self._width = 0
            for line in lines:
                self.stream.write(line + "\n")
            self.stream.flush()
        self._draw(force=True)

    def clear(self):
        """Erase the line before the report is printed."""
        if not self.on:
            return
        with self._lock:
            if self._width:
                self.stream.write("\r" + " " * self._width + "\r")
                self.stream.flush()
            self._width = 0


class Quiet(Progress):
    def __init__(self):
        super().__init__(None, enabled=False)
