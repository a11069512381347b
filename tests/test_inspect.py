"""`verify inspect` on the real model (all-MiniLM-L6-v2 in float64, docs/inspect.md): the engines
asked through the protocol (requests of kind "encode", both command lines), the lesson's exercise 6
answered in one command and checked against an independent float64 run (Hugging Face's BertModel),
the port's answer beside the reference's (a faulty port is shown and fails), one-line usage
errors, and the heatmap page opened in headless Chromium."""

import json
import os
import re
import shutil
import subprocess
import sys
import zlib
from pathlib import Path

import numpy as np
import pytest

from helpers import assert_one_line_error, run_verify
from toolkit import catalogue_case
from test_report_html import _browse, _check_self_contained, chromium  # noqa: F401 (chromium: a fixture)
from verify import assets

LESSON = "The animal didn't cross the street because it was too tired"
WIDE = "The animal didn't cross the street because it was too wide"
EXERCISE_6 = ("inspect", LESSON, "--token", "it", "--vs", WIDE, "--target", "animal", "--target", "street")
ORACLE_TOL = 1e-9  # our engines against Hugging Face's, as in tests/test_pretrained.py
PRINTED = 0.0005 + ORACLE_TOL  # a weight printed with 3 decimals
ROW = re.compile(r"^(\d+)\s+(\d+)\s+([\d.]+) -> ([\d.]+)\s+([\d.]+) -> ([\d.]+)\s+([+-][\d.]+)\s+(.*?)(  >> street)?$")


@pytest.fixture(scope="module")
def model_directory():
    directory = assets.model_dir()
    assert directory is not None, f"the model is not available: {assets.models.missing_reason()}"  # a test dependency
    return directory


@pytest.fixture(scope="module")
def oracle(model_directory):
    """Hugging Face's BertModel (eager, float64) on both sentences: {sentence: (tokens, (L, H, T, T))}."""
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    import torch
    from transformers import AutoTokenizer, BertModel

    tokenizer = AutoTokenizer.from_pretrained(str(model_directory))
    hf = BertModel.from_pretrained(str(model_directory), attn_implementation="eager", dtype=torch.float64).eval()
    out = {}
    for text in (LESSON, WIDE):
        enc = tokenizer(text, return_tensors="pt")
        with torch.no_grad():
            o = hf(**enc, output_attentions=True)
        out[text] = (tokenizer.convert_ids_to_tokens(enc["input_ids"][0]), torch.stack(o.attentions)[:, 0].numpy())
    return out


def oracle_weights(oracle, text, query="it", targets=("animal", "street")):
    tokens, at = oracle[text]
    return at[:, :, tokens.index(query), [tokens.index(t) for t in targets]]  # (L, H, 2)


@pytest.fixture(scope="module")
def exercise_6(repo_root, model_directory):
    proc = run_verify(repo_root, *EXERCISE_6, "--port", timeout=600)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    return proc.stdout


def rows_of(text):
    """{(layer, head): (animal first, second, street first, second, moved, flips)} of the table."""
    rows = {}
    for line in text.splitlines():
        m = ROW.match(line)
        if m:
            rows[(int(m[1]), int(m[2]))] = tuple(float(m[i]) for i in range(3, 8)) + (m[9] is not None,)
    return rows


# --- the protocol: requests of kind "encode" --------------------------------------------------------

def _request(repo_root, node, engine, request):
    argv = [sys.executable, "-m", "reference", "run"] if engine == "reference" else [str(node), "port_ts/src/cli.ts", "run"]
    return subprocess.run(argv, cwd=repo_root, input=json.dumps(request), capture_output=True, text=True, timeout=300)


@pytest.mark.parametrize("engine", ["reference", "port"])
def test_an_encode_request_gives_what_the_pretrained_case_computes(repo_root, node, model_directory, tmp_path, engine):
    """The lesson's ids as an encode input: the engine's hidden states and weights are those of the
    catalogue's case pretrained.minilm.lesson (itself checked against Hugging Face), bit for bit."""
    case = catalogue_case("pretrained.minilm.lesson")
    item = {"id": "lesson", "model": assets.MODEL, "input_ids": case["config"]["input_ids"]}  # mask and types default
    request = {"protocol": 1, "out_dir": str(tmp_path / "out"), "assets": {assets.MODEL: str(model_directory)}}
    proc = _request(repo_root, node, engine, dict(request, kind="encode", inputs=[item]))
    assert proc.returncode == 0 and json.loads(proc.stdout)["ok"], proc.stdout + proc.stderr
    encoded = json.loads((tmp_path / "out" / "lesson.json").read_text())
    assert encoded["case"] == {"id": "lesson", "kind": "pretrained", "op": "bert_encoder", "seed": 0,
                               "config": {k: case["config"][k] for k in ("model", "input_ids", "attention_mask",
                                                                         "token_type_ids")}}
    assert sorted(encoded["outputs"]) == ["attentions", "hidden_states"]
    proc = _request(repo_root, node, engine, dict(request, cases=[case]))
    assert proc.returncode == 0, proc.stderr
    full = json.loads((tmp_path / "out" / f"{case['id']}.full.json").read_text())
    for name in ("attentions", "hidden_states"):
        assert encoded["outputs"][name] == full["outputs"][name], name


@pytest.mark.parametrize("engine", ["reference", "port"])
def test_encode_and_kind_errors_are_named_alike_in_both_engines(repo_root, node, tmp_path, engine):
    bad = {"protocol": 1, "kind": "tokenize", "out_dir": str(tmp_path), "cases": []}
    proc = _request(repo_root, node, engine, bad)
    assert proc.returncode == 2 and "'kind' must be one of cases, encode, export, got 'tokenize'" in proc.stderr
    items = [{"id": "../escape", "model": "m", "input_ids": [[1]]}, {"id": "no_model", "input_ids": [[1]]},
             {"id": "no_ids", "model": "m"}, {"id": "no_asset", "model": "m", "input_ids": [[101, 102]]}]
    proc = _request(repo_root, node, engine, {"protocol": 1, "kind": "encode", "out_dir": str(tmp_path / "o"), "inputs": items})
    assert proc.returncode == 0, proc.stderr
    errors = [json.loads(line)["error"] for line in proc.stdout.splitlines()]
    assert errors[0] == "each item needs an 'id' of letters, digits, '_', '.', '-' (a file name), got '../escape'"
    assert errors[1] == "encode input 'no_model' needs 'model', the name of a model in the request's assets"
    assert errors[2] == "encode input 'no_ids' needs 'input_ids', a (B, T) list of lists of token ids"
    assert errors[3].startswith("model 'm' was not given in the request's assets") and "verify fetch-model" in errors[3]
    assert not (tmp_path / "escape.json").exists()


# --- exercise 6 ---------------------------------------------------------------------------------------

def test_exercise_6_moves_a_head_from_animal_to_street(exercise_6, oracle):
    """tired -> wide: every head's weights from 'it' to 'animal' and 'street' in both sentences, as an
    independent float64 run gives them; the heads the command marks as moving from 'animal' to
    'street' are exactly those where the oracle's preference flips; the first of them, layer 4
    head 0, takes 'it' from animal 0.115 to 0.060 and street 0.089 to 0.192; and the heads that
    attend most to 'animal' stay on it."""
    rows = rows_of(exercise_6)
    assert len(rows) == 72, exercise_6
    first, second = oracle_weights(oracle, LESSON), oracle_weights(oracle, WIDE)  # (L, H, 2): animal, street
    for (l, h), (a1, a2, s1, s2, moved, _) in rows.items():
        want = (first[l, h, 0], second[l, h, 0], first[l, h, 1], second[l, h, 1])
        assert np.allclose((a1, a2, s1, s2), want, rtol=0, atol=PRINTED), ((l, h), (a1, a2, s1, s2), want)
        want_moved = (second[l, h, 1] - first[l, h, 1]) - (second[l, h, 0] - first[l, h, 0])
        assert abs(moved - want_moved) <= PRINTED, ((l, h), moved, want_moved)
    flips = {lh for lh, r in rows.items() if r[5]}
    oracle_flips = {(l, h) for l in range(6) for h in range(12)
                    if first[l, h, 0] > first[l, h, 1] and second[l, h, 1] > second[l, h, 0]}
    assert flips == oracle_flips and flips, (flips, oracle_flips)
    order = list(rows)
    assert set(order[:len(flips)]) == flips, "the heads that move come first"
    clearest = max(oracle_flips, key=lambda lh: (second[lh][1] - first[lh][1]) - (second[lh][0] - first[lh][0]))
    assert order[0] == clearest == (4, 0)
    assert np.allclose(rows[(4, 0)][:4], (0.115, 0.060, 0.089, 0.192), atol=1e-12)
    answer = next(line for line in exercise_6.splitlines() if line.startswith("answer: "))
    assert answer.startswith(f"answer: {len(flips)} of 72 heads move 'it' from 'animal' to 'street'")
    assert "the most weight moved first: layer 4 head 0 (animal 0.115 -> 0.060, street 0.089 -> 0.192)" in answer
    assert "'street' becomes the token 'it' attends to most in the second sentence ([CLS] and [SEP] aside) in " \
           "layer 4 head 0\n" in exercise_6
    # The strongest coreference heads, by the oracle's weight on 'animal', stay on 'animal'.
    strongest = sorted(((l, h) for l in range(6) for h in range(12)), key=lambda lh: -first[lh][0])[:3]
    assert strongest[:2] == [(5, 11), (3, 1)] and all(second[lh][0] > second[lh][1] for lh in strongest)
    fates = next(line for line in exercise_6.splitlines() if line.startswith("the 3 heads where 'it' attends most"))
    for l, h in strongest:
        assert re.search(rf"layer {l} head {h} \(animal [\d.]+ -> [\d.]+, street [\d.]+ -> [\d.]+: stays on 'animal'\)",
                         fates), fates


def test_exercise_6_shows_the_port_beside_the_reference(exercise_6):
    lines = exercise_6.splitlines()
    assert lines[0].startswith("tokens (first sentence): 0:[CLS] 1:the 2:animal") and lines[0].endswith("13:tired 14:[SEP]")
    assert lines[1].endswith("13:wide 14:[SEP]")
    assert lines[2].startswith("engines: reference (") and ", port (" in lines[2]
    assert "the port's answer: the same, figure for figure (from its own weights)" in lines
    rule = lines.index("port vs reference, by the rule |port - reference| <= 1e-06 * (1 + |reference|):")
    assert lines[rule + 1:rule + 6] == [
        "  first sentence, output attentions (6, 1, 12, 15, 15): bit-identical (16200 values)",
        "  first sentence, output hidden_states (7, 1, 15, 384): bit-identical (40320 values)",
        "  second sentence, output attentions (6, 1, 12, 15, 15): bit-identical (16200 values)",
        "  second sentence, output hidden_states (7, 1, 15, 384): bit-identical (40320 values)",
        "  within the tolerance"]


def test_most_attended_skips_and_marks_the_special_tokens(exercise_6, oracle):
    """'most attended' names the ordinary token with the most weight; a '*' where [CLS] or [SEP]
    takes more (layer 4 head 0 gives [CLS] 0.271 of 'it' in the first sentence)."""
    tokens, at = oracle[LESSON]
    row = at[4, 0, tokens.index("it")]
    ordinary = [k for k, t in enumerate(tokens) if t not in ("[CLS]", "[SEP]")]
    best = max(ordinary, key=lambda k: row[k])
    assert tokens[best] == "animal" and row[0] > row[best]
    line = next(line for line in exercise_6.splitlines() if ROW.match(line) and line.split()[:2] == ["4", "0"])
    assert f"animal {row[best]:.3f}* -> street" in line
    plain = next(line for line in exercise_6.splitlines() if ROW.match(line) and line.split()[:2] == ["5", "11"])
    assert "animal 0.647 -> animal 0.503" in plain  # [CLS]/[SEP] take less there: no mark
    cells = [c for line in exercise_6.splitlines() if ROW.match(line) for c in ROW.match(line)[8].split(" -> ")]
    assert cells and not any(c.startswith(("[CLS]", "[SEP]")) for c in cells)


def test_the_port_beside_the_reference_when_it_differs(repo_root, node, model_directory, tmp_path):
    """A port whose encoder uses PyTorch's default layer-norm epsilon (1e-5) instead of the
    model's 1e-12 (a realistic porting slip): its answer is printed beside the reference's, the
    difference is named per tensor, exit 1. The faithful variant, the reference engine itself
    given as the port, is bit-identical, exit 0."""
    src = tmp_path / "port_src"
    shutil.copytree(repo_root / "port_ts" / "src", src)
    target = src / "models" / "bert.ts"
    text = target.read_text()
    old = "eps = cfg.layer_norm_eps;"
    assert text.count(old) == 1
    target.write_text(text.replace(old, "eps = 1e-5;"))
    proc = run_verify(repo_root, *EXERCISE_6, "--port-cmd", f"{node} {src / 'cli.ts'} run", timeout=600)
    assert proc.returncode == 1, proc.stdout + proc.stderr
    lines = proc.stdout.splitlines()
    assert "the port's answer, from its own weights:" in lines
    port_part = lines[lines.index("the port's answer, from its own weights:") + 1:]
    assert any(line.startswith("  answer: ") for line in port_part)
    assert re.search(r"first sentence, output hidden_states \(7, 1, 15, 384\): greatest \|difference\| \S+ at "
                     r"\(layer \d, sentence 0, token \d+, feature \d+\) .*beyond the tolerance \(BEYOND\)", proc.stdout)
    assert "  the port differs beyond the tolerance" in lines
    faithful = run_verify(repo_root, *EXERCISE_6, "--port-cmd", f"{sys.executable} -m reference run", timeout=600)
    assert faithful.returncode == 0, faithful.stdout + faithful.stderr
    assert "the port's answer: the same, figure for figure (from its own weights)" in faithful.stdout
    assert "  within the tolerance" in faithful.stdout and "BEYOND" not in faithful.stdout


SLOW_REFERENCE = """
import os, sys, time
sys.stdin.read()
open(sys.argv[1], "w").write(str(os.getpid()))
time.sleep(120)
"""


def test_an_engine_that_fails_stops_the_other_at_once(repo_root, model_directory, tmp_path):
    """The port exits non-zero while the reference is still computing: one line, exit 2, and the
    reference's process is stopped then, not waited for (it would sleep 120 s)."""
    import time

    slow, pid_file = tmp_path / "slow.py", tmp_path / "pid"
    slow.write_text(SLOW_REFERENCE)
    crash = f"{sys.executable} -c 'import sys, time; sys.stdin.read(); time.sleep(2); sys.exit(3)'"
    started = time.monotonic()
    proc = run_verify(repo_root, "inspect", LESSON, "--token", "it", "--reference-cmd",
                      f"{sys.executable} {slow} {pid_file}", "--port-cmd", crash, timeout=100)
    assert time.monotonic() - started < 60, "the other engine was waited for"
    assert_one_line_error(proc, "the port engine exited with code 3")
    pid = int(pid_file.read_text())
    with pytest.raises(ProcessLookupError):
        os.kill(pid, 0)


# --- one sentence ---------------------------------------------------------------------------------------

def test_one_sentence_prints_a_layer_by_head_table(repo_root, model_directory, oracle):
    proc = run_verify(repo_root, "inspect", LESSON, "--token", "it", "--layer", "5", "--head", "11",
                      "--reference-cmd", f"{sys.executable} -m reference run")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    lines = proc.stdout.splitlines()
    header = next(i for i, line in enumerate(lines) if line.startswith("layer  head 0"))
    rows = lines[header + 1:header + 7]
    assert [r.split()[0] for r in rows] == [str(layer) for layer in range(6)]
    assert all(len(r.split()) == 1 + 2 * 12 for r in rows), rows  # 12 heads: token and weight each
    tokens, at = oracle[LESSON]
    q = tokens.index("it")
    ordinary = [k for k, t in enumerate(tokens) if t not in ("[CLS]", "[SEP]")]
    for layer, r in enumerate(rows):
        cells = r.split()[1:]
        for head in range(12):
            row = at[layer, head, q]
            best = max(ordinary, key=lambda k: row[k])
            word, weight = cells[2 * head], cells[2 * head + 1]
            assert word == tokens[best] and abs(float(weight.rstrip("*")) - row[best]) <= 0.005 + ORACLE_TOL
            assert weight.endswith("*") == bool(max(row[0], row[-1]) > row[best]), (layer, head, weight)
    assert rows[5].split()[1 + 2 * 11] == "animal"  # layer 5, head 11: 'it' -> 'animal' (0.65)
    listing = lines[lines.index("layer 5, head 11: 'it' attends to") + 1:]
    assert listing[0].split() == ["animal", f"{at[5, 11, q, tokens.index('animal')]:.4f}"]
    assert "port vs reference" not in proc.stdout  # no port asked for


def test_targets_in_one_sentence_are_listed_per_head(repo_root, model_directory, oracle):
    proc = run_verify(repo_root, "inspect", LESSON, "--token", "it", "--target", "animal", "--target", "street")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    lines = proc.stdout.splitlines()
    start = lines.index("layer head  animal  street  most attended (* [CLS]/[SEP] take more)")
    first = oracle_weights(oracle, LESSON)
    rows = [line.split() for line in lines[start + 1:start + 73]]
    assert [(int(r[0]), int(r[1])) for r in rows[:2]] == [(5, 11), (3, 1)]  # sorted by the weight on 'animal'
    for r in rows:
        l, h = int(r[0]), int(r[1])
        assert abs(float(r[2]) - first[l, h, 0]) <= PRINTED and abs(float(r[3]) - first[l, h, 1]) <= PRINTED


# --- usage errors -----------------------------------------------------------------------------------------

@pytest.mark.parametrize("args, fragments", [
    (("--target", "cat"), ("--target 'cat' is not a token of the first sentence", "its tokens are ['[CLS]', 'the'")),
    (("--target", "tired"), ("--target 'tired' is not a token of the second sentence", "'wide'")),
])
def test_a_target_that_is_not_a_token_is_one_line_with_exit_2(repo_root, model_directory, args, fragments):
    proc = run_verify(repo_root, "inspect", LESSON, "--token", "it", "--vs", WIDE, "--target", "animal", *args)
    assert_one_line_error(proc, *fragments)
    assert proc.stdout == ""  # refused before any engine runs


def test_a_target_missing_from_the_first_sentence_names_it(repo_root, model_directory):
    proc = run_verify(repo_root, "inspect", WIDE, "--token", "it", "--vs", LESSON, "--target", "tired")
    assert_one_line_error(proc, "--target 'tired' is not a token of the first sentence")


@pytest.mark.parametrize("args, fragments", [
    (("--vs", WIDE, "--token", "it"), ("--vs compares the weights from WORD to named tokens", "--target animal")),
    (("--target", "animal"), ("--vs and --target look at the weights from one token", "--token WORD")),
    (("--token", "it", "--html", "PAGE"), ("--html draws one head", "--layer L --head H")),
    (("--token", "it", "--layer", "2", "--html", "PAGE"), ("give --layer and --head together",)),
])
def test_usage_errors_are_refused_before_anything_runs(repo_root, tmp_path, args, fragments):
    page = tmp_path / "head.html"
    proc = run_verify(repo_root, "inspect", LESSON, *[page if a == "PAGE" else a for a in args])
    assert_one_line_error(proc, *fragments)
    assert proc.stdout == "" and not page.exists()


def test_more_tokens_than_positions_is_one_line_with_exit_2(repo_root, model_directory):
    proc = run_verify(repo_root, "inspect", " ".join(["word"] * 600), "--token", "word")
    assert_one_line_error(proc, "the sentence is 602 tokens long", "at most 512", "shorten it")
    from verify.tools import inspect

    ids, _ = inspect.tokenize(" ".join(["word"] * 510), model_directory)
    assert len(ids) == 512 and inspect.position_limit(model_directory) == 512
    inspect.check_length(ids, 512)  # the longest sentence taken: 510 words, [CLS] and [SEP]
    with pytest.raises(inspect.InputError, match="513 tokens long"):
        inspect.check_length(ids + [0], 512)


# --- the heatmap page, in headless Chromium -------------------------------------------------------------

def png_rgb(path):
    """(width, height, pixels (H, W, 3) uint8) of an 8-bit RGB or RGBA PNG, its filters undone."""
    data = Path(path).read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    pos, idat = 8, b""
    while pos < len(data):
        length = int.from_bytes(data[pos:pos + 4], "big")
        kind, body = data[pos + 4:pos + 8], data[pos + 8:pos + 8 + length]
        if kind == b"IHDR":
            width, height, depth, colour = int.from_bytes(body[:4], "big"), int.from_bytes(body[4:8], "big"), body[8], body[9]
            assert depth == 8 and colour in (2, 6) and body[12] == 0, "an 8-bit, non-interlaced RGB(A) PNG"
        elif kind == b"IDAT":
            idat += body
        pos += 12 + length
    bpp = 4 if colour == 6 else 3
    raw, stride = zlib.decompress(idat), 1 + width * bpp
    prev, rows = bytearray(width * bpp), []
    for y in range(height):
        f, line = raw[y * stride], bytearray(raw[y * stride + 1:(y + 1) * stride])
        if f == 2:  # up
            line = bytearray((a + b) & 255 for a, b in zip(line, prev))
        elif f in (1, 3, 4):  # sub, average, Paeth: each byte depends on the one bpp before it
            for x in range(len(line)):
                left = line[x - bpp] if x >= bpp else 0
                up, corner = prev[x], (prev[x - bpp] if x >= bpp else 0)
                if f == 1:
                    pred = left
                elif f == 3:
                    pred = (left + up) >> 1
                else:
                    p = left + up - corner
                    pa, pb, pc = abs(p - left), abs(p - up), abs(p - corner)
                    pred = left if pa <= pb and pa <= pc else (up if pb <= pc else corner)
                line[x] = (line[x] + pred) & 255
        else:
            assert f == 0, f"unknown PNG filter {f}"
        rows.append(bytes(line))
        prev = line
    pixels = np.frombuffer(b"".join(rows), dtype=np.uint8).reshape(height, width, bpp)
    return width, height, pixels[..., :3]


@pytest.fixture(scope="module")
def exercise_6_page(repo_root, model_directory, tmp_path_factory):
    page = tmp_path_factory.mktemp("inspect") / "head.html"
    proc = run_verify(repo_root, *EXERCISE_6, "--layer", "4", "--head", "0", "--html", page, timeout=600)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert f"wrote the heatmaps of layer 4, head 0 to {page}" in proc.stdout
    return page


def test_the_heatmap_page_is_drawn_in_chromium(chromium, exercise_6_page, oracle, tmp_path):
    """Four heatmaps (two sentences, reference and port), each 15 x 15 cells whose weights are the
    oracle's; in the screenshot every shade of blue covers at least the area of the cells that
    carry it; the page states the engines' difference; nothing is fetched."""
    text = exercise_6_page.read_text()
    _check_self_contained(text)
    dom = _browse(chromium, exercise_6_page, tmp_path, "--window-size=1400,1700", "--dump-dom")
    maps = re.findall(r'<svg class="heatmap" data-engine="(\w+)" data-sentence="(\w+)" data-tokens="15"(.*?)</svg>', dom, re.S)
    assert [(e, s) for e, s, _ in maps] == [("reference", "first"), ("port", "first"), ("reference", "second"),
                                            ("port", "second")]
    shades = {}
    for engine, sentence, svg in maps:
        cells = re.findall(r'<rect class="cell" data-query="(\d+)" data-key="(\d+)" data-weight="([^"]+)"[^>]*'
                           r'fill="rgb\((\d+),(\d+),255\)"', svg)
        assert len(cells) == 15 * 15, (engine, sentence)
        tokens, at = oracle[LESSON if sentence == "first" else WIDE]
        grid = np.zeros((15, 15))
        for q, k, w, r, g in cells:
            grid[int(q), int(k)] = float(w)
            assert r == g and int(r) == round(255 * (1 - float(w)))
            shades[int(r)] = shades.get(int(r), 0) + 1
        assert np.max(np.abs(grid - at[4, 0])) <= ORACLE_TOL, (engine, sentence)
        assert 'class="query"' in svg and svg.count('class="target"') == 2
    for sentence in ("first", "second"):
        assert re.search(rf'<p class="difference same" data-sentence="{sentence}">port vs reference: bit-identical on '
                         r"this head \(225 weights\); every layer's weights and hidden states: bit-identical", dom)
    assert "'it' → 'street' 0.192" in dom and "'it' → 'animal' 0.115" in dom
    shot = tmp_path / "page.png"
    _browse(chromium, exercise_6_page, tmp_path, "--window-size=1400,1700", "--force-color-profile=srgb",
            "--hide-scrollbars", f"--screenshot={shot}")
    width, height, pixels = png_rgb(shot)
    assert (width, height) == (1400, 1700)
    blue = pixels[(pixels[..., 2] == 255) & (pixels[..., 0] == pixels[..., 1])][:, 0]  # (s, s, 255) pixels
    counts = np.bincount(blue, minlength=256)
    inner = (28 - 4) ** 2  # a cell's pixels, but for the outlines drawn over its edges
    drawn = {s: n for s, n in shades.items() if s < 250}  # the near-white shades are the page's own white too
    assert len(drawn) > 20
    for s, n in drawn.items():
        assert counts[s] >= n * inner, f"shade {s}: {counts[s]} pixels, {n} cells need at least {n * inner}"
