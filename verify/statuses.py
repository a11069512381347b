"""The status words a report holds (docs/runner.md): of a tensor, a case, a check. verify/verdict.py
decides them; the renderers and verify/advice.py read them from here, without importing the run."""

BIT_IDENTICAL = "bit-identical"
WITHIN = "within the tolerance"
PARTED = "parted"  # a free-run output beyond the tolerance: reported, not failed (unless --bitwise)
FAILED = "failed"
NOT_RUN = "not run"
