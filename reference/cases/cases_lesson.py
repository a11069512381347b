"""Forward cases of the lesson's computations: positions, kernel regression, score scaling
(twin: casesLesson.ts). Each builder draws in the order written and returns (inputs, outputs)
as dicts of named arrays; positional encoding has a draw and a compute function (cases.py).

Draw order per op:
  sinusoidal_table, position_similarity   no draws
  positional_encoding                     x ~ N(0, 1) of shape (B, T, d), then the dropout mask
                                          (B, T, d) when dropout_p > 0
  nadaraya_watson                         n_train uniforms on [0, 5) (sorted after drawing), then
                                          n_train standard normals (noise)
  score_scaling                           for each d in dims, in order: q (n, d), then k (n, d)
"""

import numpy as np

from ..core import case_config as cc
from ..nn.nadaraya_watson import mean_abs_error, nadaraya_watson, regression_data
from ..nn.positional_encoding import position_similarity, positional_encoding_forward, sinusoidal_table
from ..nn.score_scaling import score_scaling


def sinusoidal_table_case(config, rng):
    # config: max_len, d; rows (optional): the positions to report, so a long table stays small
    max_len, d = cc.positive_int(config, "max_len"), cc.positive_int(config, "d")
    P = sinusoidal_table(max_len, d)  # (L, d)
    rows = cc.get(config, "rows", None)
    if rows is None:
        return {}, {"P": P}
    rows = cc.int_array(rows, "rows")
    if rows.ndim != 1 or np.any(rows < 0) or np.any(rows >= max_len):
        raise cc.CaseError(f"config 'rows' must list positions in [0, {max_len}), got {rows.tolist()}")
    return {"rows": rows}, {"P_rows": P[rows]}


def positional_encoding_inputs(config, rng):
    # config: shape [B, T, d]; dropout_p (default 0)
    return {"x": rng.normal(cc.shape(config, "shape", 3))}  # (B, T, d)


def positional_encoding(inputs, config, rng=None):
    (x,) = cc.need(inputs, "x")
    out, cache = positional_encoding_forward(x, cc.get(config, "dropout_p", 0.0), rng)
    return {"out": out} if cache["mask"] is None else {"out": out, "mask": cache["mask"]}


def position_similarity_case(config, rng):
    # config: max_len, d
    P = sinusoidal_table(cc.positive_int(config, "max_len"), cc.positive_int(config, "d"))
    return {}, {"similarity": position_similarity(P)}


def nadaraya_watson_case(config, rng):
    # config: kernel, sigma (default 1), n_train (default 40), n_val (default 50)
    data = regression_data(rng, cc.positive_int(config, "n_train", 40), cc.positive_int(config, "n_val", 50))
    y_hat, W = nadaraya_watson(data["x_train"], data["y_train"], data["x_val"],
                               cc.get(config, "kernel"), cc.get(config, "sigma", 1.0))
    inputs = {"x_train": data["x_train"], "y_train": data["y_train"], "x_val": data["x_val"]}
    outputs = {"weights": W, "y_hat": y_hat, "y_true": data["y_true"],
               "mae": np.asarray(mean_abs_error(y_hat, data["y_true"]))}
    return inputs, outputs


def score_scaling_case(config, rng):
    # config: dims (list of positive integers), n (samples per d)
    dims = cc.int_array(cc.get(config, "dims"), "dims")
    if dims.ndim != 1 or np.any(dims <= 0):
        raise cc.CaseError(f"config 'dims' must be a list of positive integers, got {dims.tolist()}")
    st = score_scaling([int(d) for d in dims], cc.positive_int(config, "n"), rng)
    inputs = {"dims": dims, "q_mean": st["q_mean"], "k_mean": st["k_mean"]}
    outputs = {"dots_mean": st["dots_mean"], "var_raw": st["var_raw"], "var_scaled": st["var_scaled"]}
    return inputs, outputs


DRAWS = {"positional_encoding": positional_encoding_inputs}
COMPUTE = {"positional_encoding": positional_encoding}
BUILDERS = {
    "sinusoidal_table": sinusoidal_table_case,
    "position_similarity": position_similarity_case,
    "nadaraya_watson": nadaraya_watson_case,
    "score_scaling": score_scaling_case,
}
