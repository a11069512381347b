"""The report as one self-contained HTML file (`--html FILE`): per case the terminal explanation, a
table of the compared tensors, overlaid per-step curves of training runs (inline SVG), decode tables
and heatmaps of each output matrix (drawn on <canvas> by the inline script from inline JSON).
For a failing case attributed to a sub-layer, its introduced and inherited differences
along the model's depth (inline SVG). Failing cases come first and open; passing ones are folded (all open when the report is small)."""

import html
import json
import math
from functools import partial

from .axes import is_matrix_of_weights, label
from .compare import DEFAULT_TOL
from .report import PLAIN, cache_lines, explanation, jsonable, loose_cases, num

OPEN_ALL_UP_TO = 12  # cases; larger reports fold the passing ones
_num = partial(num, fmt=".3g")


def _e(text):
    return html.escape(str(text), quote=True)


CSS = """
body{font:14px/1.4 system-ui,-apple-system,"Segoe UI",sans-serif;margin:24px;color:#1d1d1f;background:#fff}
h1{font-size:22px;margin:0 0 4px} h2{font-size:17px;margin:0} h3{font-size:14px;margin:14px 0 6px}
.pass{color:#0a7d28}.fail{color:#c41a16;font-weight:600}
.verdict{font-size:18px;padding:6px 10px;border-radius:6px;display:inline-block;margin:8px 0}
.verdict.pass{background:#e6f4ea}.verdict.fail{background:#fce8e6}
table{border-collapse:collapse;margin:6px 0}td,th{border:1px solid #ddd;padding:2px 6px;text-align:left;vertical-align:top}
th{background:#f5f5f7}td.num{text-align:right;font-variant-numeric:tabular-nums}
pre{background:#f7f7f9;border:1px solid #e3e3e8;padding:8px;overflow-x:auto;font-size:12px}
details.case[data-verdict=FAIL]{border-color:#c41a16}
details.case{border:1px solid #ddd;border-radius:6px;margin:10px 0;padding:6px 10px}
details.case[open]{padding-bottom:12px} summary{cursor:pointer}
.maps{display:flex;gap:14px;flex-wrap:wrap;align-items:flex-start}
figure{margin:0} figcaption{font-size:12px;color:#555;max-width:260px}
canvas.heatmap{border:1px solid #bbb;image-rendering:pixelated}
.tok{font-family:ui-monospace,monospace} .tok b{background:#fce8e6;color:#c41a16}
.legend{font-size:12px;color:#555} #tip{position:fixed;pointer-events:none;background:#222;color:#fff;
font-size:12px;padding:3px 6px;border-radius:4px;display:none;z-index:10}
nav ul{columns:3;font-size:12px;padding-left:18px}
"""

SCRIPT = r"""
(function(){
  const data = JSON.parse(document.getElementById('verify-data').textContent);
  const tip = document.getElementById('tip');
  const num = v => typeof v === 'number' ? v : (v === 'NaN' ? NaN : (v === 'Infinity' ? Infinity : -Infinity));
  function seq(t){ // viridis-like, t in [0, 1]
    const s=[[68,1,84],[59,82,139],[33,145,140],[94,201,98],[253,231,37]];
    t=Math.min(1,Math.max(0,t)); const x=t*(s.length-1), i=Math.min(s.length-2,Math.floor(x)), f=x-i;
    return s[i].map((c,k)=>Math.round(c+(s[i+1][k]-c)*f));
  }
  function heat(t){ // white to dark red
    t=Math.min(1,Math.max(0,t)); return [255-Math.round(60*t), Math.round(245*(1-t)), Math.round(235*(1-t))];
  }
  document.querySelectorAll('canvas.heatmap').forEach(cv => {
    const sl = data.slices[+cv.dataset.slice], kind = cv.dataset.kind;
    const grid = sl[kind === 'diff' ? 'abs_diff' : kind].map(r => r.map(num));
    const rows = grid.length, cols = rows ? grid[0].length : 0, cell = +cv.dataset.cell;
    cv.width = Math.max(1, cols*cell); cv.height = Math.max(1, rows*cell);
    const ctx = cv.getContext('2d');
    let lo = Infinity, hi = -Infinity;
    if (kind === 'diff') { for (const r of grid) for (const v of r) if (isFinite(v) && v > 0) { lo=Math.min(lo,v); hi=Math.max(hi,v); } }
    else { for (const k of ['reference','port']) for (const r of sl[k]) for (const v0 of r) { const v=num(v0); if (isFinite(v)) { lo=Math.min(lo,v); hi=Math.max(hi,v); } } }
    for (let i=0;i<rows;i++) for (let j=0;j<cols;j++) {
      const v = grid[i][j]; let c;
      if (Number.isNaN(v)) c=[255,0,255];
      else if (kind === 'diff') c = v === 0 ? [255,255,255] : (!isFinite(v) ? [90,0,0] :
          heat(hi > lo ? (Math.log10(v)-Math.log10(lo))/(Math.log10(hi)-Math.log10(lo)) * 0.8 + 0.2 : 1));
      else c = !isFinite(v) ? [0,0,0] : seq(hi > lo ? (v-lo)/(hi-lo) : 0.5);
      ctx.fillStyle = `rgb(${c[0]},${c[1]},${c[2]})`; ctx.fillRect(j*cell, i*cell, cell, cell);
    }
    if (sl.mark) { ctx.strokeStyle = kind === 'diff' ? '#000' : '#ff2d55'; ctx.lineWidth = 2;
      ctx.strokeRect(sl.mark[1]*cell+1, sl.mark[0]*cell+1, cell-2, cell-2); }
    cv.dataset.drawn = '1';
    cv.addEventListener('mousemove', ev => {
      const j = Math.floor(ev.offsetX / cell), i = Math.floor(ev.offsetY / cell);
      if (i<0||j<0||i>=rows||j>=cols) { tip.style.display='none'; return; }
      const idx = sl.index.concat([sl.rows[0]+i, sl.cols[0]+j]);
      const names = sl.axes && sl.axes.length === idx.length ? idx.map((x,k)=>sl.axes[k]+' '+x) : idx;
      tip.textContent = `${sl.tensor} (${names.join(', ')}): reference ${sl.reference[i][j]}, port ${sl.port[i][j]}, |diff| ${sl.abs_diff[i][j]}`;
      tip.style.left = (ev.clientX+12)+'px'; tip.style.top = (ev.clientY+12)+'px'; tip.style.display='block';
    });
    cv.addEventListener('mouseleave', () => { tip.style.display='none'; });
  });
  document.body.dataset.heatmapsDrawn = String(document.querySelectorAll('canvas.heatmap[data-drawn="1"]').length);
  // A link to a case (report.html#case-<id>) opens that case, folded or not, and brings it into view.
  function openTarget(){
    const id = decodeURIComponent(location.hash.slice(1));
    const el = id && document.getElementById(id);
    if (el && el.tagName === 'DETAILS') { el.open = true; el.scrollIntoView(); }
  }
  window.addEventListener('hashchange', openTarget);
  openTarget();
})();
"""


def _heatmaps(case, slices_out):
    parts = []
    for h in case.get("heatmaps") or []:
        axes = h["axes"]
        title = f"{h['role']} {h['tensor']} — shape {tuple(h['shape'])}" + (f" ({' × '.join(axes)})" if axes else "")
        badge = "" if h["passed"] else ' <span class="fail">differs</span>'
        parts.append(f'<h3 class="matrix{" weights" if is_matrix_of_weights(axes) else ""}" '
                     f'data-tensor="{_e(h["tensor"])}">{_e(title)}{badge}</h3>')
        if h["slices_total"] > len(h["slices"]):
            parts.append(f'<p class="legend">{len(h["slices"])} of {h["slices_total"]} slices shown '
                         "(the one with the greatest difference first)</p>")
        for sl in h["slices"]:
            k = len(slices_out)
            rows, cols = len(sl["reference"]), len(sl["reference"][0]) if sl["reference"] else 0
            mark = _worst_in(case, h, sl)
            slices_out.append(dict(sl, tensor=h["tensor"], axes=axes, mark=mark))
            lead = label(sl["index"], axes[: len(sl["index"])] if axes else None) if sl["index"] else ""
            window = (f"rows {sl['rows'][0]}–{sl['rows'][1] - 1}, columns {sl['cols'][0]}–{sl['cols'][1] - 1} of "
                      f"{h['shape'][-2]} × {h['shape'][-1]}")
            cell = max(6, min(32, 300 // max(rows, cols, 1)))
            top = max((v for r in sl["abs_diff"] for v in r if isinstance(v, (int, float))), default=0.0)
            figs = [f'<figure><canvas class="heatmap" data-slice="{k}" data-kind="{kind}" data-cell="{cell}" '
                    f'width="{cols * cell}" height="{rows * cell}" '
                    f'aria-label="{_e(h["tensor"])} {kind}"></canvas><figcaption>{_e(caption)}</figcaption></figure>'
                    for kind, caption in (("reference", "reference"), ("port", "port"),
                                          ("diff", f"|port − reference|, max {_num(top)} (log scale; white: equal)"))]
            parts.append(f'<div class="slice"><p class="legend">{_e(h["tensor"])}{_e(lead)}: {_e(window)}'
                         + (" — outlined: the greatest difference" if mark else "") + "</p>"
                         f'<div class="maps">{"".join(figs)}</div></div>')
    if case.get("heatmaps_omitted"):
        parts.append(f'<p class="legend">{case["heatmaps_omitted"]} more matrices not drawn (cap per case)</p>')
    return "".join(parts)


def _worst_in(case, h, sl):
    """(row, col) inside the slice's window of the tensor's greatest |difference|, if it is there."""
    t = next((t for t in case["tensors"] if t["name"] == h["tensor"] and t["role"] == h["role"]), None)
    if t is None or t["passed"] or not t["max_abs_index"]:
        return None
    index = t["max_abs_index"]
    if list(index[:-2]) != list(sl["index"]):
        return None
    r, c = index[-2] - sl["rows"][0], index[-1] - sl["cols"][0]
    if 0 <= r < sl["rows"][1] - sl["rows"][0] and 0 <= c < sl["cols"][1] - sl["cols"][0]:
        return [r, c]
    return None


def _curve_svg(curve, width=640, height=220):
    """Both engines' per-step values overlaid, the parting step marked; below, |difference| on a
    log scale."""
    ref, port = ([v if isinstance(v, (int, float)) and math.isfinite(v) else None for v in curve[side]]
                 for side in ("reference", "port"))
    n = len(ref)
    values = [v for v in ref + port if v is not None]
    if not values or n == 0:
        return "<p>no finite values to plot</p>"
    lo, hi = min(values), max(values)
    hi = lo + 1.0 if hi == lo else hi
    pad_l, pad_r, pad_t, pad_b = 56, 12, 10, 24
    W, H = width - pad_l - pad_r, height - pad_t - pad_b

    def x(i):
        return pad_l + (W * i / max(1, n - 1))

    def y(v):
        return pad_t + H * (1 - (v - lo) / (hi - lo))

    def path(vals):
        return " ".join(f"{x(i):.1f},{y(v):.1f}" for i, v in enumerate(vals) if v is not None)

    name = curve["tensor"]
    parts = [f'<svg class="curve" data-tensor="{_e(name)}" xmlns="http://www.w3.org/2000/svg" width="{width}" '
             f'height="{height}" viewBox="0 0 {width} {height}" role="img" aria-label="{_e(name)} per step">',
             f'<rect x="{pad_l}" y="{pad_t}" width="{W}" height="{H}" fill="#fafafa" stroke="#ccc"/>',
             f'<text x="4" y="{pad_t + 10}" font-size="11">{_num(hi)}</text>',
             f'<text x="4" y="{pad_t + H}" font-size="11">{_num(lo)}</text>',
             f'<text x="{pad_l}" y="{height - 6}" font-size="11">step 1</text>',
             f'<text x="{pad_l + W - 50}" y="{height - 6}" font-size="11">step {n}</text>',
             f'<polyline class="reference" fill="none" stroke="#1f77b4" stroke-width="2" points="{path(ref)}"/>',
             f'<polyline class="port" fill="none" stroke="#ff7f0e" stroke-width="1.5" stroke-dasharray="5,3" '
             f'points="{path(port)}"/>']
    for step, colour, text, dy in ((curve["first_step_beyond"], "#c41a16", "beyond tol", 12),
                                   (curve["first_step_different"], "#888", "first bit difference", 24)):
        if step is not None:
            xs = x(step - 1)
            parts.append(f'<line class="mark" x1="{xs:.1f}" x2="{xs:.1f}" y1="{pad_t}" y2="{pad_t + H}" '
                         f'stroke="{colour}" stroke-dasharray="3,3"/><text x="{xs + 3:.1f}" y="{pad_t + dy}" '
                         f'font-size="11" fill="{colour}">step {step}: {text}</text>')
    parts.append("</svg>")
    # |difference| on a log scale
    diffs = [abs(a - b) if a is not None and b is not None else None for a, b in zip(ref, port)]
    positive = [d for d in diffs if d]
    if positive:
        dlo, dhi = math.log10(min(positive)), math.log10(max(positive))
        dhi = dlo + 1 if dhi == dlo else dhi
        h2, H2 = 90, 90 - pad_t - 18
        pts = " ".join(f"{x(i):.1f},{pad_t + H2 * (1 - (math.log10(d) - dlo) / (dhi - dlo)):.1f}"
                       for i, d in enumerate(diffs) if d)
        parts.append(f'<svg class="curve-diff" xmlns="http://www.w3.org/2000/svg" width="{width}" height="{h2}" '
                     f'viewBox="0 0 {width} {h2}"><rect x="{pad_l}" y="{pad_t}" width="{W}" height="{H2}" fill="#fafafa" '
                     f'stroke="#ccc"/><text x="4" y="{pad_t + 10}" font-size="11">{max(positive):.1e}</text>'
                     f'<text x="4" y="{pad_t + H2}" font-size="11">{min(positive):.1e}</text>'
                     f'<polyline fill="none" stroke="#c41a16" stroke-width="1" points="{pts}"/>'
                     f'<text x="{pad_l}" y="{h2 - 4}" font-size="11">|port − reference| (log scale; steps with no '
                     f'difference left out)</text></svg>')
    else:
        parts.append('<p class="legend">the two engines are bit-identical at every step</p>')
    return "".join(parts)


def _curves(case):
    parts = []
    for c in case.get("curves") or []:
        part = ("the engines part at step %d (first beyond the tolerance)" % c["first_step_beyond"]
                if c["first_step_beyond"] else "within the tolerance at every step")
        bits = ("bit-identical at every step" if c["first_step_different"] is None
                else f"first bit difference at step {c['first_step_different']}")
        parts.append(f'<h3 class="curve-title" data-tensor="{_e(c["tensor"])}">{_e(c["tensor"])} per step: '
                     f'reference <span style="color:#1f77b4">━</span>, port <span style="color:#ff7f0e">╍</span>; '
                     f'{_e(part)}; {_e(bits)}</h3>' + _curve_svg(c))
    return "".join(parts)


ZERO_AT = 1e-17  # where the attribution picture draws a difference of 0 (log scale)


def _log_diff(v):
    """log10 of a sub-layer's max|diff| as the picture places it: 0 (and anything below) at ZERO_AT,
    NaN or infinite at +inf (the top), None (not comparable) not drawn."""
    if v is None:
        return None
    if isinstance(v, str):  # jsonable's "NaN", "Infinity"
        return math.inf
    return math.inf if not math.isfinite(v) else math.log10(max(abs(v), ZERO_AT))


def _attribution_svg(att):
    """Each sub-layer's max|port − reference| along the model's depth (log scale): on the port's own
    input (inherited + introduced) and fed the reference's input (introduced alone), the tolerance
    as a dashed line, the culprit shaded and named."""
    rows, culprit, tol = att["sublayers"], att["culprit"], att["tolerance"]
    n = len(rows)
    if not n:
        return ""
    own, fed = ([_log_diff(r[k]) for r in rows] for k in ("own", "fed"))
    finite = [v for v in own + fed if v is not None and math.isfinite(v)]
    lo = math.log10(ZERO_AT)
    hi = math.ceil(max(finite + [math.log10(tol) + 1, lo + 1]))
    step = max(22, min(40, 600 // n))
    longest = max(len(r["name"]) for r in rows)
    # the labels below, rotated 55 degrees: room for the longest down and, for the first, to the left
    pad_l, pad_r, pad_t, pad_b = max(56, int(longest * 6.2 * 0.58) - step // 2), 16, 22, 12 + int(longest * 6.2 * 0.82)
    W, H = step * n, 200
    width, height = pad_l + W + pad_r, pad_t + H + pad_b

    def x(i):
        return pad_l + step * (i + 0.5)

    def y(v):
        return pad_t + H * (1 - (min(v, hi) - lo) / (hi - lo))

    parts = [f'<svg class="attribution" data-culprit="{_e(culprit or "")}" xmlns="http://www.w3.org/2000/svg" '
             f'width="{width}" height="{height}" viewBox="0 0 {width} {height}" role="img" '
             f'aria-label="max |port − reference| per sub-layer">',
             f'<rect x="{pad_l}" y="{pad_t}" width="{W}" height="{H}" fill="#fafafa" stroke="#ccc"/>']
    if culprit is not None:
        i = next(k for k, r in enumerate(rows) if r["name"] == culprit)
        parts.append(f'<rect class="culprit" x="{pad_l + step * i}" y="{pad_t}" width="{step}" height="{H}" '
                     f'fill="#fce8e6"/><text class="culprit" x="{x(i):.1f}" y="{pad_t - 6}" font-size="11" '
                     f'fill="#c41a16" text-anchor="{"start" if i < n / 2 else "end"}">{_e(culprit)} introduces it</text>')
    every = max(1, math.ceil((hi - lo) / 6))
    for d in [*range(hi, math.ceil(lo) + 1, -every), lo]:
        parts.append(f'<line x1="{pad_l}" x2="{pad_l + W}" y1="{y(d):.1f}" y2="{y(d):.1f}" stroke="#e6e6e6"/>'
                     f'<text x="{pad_l - 4}" y="{y(d) + 4:.1f}" font-size="11" text-anchor="end">'
                     f'{"0" if d == lo else "1" if d == 0 else f"1e{d}"}</text>')
    yt = y(math.log10(tol))
    parts.append(f'<line class="tolerance" x1="{pad_l}" x2="{pad_l + W}" y1="{yt:.1f}" y2="{yt:.1f}" stroke="#c41a16" '
                 f'stroke-dasharray="6,4"/><text x="{pad_l + W - 4}" y="{yt - 4:.1f}" font-size="11" fill="#c41a16" '
                 f'text-anchor="end">tolerance {tol:g}</text>')
    for k, (series, colour, dash) in enumerate((("own", "#1f77b4", ""), ("fed", "#ff7f0e", ' stroke-dasharray="5,3"'))):
        vals = own if series == "own" else fed
        pts = " ".join(f"{x(i):.1f},{y(v):.1f}" for i, v in enumerate(vals) if v is not None)
        parts.append(f'<polyline class="{series}" fill="none" stroke="{colour}" stroke-width="1.5"{dash} points="{pts}"/>')
        for i, v in enumerate(vals):
            if v is None:
                continue
            r = rows[i]
            tip = f'<title>{_e(r["name"])}: {series} {_e(_num(r[series]))}</title>'
            if series == "own":
                parts.append(f'<circle class="point own" data-sublayer="{_e(r["name"])}" cx="{x(i):.1f}" cy="{y(v):.1f}" '
                             f'r="3.5" fill="{colour}">{tip}</circle>')
            else:
                parts.append(f'<rect class="point fed" data-sublayer="{_e(r["name"])}" x="{x(i) - 3:.1f}" y="{y(v) - 3:.1f}" '
                             f'width="6" height="6" fill="{"#c41a16" if r.get("beyond") else "#fff"}" '
                             f'stroke="{colour}" stroke-width="1.5">{tip}</rect>')
    for i, r in enumerate(rows):
        bold = ' font-weight="600" fill="#c41a16"' if r["name"] == culprit else ""
        parts.append(f'<text class="sublayer" x="{x(i) + 4:.1f}" y="{pad_t + H + 10}" font-size="11"{bold} '
                     f'text-anchor="end" transform="rotate(-55 {x(i) + 4:.1f} {pad_t + H + 10})">{_e(r["name"])}</text>')
    parts.append("</svg>")
    return "".join(parts)


def _attribution(case):
    att = case.get("attribution")
    if not att or "error" in att:
        return ""
    return ('<h3 class="attribution">Where the difference starts: max |port − reference| of each traced unit '
            '(a sub-layer, a sub-layer\'s backward, a training step\'s stage), in the order they ran</h3><figure class="attribution">' + _attribution_svg(att) +
            '<figcaption class="attribution" style="max-width:640px">log scale; 0 drawn at '
            f'{ZERO_AT:g}. <span style="color:#1f77b4">━●</span> own input: the port on its own input, the '
            'difference inherited from the units before plus the one introduced here; '
            '<span style="color:#ff7f0e">╍■</span> fed: the port fed the reference\'s input to the unit, the '
            'difference it introduces alone (filled: beyond the tolerance). <span style="color:#c41a16">╌</span> the '
            'tolerance (the rule allows it × (1 + |reference|)); shaded: the culprit, the first unit whose fed '
            'tensors break the rule.</figcaption></figure>')


def _tokens(seq, at):
    return " ".join(f"<b>{tok}</b>" if i == at else str(tok) for i, tok in enumerate(seq)) + " ⟨end⟩"


def _decodes(case):
    parts = []
    for d in case.get("decodes") or []:
        head = (f"{d['differing']} of {d['sequences']} sequence(s) differ" if d["differing"]
                else f"all {d['sequences']} sequence(s) identical") + (
                    " (the free runs: reported, not failed)" if d.get("free_run") else "")
        rows = []
        for r in d["rows"]:
            m, at = r.get("margin"), r["position"]
            margin = (f"reference {num(m['reference'], '.4g')}, port {num(m['port'], '.4g')}" if m else
                      ("-" if at is None else ""))
            rows.append(f'<tr class="{"fail" if at is not None else ""}"><td class="num">{r["sequence"]}</td>'
                        f'<td class="tok">{_tokens(r["reference"], at)}</td><td class="tok">{_tokens(r["port"], at)}</td>'
                        f'<td class="num">{"-" if at is None else at}</td><td>{_e(margin)}</td></tr>')
        parts.append(f'<h3 class="decode" data-tensor="{_e(d["tensor"])}">decode {_e(d["tensor"])}: {_e(head)}</h3>'
                     '<table class="decode"><tr><th>sequence</th><th>reference</th><th>port</th>'
                     '<th>first diverging position</th><th>logit margin there</th></tr>' + "".join(rows) + "</table>")
    return "".join(parts)


def _tensor_table(case):
    rows = []
    for t in case["tensors"]:
        if t["role"] == "input" and t["passed"]:
            continue
        axes = t.get("axes")
        failed = t.get("status", "failed" if not t["passed"] else "") == "failed"
        rows.append(f'<tr class="{"fail" if failed else ""}"><td>{_e(t["role"])}</td><td>{_e(t["name"])}</td>'
                    f'<td>{_e(label(t["shape"], axes) if t["shape"] is not None else "?")}</td>'
                    f'<td class="num">{t["mismatched"]} / {t["total"]}</td>'
                    f'<td class="num">{_e(_num(t["max_abs"]))}</td><td>{_e(label(t["max_abs_index"], axes))}</td>'
                    f'<td class="num">{_e(_num(t["max_ulp"]))}</td>'
                    f'<td>{_e(t.get("status") or ("PASS" if t["passed"] else "FAIL"))}</td></tr>')
    return ('<table class="tensors"><tr><th>role</th><th>tensor</th><th>shape</th><th>mismatched</th>'
            '<th>max |diff|</th><th>at</th><th>max ULP</th><th></th></tr>' + "".join(rows) +
            "</table><p class=\"legend\">inputs are listed only when they differ</p>") if rows else ""


def _case(case, tol, open_, slices):
    verdict = "PASS" if case["passed"] else "FAIL"
    goldens = ", ".join(f"{n} {d['label']}" for n, d in case["golden_details"].items())
    text = "\n".join(explanation(case, PLAIN, tol))
    return (f'<details class="case" data-verdict="{verdict}" id="case-{_e(case["id"])}" data-case-id="{_e(case["id"])}"'
            f'{" open" if open_ else ""}><summary><h2 style="display:inline">'
            f'<span class="{verdict.lower()}">{verdict}</span> '
            f'{_e(case["kind"])} <code>{_e(case["id"])}</code></h2> {_e(case.get("status") or "")} — goldens: {_e(goldens)}</summary>'
            f'<pre class="explanation">{_e(text)}</pre>{_attribution(case)}{_tensor_table(case)}{_curves(case)}{_decodes(case)}'
            f'{_heatmaps(case, slices)}</details>')


def _browsers(parts):
    """--browser: one row per browser (verdict, byte identity to Node, kernels), then its failing cases."""
    rows = []
    for name, p in parts.items():
        if not p["ran"]:
            rows.append(f'<tr class="fail" data-browser="{_e(name)}"><td>{_e(name)}</td><td colspan="4">not run: {_e(p["error"])}</td></tr>')
            continue
        s, k = p["summary"], p["kernel"]
        failing = "".join(f"<li><code>{_e(i)}</code>: {_e((c['failures'] or ['failed'])[0])}</li>"
                          for i, c in p["cases"].items() if not c["passed"])
        rows.append(f'<tr class="{"" if p["passed"] else "fail"}" data-browser="{_e(name)}"><td>{_e(name)} '
                    f'{_e((p["version"] or {}).get("version", ""))}</td><td>{s["passed"]} passed, {s["failed"]} failed</td>'
                    f'<td>{s["identical_to_node"]} of {len(p["cases"])} byte-identical to node</td>'
                    f'<td>Wasm SIMD {k.get("wasm", 0)}, JavaScript {k.get("js", 0)} products</td>'
                    f'<td>{f"<ul>{failing}</ul>" if failing else ""}</td></tr>')
    return ('<h2>Browsers</h2><table class="browsers"><tr><th>browser</th><th>verdict</th><th>against node</th>'
            '<th>product kernels</th><th>failing cases</th></tr>' + "".join(rows) + "</table>") if rows else ""


def dumps(report):
    report = report.cleaned(jsonable)  # no control character from an engine, a case or a golden
    cases = sorted(report.cases, key=lambda c: c["passed"])  # failing first, catalogue order kept
    small = len(cases) <= OPEN_ALL_UP_TO
    slices = []
    body = [_case(c, report.tolerance, small or not c["passed"], slices) for c in cases]
    s = report.summary
    verdict = "PASS" if report.passed else "FAIL"
    nav = "".join(f'<li><a href="#case-{_e(c["id"])}" class="{"pass" if c["passed"] else "fail"}">{_e(c["id"])}</a></li>'
                  for c in cases)
    unused = "".join(f"<li>{_e(p)}</li>" for p in report.unused_goldens or [])
    engines = "".join(f"<tr><th>{_e(n)}</th><td><code>{_e(c)}</code></td></tr>" for n, c in report.engines.items())
    data = json.dumps({"slices": slices}, allow_nan=False, separators=(",", ":")).replace("</", "<\\/")
    browsers = _browsers(report.browsers or {})
    cached = "".join(f'<p class="legend" id="reference-cache">{_e(line)}</p>'
                     for line in (cache_lines(report) if report.reference_cache else []))
    origin = report.reference_origin()  # beside the verdict: whether a deploy gate's "fresh" holds
    fresh = (f' <span id="reference" data-fresh="{str(origin["fresh"]).lower()}" class="{"pass" if origin["fresh"] else "fail"}">'
             + (f"reference computed fresh for every case ({origin['cases']})" if origin["fresh"] else
                f"reference taken from the reference cache for {origin['from_cache']} of {origin['cases']} case(s), "
                "not computed fresh") + "</span>")
    loose = "".join(f'<li><code>{_e(c["id"])}</code>: {_e(what)}</li>' for c, what in loose_cases(report))
    loose = f'<h2 class="fail" id="looser-tolerances">Looser tolerances</h2><ul>{loose}</ul>' if loose else ""
    looser_tol = (f' <span class="fail" id="looser-tol">(--tol, looser than the default {DEFAULT_TOL:g})</span>'
                  if report.tolerance > DEFAULT_TOL else "")
    return f"""<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>verify {_e(report.suite)}: {s['passed']} passed, {s['failed']} failed</title>
<style>{CSS}</style></head>
<body>
<h1>verify {_e(report.suite)}</h1>
<div class="verdict {verdict.lower()}" id="verdict">{verdict}: {s['passed']} passed, {s['failed']} failed</div>{fresh}
<p>Rule: <code>{_e(report.rule)}</code> with tol = {report.tolerance:g}{looser_tol}. Heatmaps show reference, port and
|port − reference| of each output matrix (attention weights first; colours per slice; values to 4 significant digits,
the difference computed from the exact doubles; NaN magenta). Hover a cell for its index and values.</p>
<table class="engines">{engines}</table>
{cached}
{loose}
{browsers}
{f'<h2 class="fail">Unused goldens</h2><ul>{unused}</ul>' if unused else ''}
<nav><ul>{nav}</ul></nav>
{''.join(body)}
<div id="tip"></div>
<script type="application/json" id="verify-data">{data}</script>
<script>{SCRIPT}</script>
</body></html>
"""
