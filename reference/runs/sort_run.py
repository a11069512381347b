"""The sort-the-digits run: a decoder-only model of the lesson's blocks trained with Adam to write
its prompt's digits in ascending order, then generated greedily through the KV cache
(twin: port_ts/src/runs/sortRun.ts; docs/decoder_lm.md).

Config (ops/attention/train_sort.json):
    alphabet (A), min_len, max_len            inputs of min_len..max_len digits below A
    d, heads, ffn_hidden, blocks               the model (vocab A + 2, max_len 2 max_len + 1 positions)
    n_train, n_test, batch                     distinct training inputs, held-out ones, rows per step
    steps, lr, clip, checkpoint_every          the schedule (runs/schedule.py)
Draws, in this order: init_decoder_lm_params, then sorting_data (training set, then held-out set).
Step t: decoder_lm_loss (only the written tokens count) of the batch digits.batch_rows(t).

evaluate(params) -> outputs, at the final parameters (also run on the reference's final state by
the port):
    test_loss          ()            teacher-forced loss over the held-out set
    decode.tokens      int64 (N, G)  the held-out prompts (left-padded, one batch) generated
                                     greedily through the KV cache, G = max_len + 1 tokens
                                     (<eos> included), -1 after the end
    decode.margin      (N, G)        top-1 minus top-2 logit at each step, 0 after the end
    decode.exact       int64 (N,)    1 where the generation is the sorted digits, then <eos>
    exact_match        ()            the fraction of exact generations
    kv.max_logit_diff  ()            the greatest |cached - recomputed| logit over every step of
                                     every row: the same generation by full recomputation
    kv.rows_differ     ()            how many rows' tokens differ between the two
    lab.tokens, lab.margin (G,)      the lab's example 3 1 4 1 2 generated alone
    lab.weights        (H, S, S)     the last block's attention over the lab's whole sequence
                                     (S = prompt + tokens written - 1), from the recomputation
and digests train_data, test_data (sorting_digest), equal across engines.
"""

import numpy as np

from ..core import case_config as cc
from . import sorting as st
from .decode import decode_outputs
from .digits import batch_rows
from .kv_cache import generate_cached, generate_full, left_pad
from ..models.decoder_lm import decoder_lm_forward, decoder_lm_loss, decoder_lm_loss_backward, init_decoder_lm_params
from .schedule import schedule

LAB_EXAMPLE = (3, 1, 4, 1, 2)  # the lab's example; reserved: never in either set


def sort_model_config(config):
    """The decoder_lm config of the run: the case's sizes, the sorting vocabulary and positions."""
    model = {n: cc.positive_int(config, n) for n in ("d", "heads", "ffn_hidden", "blocks")}
    if model["d"] % model["heads"]:
        raise cc.CaseError(f"config d = {model['d']} must be a multiple of heads = {model['heads']}")
    A, hi = cc.positive_int(config, "alphabet"), cc.positive_int(config, "max_len")
    return {"vocab": A + 2, "max_len": 2 * hi + 1, **model}


def exact_generations(tokens, inputs, A):
    """int64 (N,): 1 where row n of tokens (N, G) is the sorted input, <eos>, then -1."""
    N, G = tokens.shape
    out = np.zeros(N, dtype=np.int64)
    for n, digits in enumerate(inputs):
        want = sorted(digits) + [st.eos_id(A)]
        want = want + [-1] * (G - len(want))
        out[n] = int(list(tokens[n]) == want)
    return out


def sort_setup(config, rng):
    """The run for cases_training.RUNS: {names, params, step_fn, evaluate, inputs, digests} and the schedule."""
    model = sort_model_config(config)
    A, lo, hi = (cc.positive_int(config, k) for k in ("alphabet", "min_len", "max_len"))
    if lo > hi or not lo <= len(LAB_EXAMPLE) <= hi or A <= max(LAB_EXAMPLE):
        raise cc.CaseError(f"config lengths {lo}..{hi}, alphabet {A}: need min_len <= {len(LAB_EXAMPLE)} <= max_len "
                           f"and alphabet > {max(LAB_EXAMPLE)} (the lab's example {LAB_EXAMPLE})")
    n_train, n_test, B = (cc.positive_int(config, k) for k in ("n_train", "n_test", "batch"))
    params = init_decoder_lm_params(rng, model)
    names = list(params)
    data = st.sorting_data(rng, n_train, n_test, lo, hi, A, reserved=[LAB_EXAMPLE])
    train, test = data["train"], data["test"]
    G, eos = hi + 1, st.eos_id(A)
    prompts, pads = left_pad([st.prompt_of(x, A) for x in data["test_inputs"]], eos)
    lab_prompt = np.array([st.prompt_of(LAB_EXAMPLE, A)], dtype=np.int64)

    def step_fn(p, t):
        rows = st.take_sort_rows(train, batch_rows(n_train, B, t))
        loss, cache = decoder_lm_loss(p, model, rows["tokens"], rows["targets"], rows["weights"])
        return loss, decoder_lm_loss_backward(cache)

    def evaluate(p):
        test_loss, _ = decoder_lm_loss(p, model, test["tokens"], test["targets"], test["weights"])
        cached = generate_cached(p, model, prompts, pads, G, eos)
        full = generate_full(p, model, prompts, pads, G, eos)
        exact = exact_generations(cached["tokens"], data["test_inputs"], A)
        lab = generate_cached(p, model, lab_prompt, np.zeros(1, dtype=np.int64), G, eos)
        written = int(lab["lengths"][0])
        seq = np.concatenate([lab_prompt, lab["tokens"][:, :written - 1]], axis=1)  # (1, S)
        _, lab_model = decoder_lm_forward(seq, p, model)
        return {
            "test_loss": np.array(test_loss),
            **decode_outputs(cached["tokens"], cached["margins"], exact),  # (N, G) (N, G) (N,) ()
            "kv.max_logit_diff": np.array(float(np.max(np.abs(cached["logits"] - full["logits"])))),
            "kv.rows_differ": np.array(float(np.count_nonzero(np.any(cached["tokens"] != full["tokens"], axis=1)))),
            "lab.tokens": lab["tokens"][0],  # (G,)
            "lab.margin": lab["margins"][0],  # (G,)
            "lab.weights": lab_model["weights"][-1][0],  # (H, S, S)
        }

    return {"names": names, "params": params, "step_fn": step_fn, "evaluate": evaluate,
            "inputs": {"test_prompts": prompts, "test_pads": pads, "lab_prompt": lab_prompt[0]},
            "digests": {"train_data": st.sorting_digest(train), "test_data": st.sorting_digest(test)},
            **schedule(config)}
