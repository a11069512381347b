"""The runner: runs the NumPy reference and the TypeScript port on the case catalogue, validates
and compares what they write, checks the committed goldens, and reports (docs/runner.md)."""

__version__ = "0.1.0"
