"""The HTML report opened in headless Chromium (Debian's `chromium`): it renders (a non-trivial
screenshot), its DOM holds the case ids, the heatmaps drawn by its inline script, the loss curves
of a training run and the divergence mark, the attribution of a composition fault along the
model's depth, and it asks for nothing from the network."""

import json
import os
import re
import shutil
import subprocess
import zlib

import pytest

from test_runner import (cases_dir, case_ids, mutated_port, run_verify, session_goldens)  # noqa: F401 (fixtures)
from toolkit import catalogue_cases
from verify.documents import parse

CHROMIUM = "/usr/bin/chromium"
FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
         "--disable-background-networking", "--disable-component-update", "--disable-sync"]


@pytest.fixture(scope="session")
def chromium():
    """Debian's chromium, installed here when missing and we are root; otherwise a clear failure
    (never a silent skip: the HTML report is part of what the suite proves)."""
    if not os.path.exists(CHROMIUM):
        if os.geteuid() != 0:
            pytest.fail(f"{CHROMIUM} is missing and the tests are not running as root, so they cannot install it; "
                        "run `apt-get install -y chromium` as root (Debian's package), then rerun")
        env = dict(os.environ, DEBIAN_FRONTEND="noninteractive")
        for argv in (["apt-get", "update"], ["apt-get", "install", "-y", "chromium"]):
            proc = subprocess.run(argv, capture_output=True, text=True, env=env, timeout=900)
            assert proc.returncode == 0, f"{' '.join(argv)} failed: {proc.stderr[-2000:]}"
        assert os.path.exists(CHROMIUM), f"apt-get installed chromium but {CHROMIUM} is still missing"
    return CHROMIUM


def _browse(chromium, page, tmp_path, *mode):
    profile = tmp_path / f"profile-{len(list(tmp_path.iterdir()))}"
    profile.mkdir()
    proc = subprocess.run([chromium, *FLAGS, f"--user-data-dir={profile}", *mode, page.resolve().as_uri()],
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr[-2000:]
    return proc.stdout


def _png_pixels(path):
    """Width, height and the number of distinct RGB(A) pixel values of a PNG (no PIL needed)."""
    data = path.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    pos, idat, width, height, colour = 8, b"", 0, 0, 0
    while pos < len(data):
        length = int.from_bytes(data[pos:pos + 4], "big")
        kind, body = data[pos + 4:pos + 8], data[pos + 8:pos + 8 + length]
        if kind == b"IHDR":
            width, height, colour = int.from_bytes(body[:4], "big"), int.from_bytes(body[4:8], "big"), body[9]
        elif kind == b"IDAT":
            idat += body
        pos += 12 + length
    raw = zlib.decompress(idat)
    bpp = 4 if colour == 6 else 3
    stride = width * bpp + 1
    # sample the filtered bytes of a few rows: enough to tell a blank page from a drawn one
    distinct = {raw[r * stride + 1:(r + 1) * stride] for r in range(0, height, max(1, height // 200))}
    return width, height, len(distinct)


def _check_self_contained(text):
    assert not re.search(r"""(src|href)\s*=\s*["']?\s*(https?:)?//""", text), "the report refers to the network"
    assert "<link" not in text and "@import" not in text and "url(" not in text
    for match in re.findall(r"https?://[^\s\"'<>]+", text):
        assert match == "http://www.w3.org/2000/svg", match  # the SVG namespace only


@pytest.fixture(scope="module")
def failing_html(repo_root, node, cases_dir, session_goldens, tmp_path_factory):  # noqa: F811
    tmp = tmp_path_factory.mktemp("html")
    port = mutated_port(repo_root, node, tmp, "len > K ? K : len;", "len + 1 > K ? K : len + 1;")
    page, report = tmp / "report.html", tmp / "report.json"
    proc = run_verify(repo_root, "attention", "--cases-dir", cases_dir, "--golden-dir", session_goldens,
                      "--port-cmd", port, "--html", page, "--report", report)
    assert proc.returncode == 1, proc.stdout + proc.stderr
    return page, parse(report.read_text())


def test_the_failing_report_renders_in_chromium(chromium, failing_html, tmp_path):
    page, report = failing_html
    text = page.read_text()
    _check_self_contained(text)
    assert len(text) < 2_000_000
    shot = tmp_path / "shot.png"
    _browse(chromium, page, tmp_path, f"--screenshot={shot}", "--window-size=1280,2000")
    width, height, distinct = _png_pixels(shot)
    assert (width, height) == (1280, 2000) and distinct > 50, "the screenshot is (nearly) blank"
    dom = _browse(chromium, page, tmp_path, "--dump-dom")
    for case in report["cases"]:
        assert f'data-case-id="{case["id"]}"' in dom
    heatmaps = re.findall(r'<canvas class="heatmap"[^>]*data-drawn="1"', dom)
    assert len(heatmaps) >= 3 * len(report["cases"]), "the inline script did not draw the heatmaps"
    assert re.search(r'data-heatmaps-drawn="(\d+)"', dom)
    failing = next(c for c in report["cases"] if not c["passed"])
    assert f'data-case-id="{failing["id"]}" open' in dom or f'data-case-id="{failing["id"]}"' in dom
    assert "(batch 0, query 0, key 0)" in dom  # the greatest difference of masked_softmax.lens_1d, labelled


def _page_of(repo_root, tmp, chosen, *options, order=None):
    """The HTML report of a passing run of the catalogue's cases that chosen(case) keeps (in the
    catalogue's order, or sorted by the key `order`), its goldens regenerated into tmp first:
    (the page, the cases' ids)."""
    cases = sorted((c for c in catalogue_cases() if chosen(c)), key=order or (lambda c: 0))
    assert cases, "no case of the catalogue is chosen"
    (tmp / "cases").mkdir()
    (tmp / "cases" / "some.json").write_text(json.dumps({"cases": cases}))
    golden = tmp / "golden" / "attention"
    regen = run_verify(repo_root, "regen", "attention", "--cases-dir", tmp / "cases", "--golden-dir", golden, timeout=300)
    assert regen.returncode == 0, regen.stdout + regen.stderr
    page = tmp / "report.html"
    proc = run_verify(repo_root, "attention", "--cases-dir", tmp / "cases", "--golden-dir", golden, "--html", page,
                      *options, timeout=300)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    return page, [c["id"] for c in cases]


@pytest.fixture(scope="module")
def training_html(repo_root, tmp_path_factory):
    """The alignment run (fast): goldens regenerated into a temporary directory, then verified."""
    page, _ = _page_of(repo_root, tmp_path_factory.mktemp("training"), lambda c: c["id"] == "train.alignment")
    return page


def test_a_training_run_shows_both_loss_curves_and_the_weights(chromium, training_html, tmp_path):
    text = training_html.read_text()
    _check_self_contained(text)
    dom = _browse(chromium, training_html, tmp_path, "--dump-dom")
    assert 'data-case-id="train.alignment"' in dom
    curve = re.search(r'<svg class="curve" data-tensor="loss".*?</svg>', dom, re.S)
    assert curve and 'class="reference"' in curve.group(0) and 'class="port"' in curve.group(0)
    assert 'data-tensor="alignment.weights"' in dom  # the alignment matrix (query x key) as a heatmap
    shot = tmp_path / "training.png"
    _browse(chromium, training_html, tmp_path, f"--screenshot={shot}", "--window-size=1280,2000")
    assert _png_pixels(shot)[2] > 50
    if os.environ.get("VERIFY_KEEP_SCREENSHOTS"):
        shutil.copy(shot, os.environ["VERIFY_KEEP_SCREENSHOTS"])


@pytest.fixture(scope="module")
def folded_html(repo_root, tmp_path_factory):
    """A passing report of more cases than OPEN_ALL_UP_TO, so that the passing ones are folded.
    --fresh: the page (the reference cache's lines above the cases) must not depend on what the
    session's earlier tests left in the cache; the screenshot below counts what fits in the window."""
    ops = ("masked_softmax", "dot_product_attention")  # in this order: the last case, the link's target, a dot-product one
    return _page_of(repo_root, tmp_path_factory.mktemp("folded"), lambda c: c["op"] in ops, "--fresh",
                    order=lambda c: ops.index(c["op"]))


def test_a_link_to_a_folded_case_opens_it(chromium, folded_html, tmp_path):
    from verify.html import OPEN_ALL_UP_TO
    page, ids = folded_html
    assert len(ids) > OPEN_ALL_UP_TO
    target = ids[-1]
    profile = tmp_path / "profile-anchor"
    profile.mkdir()
    url = page.resolve().as_uri() + f"#case-{target}"
    dom = subprocess.run([chromium, *FLAGS, f"--user-data-dir={profile}", "--dump-dom", url],
                         capture_output=True, text=True, timeout=120).stdout
    opened = re.search(rf'<details[^>]*id="case-{re.escape(target)}"[^>]*>', dom)
    assert opened and " open" in opened.group(0), "the linked case stays folded"
    others = re.search(rf'<details[^>]*id="case-{re.escape(ids[0])}"[^>]*>', dom)
    assert others and " open" not in others.group(0)
    shot = tmp_path / "anchor.png"
    profile2 = tmp_path / "profile-anchor-shot"
    profile2.mkdir()
    subprocess.run([chromium, *FLAGS, f"--user-data-dir={profile2}", f"--screenshot={shot}", "--window-size=1280,900", url],
                   capture_output=True, text=True, timeout=120)
    assert _png_pixels(shot)[2] > 20, "the page at the case's anchor is (nearly) blank"


ATTRIBUTED = "transformer.two_plus_two_head_dim2"  # with the fault below: enc.blk1.attention introduces it


def _attribution_svg(dom):
    found = re.findall(r'<svg class="attribution".*?</svg>', dom, re.S)
    assert len(found) <= 1, "more than one attribution picture"
    return found[0] if found else None


def test_an_attributed_case_draws_where_the_difference_starts(repo_root, node, chromium, tmp_path):
    """A composition fault (block 1 reads block 0's parameters): the failing case's page draws each
    sub-layer's own-input and fed difference (one point each), the tolerance line and the culprit,
    in Chromium; `verify show report.json --html` draws the same; a passing run draws none."""
    from verify.tools.faults import apply, load
    [fault] = [f for f in load(None, repo_root, str) if f.id == "port.transformer.block1_reads_block0_parameters"]
    apply(fault, repo_root, tmp_path)
    page, saved, shown = tmp_path / "report.html", tmp_path / "report.json", tmp_path / "shown.html"
    proc = run_verify(repo_root, "attention", "--case", ATTRIBUTED, "--report", saved, "--html", page,
                      "--port-cmd", f"{node} {tmp_path / 'port_ts' / 'src' / 'cli.ts'} run", timeout=300)
    assert proc.returncode == 1, proc.stdout[-2000:] + proc.stderr[-2000:]
    [entry] = json.loads(saved.read_text())["cases"]
    att = entry["attribution"]
    assert att["culprit"] == "enc.blk1.attention", att
    names = [r["name"] for r in att["sublayers"]]
    _check_self_contained(page.read_text())

    dom = _browse(chromium, page, tmp_path, "--dump-dom")
    svg = _attribution_svg(dom)
    assert svg, "no attribution picture in the failing case's page"
    assert f'data-culprit="{att["culprit"]}"' in svg
    for series in ("own", "fed"):
        drawn = re.findall(rf'class="point {series}" data-sublayer="([^"]+)"', svg)
        assert drawn == names, (series, drawn)  # one point per sub-layer, in data-flow order
        assert re.search(rf'<polyline class="{series}"[^>]*points="[^"]+"', svg)
    assert re.search(r'<line class="tolerance"[^>]*stroke-dasharray', svg)
    assert re.search(r'<rect class="culprit"', svg)
    assert re.search(rf'<text class="culprit"[^>]*>{re.escape(att["culprit"])} introduces it</text>', svg)
    assert re.findall(r'<text class="sublayer"[^>]*>([^<]+)</text>', svg) == names  # every sub-layer labelled
    assert "0 drawn at 1e-17" in dom and "own input" in dom and "fed" in dom  # the caption

    shot = tmp_path / "attribution.png"
    _browse(chromium, page, tmp_path, f"--screenshot={shot}", "--window-size=1280,2000")
    width, height, distinct = _png_pixels(shot)
    assert (width, height) == (1280, 2000) and distinct > 50, "the screenshot is (nearly) blank"
    if os.environ.get("VERIFY_KEEP_SCREENSHOTS"):
        shutil.copy(shot, os.environ["VERIFY_KEEP_SCREENSHOTS"])

    again = run_verify(repo_root, "show", saved, "--html", shown, timeout=60)  # from the saved report
    assert again.returncode == 1, again.stdout[-2000:] + again.stderr[-2000:]
    assert _attribution_svg(_browse(chromium, shown, tmp_path, "--dump-dom")) == svg

    passing = tmp_path / "passing.html"
    ok = run_verify(repo_root, "attention", "--case", ATTRIBUTED, "--html", passing, timeout=300)
    assert ok.returncode == 0, ok.stdout[-2000:] + ok.stderr[-2000:]
    clean = _browse(chromium, passing, tmp_path, "--dump-dom")
    assert f'data-case-id="{ATTRIBUTED}"' in clean and _attribution_svg(clean) is None
