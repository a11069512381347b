"""reference/core/ops.py: the fast reductions give the plain loops' bits (docs/performance.md).

The specification is the loop the module used to run and the port runs: acc = +0.0, then
acc = acc + term_k for k = 0..K-1. ops.matmul / matmul_nt / matmul_tn / sum_last / mean_last now
sum through a reduction over the outermost axis of a (K + 1, R) block (or, for few long terms,
that loop itself); every result here must equal the loop's bit for bit (compared as uint64, so
-0.0 and +0.0 differ). The data mix magnitudes from 1e-20 to 1e20, signs and zeros, so that any
other order gives other bits: the tests show that np.sum / @ on the same data do differ.
"""

import numpy as np
import pytest

from reference.core import ops


# ---- the specification: the loops, one rounded add per term, from +0.0 ----

def loop_matmul(a, b):
    a = np.asarray(a, dtype=np.float64)
    b = np.asarray(b, dtype=np.float64)
    acc = np.zeros(np.broadcast_shapes(a.shape[:-2], b.shape[:-2]) + (a.shape[-2], b.shape[-1]))
    for k in range(a.shape[-1]):
        acc += a[..., :, k:k + 1] * b[..., k:k + 1, :]
    return acc


def loop_sum_last(x):
    x = np.asarray(x, dtype=np.float64)
    acc = np.zeros(x.shape[:-1])
    for k in range(x.shape[-1]):
        acc += x[..., k]
    return acc


def bits(x):
    x = np.asarray(x)
    assert x.dtype == np.float64
    return np.ascontiguousarray(x).view(np.uint64)


def assert_same_bits(got, want, what=""):
    assert got.shape == want.shape, f"{what}: shape {got.shape}, loop {want.shape}"
    assert got.dtype == np.float64
    diff = bits(got) != bits(want)
    assert not diff.any(), (f"{what}: {int(diff.sum())} of {diff.size} elements differ from the loop, first at "
                            f"{np.argwhere(diff)[0].tolist()}: {got[diff][0]!r} vs {want[diff][0]!r}")


def wild(rng, shape):
    """Signs, magnitudes 1e-20..1e20, exact zeros of both signs: order changes the bits."""
    x = rng.standard_normal(shape) * 10.0 ** rng.integers(-20, 21, size=shape)
    u = rng.random(shape)
    x[u < 0.06] = 0.0
    x[(u >= 0.06) & (u < 0.12)] = -0.0
    return x


def random_case(rng):
    """(a, b): batched a against 2-D b, equal leading axes, broadcast ones, 0-size axes, K = 1."""
    L = int(rng.integers(0, 4))
    lead = [int(s) for s in rng.integers(0, 4, size=L)]
    M, N = (int(s) for s in rng.integers(0, 7, size=2))
    K = int(rng.choice([0, 1, 1, 2, 3, 7, 9, 16, 33, 130, 300]))
    a_lead, b_lead = list(lead), list(lead)
    kind = rng.integers(0, 4)
    if kind == 0:
        b_lead = []  # one matrix b for every batch
    elif kind == 1 and L:
        i = int(rng.integers(0, L))
        a_lead[i] = 1  # broadcast a along one axis
    elif kind == 2 and L:
        b_lead = b_lead[int(rng.integers(0, L)):]  # b with fewer leading axes
    return wild(rng, tuple(a_lead) + (M, K)), wild(rng, tuple(b_lead) + (K, N))


# ---- bit identity ----

@pytest.mark.parametrize("seed", range(8))
def test_matmul_is_the_loop_bit_for_bit(seed):
    rng = np.random.default_rng(seed)
    for _ in range(150):
        a, b = random_case(rng)
        assert_same_bits(ops.matmul(a, b), loop_matmul(a, b), f"matmul {a.shape} @ {b.shape}")


@pytest.mark.parametrize("seed", range(4))
def test_matmul_nt_and_tn_are_the_loop(seed):
    rng = np.random.default_rng(100 + seed)
    for _ in range(100):
        a, b = random_case(rng)
        bt = np.ascontiguousarray(np.swapaxes(b, -1, -2))  # (..., N, K)
        assert_same_bits(ops.matmul_nt(a, bt), loop_matmul(a, b), f"matmul_nt {a.shape} {bt.shape}")
        at = np.ascontiguousarray(np.swapaxes(a, -1, -2))  # (..., K, M)
        assert_same_bits(ops.matmul_tn(at, b), loop_matmul(a, b), f"matmul_tn {at.shape} {b.shape}")


@pytest.mark.parametrize("seed", range(4))
def test_sum_last_and_mean_last_are_the_loop(seed):
    rng = np.random.default_rng(200 + seed)
    for _ in range(200):
        shape = tuple(int(s) for s in rng.integers(0, 6, size=int(rng.integers(0, 4))))
        K = int(rng.choice([0, 1, 2, 5, 9, 17, 128, 129, 448, 1000]))
        x = wild(rng, shape + (K,))
        assert_same_bits(ops.sum_last(x), loop_sum_last(x), f"sum_last {x.shape}")
        with np.errstate(invalid="ignore", divide="ignore"):
            assert_same_bits(ops.mean_last(x), loop_sum_last(x) / K, f"mean_last {x.shape}")


def test_the_model_shapes():
    """The shapes of one reversal training step (bench/), transposed views included."""
    rng = np.random.default_rng(7)
    cases = [((16, 448), (448, 16)), ((16, 448), (448, 64)), ((64, 448), (448, 16)), ((13, 448), (448, 16)),
             ((448, 16), (16, 64)), ((448, 64), (64, 16)), ((64, 7, 16), (16, 16)), ((448, 16), (16, 13)),
             ((64, 2, 7, 7), (64, 2, 7, 8)), ((64, 2, 7, 8), (64, 2, 8, 7)), ((1, 448), (448, 1))]
    for sa, sb in cases:
        a, b = wild(rng, sa), wild(rng, sb)
        assert_same_bits(ops.matmul(a, b), loop_matmul(a, b), f"{sa} @ {sb}")
        a_view = np.ascontiguousarray(a.swapaxes(-1, -2)).swapaxes(-1, -2)  # same values, transposed strides
        assert_same_bits(ops.matmul(a_view, b), loop_matmul(a, b), f"{sa} (strided) @ {sb}")
    for shape in [(16, 448), (448,), (64, 448), (448, 13), (64, 7, 16), (64, 2, 7, 7)]:
        x = wild(rng, shape[::-1]).T  # non-contiguous, as dout.T in linear_backward
        assert_same_bits(ops.sum_last(x), loop_sum_last(x), f"sum_last {x.shape} (transposed view)")


def _random_products_and_sums(rng, rounds, label):
    """matmul and sum_last against the plain loops on `rounds` random shapes: the same bits."""
    for _ in range(rounds):
        a, b = random_case(rng)
        assert_same_bits(ops.matmul(a, b), loop_matmul(a, b), f"{label}: {a.shape} @ {b.shape}")
        x = wild(rng, a.shape)
        assert_same_bits(ops.sum_last(x), loop_sum_last(x), f"{label}: sum_last {x.shape}")


@pytest.mark.parametrize("block", [1, 2, 3, 5, 64, 1000])
def test_blocks_carry_the_running_sum(monkeypatch, block):
    """Cut K into blocks of any size (down to one term per block): the same bits."""
    monkeypatch.setattr(ops, "_BLOCK", block)
    _random_products_and_sums(np.random.default_rng(block), 60, f"block {block}")


@pytest.mark.parametrize("ratio", [1, 10**9])
def test_both_paths(monkeypatch, ratio):
    """_LOOP_RATIO 1 sends (almost) everything to the plain loop, 1e9 everything to the reduction."""
    monkeypatch.setattr(ops, "_LOOP_RATIO", ratio)
    _random_products_and_sums(np.random.default_rng(ratio % 1000), 150, f"ratio {ratio}")


@pytest.mark.parametrize("small", [0, 10**12])
def test_small_blocks_and_the_scratch_path(monkeypatch, small):
    """_SMALL 0 sends every product and sum_last through the scratch array's blocks, 1e12 every
    one with two outputs or more through one fresh block from the operands as they are (strided,
    broadcast): the same bits either way, on the random shapes and the model's."""
    monkeypatch.setattr(ops, "_SMALL", small)
    rng = np.random.default_rng(small % 997)
    for _ in range(150):
        a, b = random_case(rng)
        assert_same_bits(ops.matmul(a, b), loop_matmul(a, b), f"small {small}: {a.shape} @ {b.shape}")
        bt = np.ascontiguousarray(np.swapaxes(b, -1, -2))
        assert_same_bits(ops.matmul_nt(a, bt), loop_matmul(a, b), f"small {small}: nt {a.shape} {bt.shape}")
        x = wild(rng, a.shape)
        assert_same_bits(ops.sum_last(x), loop_sum_last(x), f"small {small}: sum_last {x.shape}")
    for sa, sb in [((64, 2, 7, 8), (64, 2, 8, 7)), ((448, 16), (16, 13)), ((2, 7, 8), (8, 8))]:
        a, b = wild(rng, sa), wild(rng, sb)
        a_view = np.ascontiguousarray(a.swapaxes(-1, -2)).swapaxes(-1, -2)
        assert_same_bits(ops.matmul(a_view, b), loop_matmul(a, b), f"small {small}: {sa} (strided) @ {sb}")


def test_negative_zeros_sum_to_positive_zero():
    """The loop starts from +0.0: a sum of -0.0 terms is +0.0 (a reduction that began with the
    first term would give -0.0)."""
    for K in (1, 2, 9, 300):
        a = np.full((3, 4, K), -0.0)
        b = np.ones((K, 5))
        for got in (ops.matmul(a, b), ops.matmul_nt(a, np.ones((5, K))), ops.sum_last(a)):
            assert not np.signbit(got).any(), f"K = {K}: -0.0 in a sum of -0.0 terms"
        assert_same_bits(ops.matmul(a, b), loop_matmul(a, b))
    y = ops.matmul(np.array([[-0.0, 3.0, -3.0]]), np.array([[1.0], [1.0], [1.0]]))
    assert bits(y) == bits(np.array([[0.0]]))


def test_empty_and_degenerate_shapes():
    assert ops.matmul(np.ones((2, 0)), np.ones((0, 3))).tolist() == [[0.0] * 3] * 2
    assert ops.matmul(np.ones((0, 4)), np.ones((4, 3))).shape == (0, 3)
    assert ops.matmul(np.ones((5, 0, 2, 4)), np.ones((4, 3))).shape == (5, 0, 2, 3)
    assert ops.sum_last(np.ones((3, 0))).tolist() == [0.0, 0.0, 0.0]
    assert ops.sum_last(np.ones((0, 5))).shape == (0,)
    assert float(ops.sum_last(np.arange(5.0))) == 10.0 and ops.sum_last(np.arange(5.0)).shape == ()
    assert ops.matmul([[1, 2]], [[3], [4]]).tolist() == [[11.0]]  # lists and ints are float64
    assert ops.matmul(np.ones((2, 3), dtype=np.float32), np.ones((3, 2))).dtype == np.float64
    with pytest.raises(ValueError, match="inner sizes"):
        ops.matmul(np.ones((2, 3)), np.ones((4, 2)))


def test_infinities_and_nan_as_the_loop():
    a = np.array([[1e308, 1e308, -np.inf, 1.0], [np.inf, -np.inf, 1.0, 2.0], [np.nan, 1.0, 2.0, 3.0]])
    b = np.array([[10.0, 1.0], [10.0, -1.0], [0.0, 1.0], [1.0, 1.0]])
    with np.errstate(invalid="ignore", over="ignore"):
        got, want = ops.matmul(a, b), loop_matmul(a, b)
    assert np.array_equal(got, want, equal_nan=True)
    assert np.array_equal(np.isnan(got), np.isnan(want))


# ---- the tests can fail: NumPy's own orders give other bits on the same data ----

def test_numpy_orders_differ_on_this_data():
    rng = np.random.default_rng(0)
    x = wild(rng, (64, 448))
    pairwise = np.sum(x, axis=-1)  # along the contiguous last axis: pairwise blocks of 8 lanes
    assert (bits(pairwise) != bits(loop_sum_last(x))).any(), "np.sum should differ from the in-order loop here"
    assert_same_bits(ops.sum_last(x), loop_sum_last(x))
    a, b = wild(rng, (16, 448)), wild(rng, (448, 16))
    assert (bits(a @ b) != bits(loop_matmul(a, b))).any(), "BLAS @ should differ from the in-order loop here"
    assert_same_bits(ops.matmul(a, b), loop_matmul(a, b))


def test_one_column_would_be_summed_pairwise():
    """Why a single column is padded to two: reducing a (K, 1) block along axis 0 makes the summed
    axis the inner loop, which NumPy sums pairwise; the padded (K, 2) block is summed row by row."""
    rng = np.random.default_rng(1)
    differs = 0
    for _ in range(20):
        col = wild(rng, (449, 1))
        col[0] = 0.0
        in_order = loop_sum_last(col[1:, 0][None, :])[0]
        differs += bits(np.add.reduce(col, axis=0)[0]) != bits(in_order)
        padded = np.concatenate([col, np.zeros_like(col)], axis=1)
        assert bits(np.add.reduce(padded, axis=0)[0]) == bits(in_order)
    assert differs, "one column should have been summed in another order at least once"


def test_products_are_the_products_and_einsum_is_never_asked_to_sum():
    """ops._products (np.einsum, no summed index), with the subscripts and operand order matmul
    uses, writes each term as the one rounded product (a zero product as a zero of either sign:
    the same term of a sum from +0.0); np.einsum asked to sum over a contiguous k gives other
    bits than the loop, which is why it never sums."""
    rng = np.random.default_rng(3)
    a, b = wild(rng, (9, 1, 672)), wild(rng, (9, 1, 64))  # (K, L, M), (K, L, N)
    for spec, x, y, want in (("klm,kln->klnm", a, b, a[:, :, None, :] * b[:, :, :, None]),   # fill_t
                             ("kln,klm->klmn", b, a, a[:, :, :, None] * b[:, :, None, :])):  # fill
        got = np.full(want.shape, np.nan)
        ops._products(spec, x, y, got)
        zero = want == 0.0
        assert zero.any() and np.signbit(want[zero]).any(), "the data should hold products of -0.0"
        assert (got[zero] == 0.0).all(), f"{spec}: a zero product written as non-zero"
        assert_same_bits(np.where(zero, 0.0, got), np.where(zero, 0.0, want), spec)
    x, y = wild(rng, (16, 448)), wild(rng, (448, 16))
    summed = np.einsum("mk,nk->mn", x, np.ascontiguousarray(y.T), optimize=False)  # k innermost: in lanes
    assert (bits(summed) != bits(loop_matmul(x, y))).any(), "np.einsum's sum should differ from the loop here"
    assert_same_bits(ops.matmul(x, y), loop_matmul(x, y))
