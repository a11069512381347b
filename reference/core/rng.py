"""The shared generator: Threefry-2x32-20 on a counter, Marsaglia's polar normals.

Specified bit for bit in docs/generator.md; port_ts/src/core/rng.ts is its twin. Every operation on
floats below is exactly rounded (+, -, *, /, sqrt, scaling by powers of two; ln is mathlib's
spec_log, built from those), so both engines draw the same bits. Draws are vectorised over counters, which is what makes NumPy fast here:
draw i depends only on (seed, i).
"""

import numpy as np

from .mathlib import spec_log

GENERATOR = "threefry2x32-20/polar-v1"

_ROT = (13, 15, 26, 6, 17, 29, 16, 24)
_SHIFTS = tuple((np.uint32(r), np.uint32(32 - r)) for r in _ROT)  # a rotation's left and right shifts
_PARITY = np.uint32(0x1BD11BDA)
_M32 = 0xFFFFFFFF
_TWO_M53 = 2.0 ** -53
_AHEAD = 512  # doubles computed at once for a smaller draw (a draw costs about the same up to here)


def threefry2x32(key0, key1, c0, c1):
    """Threefry-2x32 with 20 rounds on uint32 arrays c0, c1; returns (x0, x1) as uint32 arrays.
    Each step is written into x0, x1 in place (integer arithmetic: the bits do not depend on it,
    and a draw of a million counters costs a fifth of what fresh arrays per step cost)."""
    k0, k1 = np.uint32(key0), np.uint32(key1)
    ks = (k0, k1, _PARITY ^ k0 ^ k1)
    x0 = np.asarray(c0, dtype=np.uint32) + ks[0]
    x1 = np.asarray(c1, dtype=np.uint32) + ks[1]
    spill = np.empty_like(x1)  # the bits x1's rotation carries round
    for r in range(20):
        np.add(x0, x1, out=x0)
        left, right = _SHIFTS[r % 8]
        np.right_shift(x1, right, out=spill)
        np.left_shift(x1, left, out=x1)
        np.bitwise_or(x1, spill, out=x1)  # x1 rotated left by _ROT[r % 8]
        np.bitwise_xor(x1, x0, out=x1)
        if r % 4 == 3:  # key injection i
            i = (r + 1) // 4
            np.add(x0, ks[i % 3], out=x0)
            np.add(x1, ks[(i + 1) % 3], out=x1)
            np.add(x1, np.uint32(i), out=x1)
    return x0, x1


class Generator:
    """A stream of draws from seed (0 <= seed < 2**53). State: the next counter."""

    def __init__(self, seed):
        if isinstance(seed, bool) or not isinstance(seed, (int, np.integer)) or not 0 <= seed < 2**53:
            raise ValueError(f"seed must be an integer in [0, 2**53), got {seed!r}")
        seed = int(seed)
        self.seed = seed
        self.key0 = seed & _M32
        self.key1 = seed >> 32
        self.counter = 0
        self._ahead = (0, np.empty(0))  # (first counter, the doubles of the counters drawn ahead)

    def _doubles(self, n):
        """n doubles in [0, 1), one counter each: ((x0 >> 5) * 2**26 + (x1 >> 6)) * 2**-53.
        A draw of fewer than _AHEAD doubles computes _AHEAD counters at once and keeps the rest:
        draw i depends on (seed, i) alone, so the next small draws (dropout's masks, one per layer)
        are served from them, whatever the order or a rewind of the counter."""
        start = self.counter
        self.counter += n
        lo, ahead = self._ahead
        if lo <= start and start + n <= lo + ahead.size:
            return ahead[start - lo:start - lo + n].copy()
        u = self._compute(start, max(n, _AHEAD))
        if u.size == n:
            return u
        self._ahead = (start, u)
        return u[:n].copy()  # the kept doubles are never handed out to be written

    def _compute(self, start, n):
        """The doubles of counters start .. start + n - 1."""
        i = np.arange(start, start + n, dtype=np.uint64)
        c0 = (i & np.uint64(_M32)).astype(np.uint32)
        c1 = (i >> np.uint64(32)).astype(np.uint32)
        x0, x1 = threefry2x32(self.key0, self.key1, c0, c1)
        hi = (x0 >> np.uint32(5)).astype(np.float64)
        lo = (x1 >> np.uint32(6)).astype(np.float64)
        return (hi * 67108864.0 + lo) * _TWO_M53

    def uniform(self, shape, low=0.0, high=1.0):
        """U[low, high): low + (high - low) * u, drawn in row-major order of shape."""
        shape = _shape(shape)
        u = self._doubles(_size(shape))
        return (low + (high - low) * u).reshape(shape)

    def normal(self, shape, mean=0.0, std=1.0):
        """N(mean, std**2): mean + std * z, z from Marsaglia's polar method on consecutive pairs
        of doubles (a, b) = (2u - 1, 2v - 1), accepted when 0 < s = a*a + b*b < 1; each accepted
        pair gives a*f then b*f with f = sqrt(-2 ln(s) / s). An odd count drops the last one."""
        shape = _shape(shape)
        n = _size(shape)
        pairs_needed = (n + 1) // 2
        out = np.empty(2 * pairs_needed)
        got = 0
        while got < pairs_needed:
            want = pairs_needed - got
            batch = int(want / 0.78) + 8
            start = self.counter
            u = self._doubles(2 * batch)
            a = 2.0 * u[0::2] - 1.0
            b = 2.0 * u[1::2] - 1.0
            s = a * a + b * b
            ok = np.flatnonzero((s > 0.0) & (s < 1.0))
            take = ok[:want]
            if len(take) == want:  # rewind to just past the last pair used
                self.counter = start + 2 * (int(take[-1]) + 1)
            st = s[take]
            f = np.sqrt(-2.0 * spec_log(st) / st)
            out[2 * got:2 * (got + len(take)):2] = a[take] * f
            out[2 * got + 1:2 * (got + len(take)):2] = b[take] * f
            got += len(take)
        return (mean + std * out[:n]).reshape(shape)

    def integers(self, shape, low, high):
        """Integers in [low, high): low + floor(u * (high - low)), as int64."""
        shape = _shape(shape)
        u = self._doubles(_size(shape))
        return (low + np.floor(u * (high - low))).astype(np.int64).reshape(shape)

    def keep_mask(self, shape, p):
        """Dropout's keep mask: 1.0 where u >= p, else 0.0."""
        shape = _shape(shape)
        u = self._doubles(_size(shape))
        return (u >= p).astype(np.float64).reshape(shape)

    def permutation(self, n):
        """Fisher-Yates: for i = n-1 down to 1, swap i with j = floor(u * (i + 1))."""
        perm = np.arange(n, dtype=np.int64)
        if n < 2:
            return perm
        u = self._doubles(n - 1)
        for idx, i in enumerate(range(n - 1, 0, -1)):
            j = int(np.floor(u[idx] * (i + 1)))
            perm[i], perm[j] = perm[j], perm[i]
        return perm


def _shape(shape):
    return (shape,) if isinstance(shape, (int, np.integer)) else tuple(int(s) for s in shape)


def _size(shape):
    n = 1
    for s in shape:
        n *= s
    return n
