"""SHA-256 digests (twin: port_ts/src/core/digest.ts): equal digests prove that both engines hold
the same bits.

    sha256_hex(data)         SHA-256 (hex) of a byte string; hashlib here, written out in the port
                             (FIPS 180-4), whose core needs neither node:crypto nor WebCrypto
    float64_digest(arrays)   SHA-256 of each array's little-endian float64 bytes, one array after
                             the other (integers are exact as float64): the digest of a training
                             state (runs/train.py) and of a data set (runs/digits.py, runs/garments.py)
"""

import hashlib

import numpy as np


def sha256_hex(data):
    """SHA-256 (hex) of a byte string."""
    return hashlib.sha256(data).hexdigest()


def float64_digest(arrays):
    """SHA-256 (hex) of the arrays' little-endian float64 bytes, in order."""
    return sha256_hex(b"".join(np.ascontiguousarray(a, dtype="<f8").tobytes() for a in arrays))
