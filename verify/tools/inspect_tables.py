"""What `verify inspect` prints from one engine's answer (docs/inspect.md): the layer x head table
of where WORD attends most, each head's weights from WORD to the --target tokens, and with --vs
how they move from the first sentence to the second, sorted so that the heads whose weight moves
from the first target to the second come first, then the answer in words. "Most attended" skips
[CLS] and [SEP] and marks with '*' where one of them takes more.

Shapes: attentions (L, H, T, T) per sentence: L layers, H heads, T queries and keys."""

import numpy as np

from ..errors import InputError

SPECIAL = ("[CLS]", "[SEP]", "[PAD]")
TOP_HEADS = 3  # the strongest heads on the first target, whose fate the answer states


def attends_to(attentions, tokens, query):
    """For every layer and head, the key that `query` attends to most among the ordinary tokens,
    its weight, and whether a special token takes more: (keys (L, H), weights (L, H), outshone (L, H))."""
    special = np.array([t in SPECIAL for t in tokens])
    if special.all():
        raise InputError("the sentence has no token besides [CLS] and [SEP]")
    row = attentions[:, :, query, :]  # (L, H, K)
    rows = np.where(~special, row, -np.inf)
    keys = np.argmax(rows, axis=-1)  # (L, H)
    weights = np.take_along_axis(rows, keys[..., None], axis=-1)[..., 0]
    specials = np.where(special, row, -np.inf).max(axis=-1)
    return keys, weights, specials > weights


def _cell(tokens, key, weight, outshone, digits=2):
    return f"{tokens[key]} {weight:.{digits}f}{'*' if outshone else ''}"


def table_lines(tokens, query, keys, weights, outshone):
    """The layer x head table: each cell 'token weight' ('*': [CLS] or [SEP] takes more)."""
    L, H = keys.shape
    cells = [[_cell(tokens, keys[l, h], weights[l, h], outshone[l, h]) for h in range(H)] for l in range(L)]
    width = max(8, max(len(c) for row in cells for c in row))
    lines = [f"'{tokens[query]}' (token {query}) attends most to, among the tokens but [CLS] and [SEP] "
             "(its weight; * where [CLS] or [SEP] takes more):",
             "layer  " + " ".join(f"{'head ' + str(h):<{width}}" for h in range(H))]
    for l in range(L):
        lines.append(f"{l:<5}  " + " ".join(f"{c:<{width}}" for c in cells[l]))
    return lines


def head_lines(tokens, query, weights_row, layer, head):
    """One head's attention row for the query token, every key with its weight."""
    lines = [f"layer {layer}, head {head}: '{tokens[query]}' attends to"]
    order = np.argsort(-weights_row, kind="stable")
    lines += [f"  {tokens[k]:<14} {weights_row[k]:.4f}" for k in order]
    return lines


def target_weights(attentions, query, targets):
    """(L, H, n): the weight from the query token to each target position."""
    return attentions[:, :, query, :][..., targets]


def moves(first, second):
    """From the (L, H, n) weights in the first and second sentence: (moved (L, H), flips (L, H)).
    With two targets or more, moved = the change on the second target minus the change on the first
    (weight moved from the first target to the second), and a head flips when the first target
    gets more than the second in the first sentence and less in the second; with one, moved is
    its change and nothing flips."""
    delta = second - first
    if first.shape[-1] < 2:
        return delta[..., 0], np.zeros(delta.shape[:2], dtype=bool)
    flips = (first[..., 0] > first[..., 1]) & (second[..., 1] > second[..., 0])
    return delta[..., 1] - delta[..., 0], flips


def _order(moved, flips):
    """Heads (l, h) sorted: those that flip first, then by weight moved, the most first."""
    L, H = moved.shape
    return sorted(((l, h) for l in range(L) for h in range(H)), key=lambda lh: (not flips[lh], -moved[lh], lh))


def _figures(names, first, second, lh):
    return ", ".join(f"{n} {first[lh][i]:.3f} -> {second[lh][i]:.3f}" for i, n in enumerate(names))


def moves_lines(sentences, query_pos, names, positions, attentions, tokens_top):
    """The per-head table of the weights from the query token to each target in both sentences,
    sorted as _order says, and the answer in words."""
    (a, b), (qa, qb) = sentences, query_pos
    first = target_weights(attentions[0], qa, positions[0])
    second = target_weights(attentions[1], qb, positions[1])
    moved, flips = moves(first, second)
    word = a.tokens[qa]
    where = ", ".join(f"'{n}' (token {pa}{'' if pa == pb else f' / {pb}'})" for n, pa, pb in zip(names, *positions))
    lines = [f"the weight from '{word}' (token {qa}{'' if qa == qb else f' / {qb}'}) to {where}, every head, "
             "first sentence -> second:",
             f"  first:  {a.text}", f"  second: {b.text}"]
    if len(names) >= 2:
        lines.append(f"sorted by the weight moved from '{names[0]}' to '{names[1]}' (the change on '{names[1]}' minus "
                     f"the change on '{names[0]}'), the heads that move from '{names[0]}' to '{names[1]}' first (>>)")
    else:
        lines.append(f"sorted by the change of the weight on '{names[0]}', the greatest first")
    width = max(14, max(len(n) for n in names))
    lines.append("layer head  " + "  ".join(f"{n:<{width}}" for n in names) + "  moved   most attended, first -> second "
                 "(* [CLS]/[SEP] take more)")
    (ka, wa, oa), (kb, wb, ob) = tokens_top
    for lh in _order(moved, flips):
        cells = "  ".join(f"{f'{first[lh][i]:.3f} -> {second[lh][i]:.3f}':<{width}}" for i in range(len(names)))
        top = f"{_cell(a.tokens, ka[lh], wa[lh], oa[lh], 3)} -> {_cell(b.tokens, kb[lh], wb[lh], ob[lh], 3)}"
        mark = f"  >> {names[1]}" if flips[lh] else ""
        lines.append(f"{lh[0]:<5} {lh[1]:<4}  {cells}  {moved[lh]:+.3f}  {top}{mark}")
    becomes = kb == positions[1][1] if len(names) >= 2 else None  # (L, H): the second target is the top token
    return lines + answer_lines(word, names, first, second, moved, flips, becomes)


def answer_lines(word, names, first, second, moved, flips, becomes):
    """Exercise 6 in words: the heads that move from the first target to the second (and those of
    them where the second becomes the token attended to most), and what the heads strongest on the
    first target do."""
    if len(names) < 2:
        return []
    t1, t2 = names[0], names[1]
    flipped = [lh for lh in _order(moved, flips) if flips[lh]]
    L, H = moved.shape
    listed = ", ".join(f"layer {l} head {h} ({_figures(names[:2], first, second, (l, h))})" for l, h in flipped)
    lines = [f"answer: {len(flipped)} of {L * H} heads move '{word}' from '{t1}' to '{t2}' (more weight on '{t1}' "
             f"than on '{t2}' in the first sentence, more on '{t2}' in the second)"
             + (f", the most weight moved first: {listed}" if flipped else "")]
    top = [lh for lh in flipped if becomes[lh]]
    if flipped:
        lines.append(f"of these, '{t2}' becomes the token '{word}' attends to most in the second sentence ([CLS] and "
                     f"[SEP] aside) in " + (", ".join(f"layer {l} head {h}" for l, h in top) if top else "none"))
    strongest = sorted(((l, h) for l in range(L) for h in range(H)), key=lambda lh: (-first[lh][0], lh))[:TOP_HEADS]
    fates = [f"layer {l} head {h} ({_figures(names[:2], first, second, (l, h))}: "
             f"{'moves to ' + repr(t2) if second[l, h][1] > second[l, h][0] else 'stays on ' + repr(t1)})"
             for l, h in strongest]
    lines.append(f"the {TOP_HEADS} heads where '{word}' attends most to '{t1}' in the first sentence: " + ", ".join(fates))
    return lines


def weights_lines(sentence, query, names, positions, attentions, top):
    """One sentence, --target: per head the weight from the query to each target, sorted by the
    first target's weight."""
    w = target_weights(attentions, query, positions)
    L, H = w.shape[:2]
    keys, weights, outshone = top
    width = max(6, max(len(n) for n in names))
    lines = [f"the weight from '{sentence.tokens[query]}' (token {query}) to "
             + ", ".join(f"'{n}' (token {p})" for n, p in zip(names, positions))
             + f", every head, sorted by the weight on '{names[0]}':",
             "layer head  " + "  ".join(f"{n:<{width}}" for n in names) + "  most attended (* [CLS]/[SEP] take more)"]
    for l, h in sorted(((l, h) for l in range(L) for h in range(H)), key=lambda lh: (-w[lh][0], lh)):
        cells = "  ".join(f"{w[l, h, i]:<{width}.3f}" for i in range(len(names)))
        lines.append(f"{l:<5} {h:<4}  {cells}  {_cell(sentence.tokens, keys[l, h], weights[l, h], outshone[l, h], 3)}")
    return lines


def answer_text(answer, sentences, args, queries, targets):
    """Everything printed from one engine's answer."""
    lines = []
    tops = [attends_to(at, s.tokens, q) for at, s, q in zip(answer.attentions, sentences, queries)]
    if args.vs is not None:
        lines += moves_lines(sentences, queries, args.target, targets, answer.attentions, tops)
    elif args.target:
        lines += weights_lines(sentences[0], queries[0], args.target, targets[0], answer.attentions[0], tops[0])
    else:
        lines += table_lines(sentences[0].tokens, queries[0], *tops[0])
    if args.layer is not None:
        for s, at, q in zip(sentences, answer.attentions, queries):
            if len(sentences) > 1:
                lines.append(f"{s.name} sentence:")
            lines += head_lines(s.tokens, q, at[args.layer, args.head, q], args.layer, args.head)
    return lines
