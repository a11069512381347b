"""The reverse-the-digits run: an encoder-decoder Transformer trained with Adam to reverse digit
strings, then decoded greedily (twin: port_ts/src/runs/reversal.ts; docs/reversal.md).

Config (ops/attention/train_reversal.json):
    d, heads, ffn_hidden, enc_blocks, dec_blocks   the model (vocabularies: digits.VOCAB; dropout 0)
    min_digits, max_digits                         input lengths, drawn uniformly in that range
    n_train, n_test                                distinct training inputs, then held-out ones
    batch                                          rows per step, cyclic over the training set
    steps, lr, clip, checkpoint_every              the schedule (runs/schedule.py)
Draws, in this order, from the case's generator: init_transformer_params (the model's parameter
order), then digits_data (training set, then held-out set). Training draws nothing more.
Step t: the padding-masked cross-entropy (transformer_loss) of the batch digits.batch_rows(t).

evaluate(params) -> outputs, at the final parameters (also run on the reference's final state by
the port, docs/training.md "Evaluation"):
    test_loss             ()         teacher-forced loss over the whole held-out set
    decode.tokens         int64 (N, P)   greedy decodes of the held-out inputs (<eos> included), -1 after
    decode.margin         (N, P)     top-1 minus top-2 logit at each decoding step, 0 after the end
    decode.exact          int64 (N,)     1 where the decode is the reversed input then <eos>
    exact_match           ()         the fraction of exact decodes
    lab.tokens, lab.margin   (P,)    the decode of the lab's example 3 8 0 5 2 7
    lab.cross_weights     (H, T, S)  decoder block 0's cross-attention of the lab's final decode
                                     pass (T = tokens emitted, S = source steps)
and digests train_data, test_data (digits.data_digest), equal across engines.
"""

import numpy as np

from ..core import case_config as cc
from . import digits as dg
from .decode import decode_outputs, greedy_decode
from ..models.transformer import init_transformer_params, transformer_loss, transformer_loss_backward
from .schedule import schedule

LAB_EXAMPLE = (3, 8, 0, 5, 2, 7)  # the lab's example; reserved: never in either set


def reversal_model_config(config):
    """The transformer config of the run: the case's sizes, the digits' vocabulary, dropout 0."""
    model = {n: cc.positive_int(config, n) for n in ("d", "ffn_hidden", "heads", "enc_blocks", "dec_blocks")}
    if model["d"] % model["heads"]:
        raise cc.CaseError(f"config d = {model['d']} must be a multiple of heads = {model['heads']}")
    return {"vocab_src": dg.VOCAB, "vocab_tgt": dg.VOCAB, **model, "dropout": 0.0}


def reversal_batch_loss(params, model, arrays):
    """(loss, cache) of transformer_loss on a set of encoded inputs."""
    return transformer_loss(params, model, arrays["src"], arrays["src_lens"], arrays["tgt_in"],
                            arrays["tgt_out"], arrays["tgt_lens"])


def exact_rows(tokens, arrays):
    """int64 (N,): 1 where a decode (N, P) is the target (reversed digits, <eos>) and then ends."""
    N, P = tokens.shape
    want = np.where(np.arange(P)[None, :] < arrays["tgt_lens"][:, None], arrays["tgt_out"], -1)  # (N, P)
    return np.all(tokens == want, axis=1).astype(np.int64)


def reversal_setup(config, rng):
    """The run for cases_training.RUNS: {names, params, step_fn, evaluate, inputs, digests} and the
    schedule."""
    model = reversal_model_config(config)
    lo, hi = cc.positive_int(config, "min_digits"), cc.positive_int(config, "max_digits")
    if lo > hi or hi < len(LAB_EXAMPLE):
        raise cc.CaseError(f"config digits {lo}..{hi}: need min_digits <= max_digits and max_digits >= {len(LAB_EXAMPLE)}")
    n_train, n_test, B = (cc.positive_int(config, k) for k in ("n_train", "n_test", "batch"))
    params = init_transformer_params(rng, model)
    names = list(params)
    data = dg.digits_data(rng, n_train, n_test, lo, hi, reserved=[LAB_EXAMPLE])
    train, test = data["train"], data["test"]
    P = hi + 1

    def step_fn(p, t):
        loss, cache = reversal_batch_loss(p, model, dg.take_rows(train, dg.batch_rows(n_train, B, t)))
        return loss, transformer_loss_backward(cache)

    def evaluate(p):
        test_loss, _ = reversal_batch_loss(p, model, test)
        dec = greedy_decode(p, model, test["src"], test["src_lens"], P, dg.BOS, dg.EOS)
        exact = exact_rows(dec["tokens"], test)
        lab = dg.encode_inputs([LAB_EXAMPLE], hi)
        lab_dec = greedy_decode(p, model, lab["src"], lab["src_lens"], P, dg.BOS, dg.EOS)
        T = int(lab_dec["lengths"][0])
        return {
            "test_loss": np.array(test_loss),
            **decode_outputs(dec["tokens"], dec["margins"], exact),  # (N, P) (N, P) (N,) ()
            "lab.tokens": lab_dec["tokens"][0],  # (P,)
            "lab.margin": lab_dec["margins"][0],  # (P,)
            "lab.cross_weights": lab_dec["cross_weights"][0][0, :, :T, :],  # (H, T, S)
        }

    return {"names": names, "params": params, "step_fn": step_fn, "evaluate": evaluate,
            "inputs": {"test_src": test["src"], "test_src_lens": test["src_lens"],
                       "lab_src": dg.encode_inputs([LAB_EXAMPLE], hi)["src"]},
            "digests": {"train_data": dg.data_digest(train), "test_data": dg.data_digest(test)},
            **schedule(config)}
