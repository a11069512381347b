"""The page `verify inspect --layer L --head H --html FILE` writes: the lesson's figure, one head's
full attention weights with the tokens on both axes (rows: the token that attends, the query;
columns: the token attended to, the key), for each sentence, the reference's and the port's side
by side, with their difference stated by the rule of every case. One self-contained HTML file:
inline SVG and CSS, no script, nothing fetched.

Each cell is an SVG rect filled rgb(s, s, 255) with s = round(255 * (1 - weight)) (white for 0,
blue for 1) and carries data-query, data-key and data-weight; WORD's row is outlined in red, the
--target columns in dashed green."""

import html

from ..axes import label
from ..compare import Tensor, compare_tensor

CELL = 28  # pixels per cell
MARGIN = 110  # room for the token labels

CSS = """
body{font:14px/1.4 system-ui,-apple-system,"Segoe UI",sans-serif;margin:24px;color:#1d1d1f;background:#fff}
h1{font-size:20px;margin:0 0 6px} h2{font-size:16px;margin:18px 0 4px}
.pair{display:flex;gap:28px;align-items:flex-start;flex-wrap:nowrap}
figure{margin:0} figcaption{font-size:13px;color:#333;max-width:560px}
.same{color:#0a7d28} .beyond{color:#c41a16;font-weight:600} .legend{font-size:13px;color:#555}
"""


def _e(text):
    return html.escape(str(text), quote=True)


def shade(weight):
    """The fill of a cell: 255 (white) at weight 0 down to 0 (full blue) at weight 1."""
    return int(round(255 * (1.0 - min(max(float(weight), 0.0), 1.0))))


def heatmap_svg(tokens, weights, engine, sentence, query=None, targets=()):
    """One head's (T, T) weights as an inline SVG heatmap with the tokens on both axes."""
    T = len(tokens)
    size = MARGIN + T * CELL
    parts = [f'<svg class="heatmap" data-engine="{_e(engine)}" data-sentence="{_e(sentence)}" data-tokens="{T}" '
             f'xmlns="http://www.w3.org/2000/svg" width="{size + 20}" height="{size + 20}" font-family="sans-serif" '
             f'font-size="12" role="img" aria-label="{_e(engine)}: attention weights, {_e(sentence)} sentence">']
    for i, t in enumerate(tokens):
        y = MARGIN + i * CELL + CELL * 0.65
        parts.append(f'<text x="{MARGIN - 6}" y="{y:.1f}" text-anchor="end">{_e(t)}</text>')
        x = MARGIN + i * CELL + CELL / 2
        parts.append(f'<text x="{x:.1f}" y="{MARGIN - 6}" transform="rotate(-60 {x:.1f} {MARGIN - 6})">{_e(t)}</text>')
    for q in range(T):
        for k in range(T):
            w = float(weights[q, k])
            s = shade(w)
            parts.append(f'<rect class="cell" data-query="{q}" data-key="{k}" data-weight="{w!r}" '
                         f'x="{MARGIN + k * CELL}" y="{MARGIN + q * CELL}" width="{CELL}" height="{CELL}" '
                         f'fill="rgb({s},{s},255)"><title>{_e(tokens[q])} -&gt; {_e(tokens[k])}: {w:.4f}</title></rect>')
    for k in targets:
        parts.append(f'<rect class="target" x="{MARGIN + k * CELL}" y="{MARGIN}" width="{CELL}" height="{T * CELL}" '
                     'fill="none" stroke="#0a7d28" stroke-width="2" stroke-dasharray="5,3"/>')
    if query is not None:
        parts.append(f'<rect class="query" x="{MARGIN}" y="{MARGIN + query * CELL}" width="{T * CELL}" height="{CELL}" '
                     'fill="none" stroke="#d00" stroke-width="2"/>')
    parts.append("</svg>")
    return "".join(parts)


def head_difference(reference, port, tol):
    """The head's (T, T) weights compared by the usual rule: (text, passed)."""
    t = compare_tensor("weights", "output", Tensor("float64", reference), Tensor("float64", port), tol)
    if t.max_abs == 0:
        return f"bit-identical on this head ({t.total} weights)", True
    text = (f"greatest |port − reference| on this head {t.max_abs:.3g} at {label(t.max_abs_index, ['query', 'key'])}, "
            f"{t.max_ulp} ULP at most; {'within' if t.passed else 'BEYOND'} {tol:g} · (1 + |reference|)")
    return text, t.passed


def _overall(comparisons, sentence):
    """One sentence's comparison of every tensor (every layer and head, the hidden states)."""
    results = next(r for s, r in comparisons if s is sentence)
    worst = max((t.max_abs or 0.0) for t in results)
    if all(t.passed for t in results):
        return "every layer's weights and hidden states: " + ("bit-identical" if worst == 0 else
                                                                f"within the tolerance (greatest |difference| {worst:.3g})")
    failing = ", ".join(t.name for t in results if not t.passed)
    return f"every layer's weights and hidden states: BEYOND the tolerance in {failing}"


def page(sentences, answers, comparisons, args, queries, targets):
    """The self-contained HTML page of one head, every sentence, every engine that answered. args:
    the command's options (layer, head, target: the target tokens' names, tol)."""
    layer, head, target_names, tol = args.layer, args.head, args.target, args.tol
    title = f"all-MiniLM-L6-v2, layer {layer}, head {head}"
    body = [f"<h1>{_e(title)}</h1>",
            '<p class="legend">Rows: the token that attends (query); columns: the token attended to (key). A darker '
            "blue cell is more weight; each row sums to 1. Outlined in red: the row of the chosen token; dashed "
            "green: the target columns. Hover a cell for its weight.</p>"]
    for i, s in enumerate(sentences):
        query = queries[i] if queries else None
        cols = targets[i] if targets else []
        body.append(f'<h2 data-sentence="{_e(s.name)}">{_e(s.name)} sentence: {_e(s.text)}</h2>')
        figures = []
        for a in answers:
            w = a.attentions[i][layer, head]  # (T, T)
            caption = a.engine
            if query is not None and cols:
                caption += ": " + ", ".join(f"'{s.tokens[query]}' → '{n}' {w[query, k]:.3f}"
                                            for n, k in zip(target_names, cols))
            figures.append(f'<figure>{heatmap_svg(s.tokens, w, a.engine, s.name, query, cols)}'
                           f'<figcaption>{_e(caption)}<br><span class="legend">{_e(a.command)}</span>'
                           "</figcaption></figure>")
        body.append(f'<div class="pair">{"".join(figures)}</div>')
        if len(answers) > 1:
            text, passed = head_difference(answers[0].attentions[i][layer, head], answers[1].attentions[i][layer, head], tol)
            overall = _overall(comparisons, s)
            cls = "same" if passed and "BEYOND" not in overall else "beyond"
            body.append(f'<p class="difference {cls}" data-sentence="{_e(s.name)}">port vs reference: {_e(text)}; '
                        f"{_e(overall)}.</p>")
    return ("<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">"
            f"<title>{_e(title)}</title><style>{CSS}</style></head><body>\n" + "\n".join(body) + "\n</body></html>\n")

