"""The runner: runs the NumPy reference and the TypeScript port on the case catalogue, validates
and compares what they write, checks the committed goldens, and reports (docs/runner.md)."""

__version__ = "0.1.0"


def _numpy_with_one_blas_thread():
    """Import NumPy with OpenBLAS on one thread, unless OPENBLAS_NUM_THREADS says otherwise: the
    runner compares and reports and calls no BLAS, and the pool of one thread per core OpenBLAS
    starts on import cost it 0.07-0.1 s of CPU. The variable is set for the import only: the
    engines the runner starts get the environment as it was (verify/engines.py decides theirs)."""
    import os
    if os.environ.get("OPENBLAS_NUM_THREADS"):
        import numpy  # noqa: F401
        return
    os.environ["OPENBLAS_NUM_THREADS"] = "1"
    try:
        import numpy  # noqa: F401
    finally:
        os.environ.pop("OPENBLAS_NUM_THREADS", None)


_numpy_with_one_blas_thread()
