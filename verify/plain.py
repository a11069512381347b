"""VERIFY_PLAIN=1: every accelerator of the runner off, each taking its plain path, with the same
report apart from timings (tests/test_plain.py). An accelerator stays only while it saves at least
0.2 s or 5 % of a cached `verify attention` (docs/journal/2026-12-04-accelerators.md). They are:

- documents.Schemas.check("golden", ...): a quick check before the full validator;
- ops.declarations: the suite's declarations read once per process;
- compare.compare_tensor: two tensors of the same finite bits get their figures without arithmetic;
- engines.compile_cache_env: Node's module compile cache for the checkout's own port;
- judge.Judge (verify/suite.py): each case judged as the engines report it, not after them.
"""

import os

ENV = "VERIFY_PLAIN"


def plain():
    """Whether VERIFY_PLAIN is set to anything but "" or "0" (read at every call)."""
    return os.environ.get(ENV, "") not in ("", "0")
