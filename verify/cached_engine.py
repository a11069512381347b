"""An engine that answers from a finished run (verify faults, docs/faults.md).

    python -m verify.cached_engine CACHE_DIR -- REAL COMMAND ...

It speaks docs/protocol.md: for every case of the request it links the files the real engine
wrote for it into the request's out_dir (<id>.json, <id>.full.json, <id>.states) and prints the
status line the real engine printed. A request with a "replay" field (the port replaying the
reference's states) cannot be answered from a cache: it is handed, unchanged, to the real command.
"""

import json
import os
import subprocess
import sys
from pathlib import Path

from verify import layout


def main(argv):
    if len(argv) < 3 or argv[1] != "--":
        print("usage: python -m verify.cached_engine CACHE_DIR -- REAL COMMAND ...", file=sys.stderr)
        return 2
    cache, real = Path(argv[0]), argv[2:]
    text = sys.stdin.read()
    request = json.loads(text)
    if request.get("replay"):
        return subprocess.run(real, input=text, text=True).returncode
    statuses = json.loads((cache / layout.STATUSES).read_text(encoding="utf-8"))
    out_dir = Path(request["out_dir"])
    out_dir.mkdir(parents=True, exist_ok=True)
    for spec in request["cases"]:
        case_id = spec["id"]
        if case_id not in statuses:
            print(f"cached engine: no cached output for case {case_id!r} in {cache}", file=sys.stderr)
            return 3
        for name in layout.case_files(case_id):
            source = cache / layout.KEPT_OUT / name
            if source.exists() and not (out_dir / name).exists():
                os.symlink(source, out_dir / name)
        print(json.dumps(statuses[case_id]), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
