"""Issue 2's promise: changing any single constant or operator in the port's maths makes
`verify attention` exit 1 and name a failing case. Each mutation is a one-line edit of a copy of
port_ts/src, run through --port-cmd against the committed goldens."""

import shutil
import subprocess
import sys

import pytest

MUTATIONS = [
    # (file, exact text, replacement, case pattern, a case id the failure must name)
    ("nn/dotProductAttention.ts", "scale = Math.sqrt(D);", "scale = D;", "dot_product_attention.*", "dot_product_attention."),
    ("nn/maskedSoftmax.ts", "k < len ? 1 : 0", "k <= len ? 1 : 0", "masked_softmax.*", "masked_softmax.lens_1d"),
    ("nn/maskedSoftmax.ts", "export const MASK_VALUE = -1e6;", "export const MASK_VALUE = -1e3;", "masked_softmax.*", "masked_softmax.scores_near_minus_5e5"),
    ("nn/layerNorm.ts", "export const EPS = 1e-5;", "export const EPS = 1e-6;", "layer_norm.*", "layer_norm."),
    ("nn/additiveAttention.ts", "T[o + h] = mathlib.tanh(F[o + h]);", "T[o + h] = mathlib.tanh(F[o + h] * 0.5);", "additive_attention.*", "additive_attention."),
    ("nn/positionalEncoding.ts", "P.data[i * d + 2 * j] = sin(angle);", "P.data[i * d + 2 * j] = cos(angle);", "sinusoidal_table.*", "sinusoidal_table."),
    ("nn/gelu.ts", "export const SQRT1_2 = 0.7071067811865476;", "export const SQRT1_2 = 0.7071;", "gelu.*", "gelu."),
    ("core/ops.ts", "const ka = k * sak, kb = k * sbk;", "const ka = k * sak, kb = k * sbk; if (k === 0) continue;",
     "multi_head_attention.*", "multi_head_attention."),
    ("core/rng.ts", "const PARITY = 0x1bd11bda;", "const PARITY = 0x1bd11bdb;", "linear.*", "linear."),
]


@pytest.mark.parametrize("filename, old, new, pattern, named", MUTATIONS, ids=[f"{m[0]}:{m[2][:28]}" for m in MUTATIONS])
def test_a_one_line_change_in_the_port_fails_verify(repo_root, node, tmp_path, filename, old, new, pattern, named):
    src = tmp_path / "src"
    shutil.copytree(repo_root / "port_ts" / "src", src)
    target = src / filename
    text = target.read_text()
    assert text.count(old) == 1, f"{filename} no longer holds exactly one {old!r}: update this mutation"
    target.write_text(text.replace(old, new))
    proc = subprocess.run(
        [sys.executable, "-m", "verify", "attention", "--case", pattern, "--port-cmd", f"{node} {src / 'cli.ts'} run"],
        cwd=repo_root, capture_output=True, text=True,
    )
    assert proc.returncode == 1, proc.stdout[-2000:] + proc.stderr[-2000:]
    failing = [line for line in proc.stdout.splitlines() if line.startswith("FAIL")]
    assert any(named in line for line in failing), f"no FAIL line names {named!r}:\n" + "\n".join(failing)
