"""The port's product kernel, chosen by the request (docs/protocol.md, "Product kernel"): the
request's "kernel" (or cli.ts's --kernel) sets productEngine.mode for the whole run, each status
line counts the products each kernel ran, a bad value is a request error, and the two kernels give
the same documents byte for byte. The forced JavaScript kernel is verified as a reader without
Wasm SIMD runs it: a bug in the JavaScript kernel that "auto" lets through (its large products run
in Wasm) is caught with "kernel": "js". The three Wasm modules kernels/wasm.ts assembles are
valid and as large as the documents say."""

import json
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from helpers import assert_one_line_error, run_verify
from toolkit import catalogue_case

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "scripts"))

import engine_identity  # noqa: E402

# A case with products on both sides of the "auto" threshold (4096 multiply-adds): the encoder-
# decoder forward. Taken from the catalogue, never written here.
MIXED_CASE = "transformer.one_plus_one"


def handed(spec, tmp_path):
    """{"inputs_from": ...} for a request of spec: what the reference draws for it (docs/protocol.md)."""
    out = tmp_path / "reference"
    proc = subprocess.run([sys.executable, "-m", "reference", "run"], input=json.dumps({"out_dir": str(out), "cases": [spec]}),
                          capture_output=True, text=True, cwd=ROOT, timeout=300)
    assert json.loads(proc.stdout)["ok"], proc.stdout + proc.stderr
    return {"inputs_from": {spec["id"]: str(out / f"{spec['id']}.handed.json")}}


def run_cli(node, request, *flags, cli=None):
    return subprocess.run([str(node), str(cli or ROOT / "port_ts" / "src" / "cli.ts"), "run", *flags],
                          input=json.dumps(request), capture_output=True, text=True, cwd=ROOT, timeout=300)


def test_the_request_field_picks_the_kernel_and_the_status_line_counts_it(node, tmp_path):
    spec = catalogue_case(MIXED_CASE)
    given = handed(spec, tmp_path)
    counts, documents = {}, {}
    for kernel in ("auto", "js", "wasm"):
        out = tmp_path / kernel
        proc = run_cli(node, {"protocol": 1, "out_dir": str(out), "kernel": kernel, "cases": [spec], **given})
        assert proc.returncode == 0, proc.stderr
        (status,) = [json.loads(line) for line in proc.stdout.splitlines()]
        assert status["ok"], status
        counts[kernel] = status["kernel"]
        documents[kernel] = (out / f"{MIXED_CASE}.json").read_bytes()
    assert counts["js"]["wasm"] == 0 and counts["js"]["js"] > 0, counts
    assert counts["wasm"]["js"] == 0 and counts["wasm"]["wasm"] > 0, counts
    assert counts["auto"]["js"] > 0 and counts["auto"]["wasm"] > 0, counts  # both sides of the threshold
    # every product is counted once, whichever kernel ran it
    assert len({sum(c.values()) for c in counts.values()}) == 1, counts
    assert documents["js"] == documents["auto"] == documents["wasm"]


def test_the_command_line_flag_picks_the_kernel_too(node, tmp_path):
    spec = catalogue_case(MIXED_CASE)
    proc = run_cli(node, {"protocol": 1, "out_dir": str(tmp_path / "out"), "cases": [spec], **handed(spec, tmp_path)}, "--kernel", "js")
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout)["kernel"]["wasm"] == 0


@pytest.mark.parametrize("kernel, flags, fragment", [
    ("gpu", [], "the request's 'kernel' must be one of auto, js, wasm, got \"gpu\""),
    (7, [], "got 7"),
    (None, ["--kernel", "fast"], "--kernel must be one of auto, js, wasm"),
    ("js", ["--kernel", "wasm"], "the request's 'kernel' is \"js\" but --kernel is \"wasm\""),
])
def test_an_unknown_or_conflicting_kernel_is_a_request_error(node, tmp_path, kernel, flags, fragment):
    request = {"protocol": 1, "out_dir": str(tmp_path / "out"), "cases": [catalogue_case(MIXED_CASE)]}
    if kernel is not None:
        request["kernel"] = kernel
    proc = run_cli(node, request, *flags)
    assert_one_line_error(proc, fragment)
    assert proc.stdout == "" and not (tmp_path / "out").exists()


# The JavaScript kernel's last-row, last-column loop (odd M, N mod 4 != 0) with its product turned
# into a quotient: the bug issue 17 names.
JS_KERNEL_LINE = "for (let k = 0; k < K; k++) s += A[a0 + k * sak] * B[b0 + k * sbk];"
# The MiniLM cases' products are large: under "auto" they all run in Wasm, so they miss the bug.
LARGE_PRODUCTS_CASE = "pretrained.minilm.lesson"


def js_kernel_bug(tmp_path):
    src = tmp_path / "port_src"
    shutil.copytree(ROOT / "port_ts" / "src", src)
    ops = src / "kernels" / "product.ts"
    text = ops.read_text()
    assert text.count(JS_KERNEL_LINE) == 1, "update JS_KERNEL_LINE to today's productKernel"
    ops.write_text(text.replace(JS_KERNEL_LINE, JS_KERNEL_LINE.replace("] * B[", "] / B[")))
    return src / "cli.ts"


def test_the_forced_js_kernel_catches_a_js_kernel_bug_that_auto_misses(node, tmp_path):
    from verify import assets, models

    assert assets.model_dir() is not None, f"the test extra installs the model: {models.missing_reason()}"
    cli = js_kernel_bug(tmp_path)

    def verdict(port_cmd):
        proc = run_verify(ROOT, "attention", "--case", LARGE_PRODUCTS_CASE, "--port-cmd", port_cmd,
                          "--report", tmp_path / "report.json", timeout=600)
        return proc.returncode, proc.stdout + proc.stderr

    auto_code, auto_out = verdict(f"{node} {cli} run")
    js_code, js_out = verdict(f"{node} {cli} run --kernel js")
    assert auto_code == 0, auto_out  # the gap: "auto" runs this case's products in Wasm alone
    assert js_code == 1 and LARGE_PRODUCTS_CASE in js_out, js_out
    # the faithful variant: the unmodified port with the JavaScript kernel passes
    fine_code, fine_out = verdict(f"{node} {ROOT / 'port_ts' / 'src' / 'cli.ts'} run --kernel js")
    assert fine_code == 0, fine_out


@pytest.mark.slow
def test_the_js_kernel_gives_the_wasm_kernels_documents_byte_for_byte_on_the_whole_catalogue(tmp_path, capsys):
    """Every file of every case (goldens, training states, replays, full pretrained documents)."""
    account = tmp_path / "account.json"
    code = engine_identity.main(["--engine", "node-wasm", "--engine", "node-js", "--json", str(account), "--jobs", "2"])
    printed = capsys.readouterr().out
    assert code == 0, printed
    result = json.loads(account.read_text())
    js = result["engines"]["node-js"]
    assert js["identical"] == len(result["cases"]) and not js["failed_cases"], printed
    assert js["products"]["wasm"] == 0 and result["engines"]["node-wasm"]["products"]["js"] == 0, printed


# The modules' sizes as the documents give them, read from their text (never written here): which
# module, the file, the sentence that holds the figure.
DOCUMENTED_SIZES = [
    ("product", "docs/performance.md", r"a (\d+)-byte module assembled by `productModuleBytes`"),
    ("product", "port_ts/src/kernels/wasm.ts", r"the whole module is (\d+) bytes \(productEngine\.moduleBytes\)"),
    ("productT", "docs/performance.md", r"`productT` \(a (\d+)-byte module"),
    ("rows", "docs/performance.md", r"\(`kernels/wasm\.ts`, (\d+) bytes;"),
]
MODULES = """
import { PRODUCT_MODULE, PRODUCT_T_MODULE, ROW_MODULE } from "./src/kernels/wasm.ts";
const modules = { product: PRODUCT_MODULE, productT: PRODUCT_T_MODULE, rows: ROW_MODULE };
console.log(JSON.stringify(Object.fromEntries(Object.entries(modules).map(([k, b]) => [k, { bytes: b.length, valid: WebAssembly.validate(b) }]))));
"""


def test_each_wasm_module_is_valid_and_as_large_as_the_documents_say(node, repo_root):
    proc = subprocess.run([str(node), "--input-type=module", "-e", MODULES], cwd=repo_root / "port_ts",
                          capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    modules = json.loads(proc.stdout)
    for module, info in modules.items():
        assert info["valid"], (f"the {module} module does not validate (WebAssembly.validate): "
                               "its builder in kernels/wasm.ts wrote a bad instruction")
    for module, path, pattern in DOCUMENTED_SIZES:
        found = re.findall(pattern, (repo_root / path).read_text())
        assert len(found) == 1, f"expected one figure for the {module} module in {path} ({pattern}), found {len(found)}"
        assert int(found[0]) == modules[module]["bytes"], (
            f"{path} says the {module} module is {found[0]} bytes, but it is {modules[module]['bytes']}: "
            "write its size there as it is now")
