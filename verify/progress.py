"""A one-line progress display for long runs (training cases take most of the time): per engine,
cases done / total, rewritten in place with a carriage return, shown only when the stream is a
terminal; and whole lines (each case's verdict as it is known) printed above it, on a terminal and
in a log alike."""

import threading
import time

INTERVAL = 0.1  # seconds between two redraws of the line


class Progress:
    def __init__(self, stream):
        self.stream = stream
        self.on = hasattr(stream, "isatty") and stream.isatty()
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

    def _draw(self, force=False):
        if not self.on:
            return
        with self._lock:
            now = time.monotonic()
            if not force and now - self._shown < INTERVAL:
                return
            self._shown = now
            parts = [f"{label} {done}/{total}" for label, (done, total) in self.counts.items()]
            text = f"verify: {'  '.join(parts)}  ({now - self.started:.0f} s)"
            self.stream.write("\r" + text + " " * max(0, self._width - len(text)))
            self._width = len(text)
            self.stream.flush()

    def _erase(self):
        """Erase the progress line; the caller holds the lock."""
        if self.on and self._width:
            self.stream.write("\r" + " " * self._width + "\r")
            self.stream.flush()
            self._width = 0

    def print_lines(self, lines):
        """Print whole lines above the progress line (erased first, drawn again after), flushed at
        once, so a CI log shows progress."""
        with self._lock:
            self._erase()
            for line in lines:
                self.stream.write(line + "\n")
            self.stream.flush()
        self._draw(force=True)

    def clear(self):
        """Erase the line before the report is printed."""
        with self._lock:
            self._erase()
