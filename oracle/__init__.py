"""A third engine, PyTorch float64, that arbitrates a failing case between the reference and the
port (docs/runner.md, "The arbiter"): `python -m oracle run` speaks docs/protocol.md for the forward
cases whose inputs the runner hands it, computing each op's outputs with PyTorch (oracle/ops.py).
Installed with `pip install -e '.[oracle]'`; `verify attention` starts it only for failing cases."""
