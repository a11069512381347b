"""VERIFY_PLAIN=1: every accelerator of the runner off, each taking its plain path.

An accelerator stays only while it saves at least 0.2 s (or 5 % of the wall) of a cached full
`verify attention`, measured A/B (docs/journal/2026-12-04-accelerators.md). Those that stay:

- documents.parse / parse_bytes: orjson, where its reading is json's to the bit (else json);
- documents.Schemas.check("golden", ...): the quick check (_GoldenQuick) before the full validator;
- ops.declarations: the suite's declarations read once per process, not at every call;
- compare.compare_tensor: two tensors of the same finite bits get their figures without
  elementwise arithmetic (_identical), as the general path would compute them;
- engines.compile_cache_env: Node's module compile cache for the checkout's own port;
- judge.Judge (verify/suite.py): each case judged as both engines report it, while the other
  processes run (about 0.65 s of the wall); plain: every case judged after the engines.

Each asks plain() here, the one place that reads the variable, at every call. With VERIFY_PLAIN
set the report is the same apart from timings (tests/test_plain.py runs both and compares).
"""

import os

ENV = "VERIFY_PLAIN"


def plain():
    """Whether VERIFY_PLAIN is set to anything but "" or "0"."""
    return os.environ.get(ENV, "") not in ("", "0")
