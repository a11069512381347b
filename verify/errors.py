"""The one exception type the runner turns into a one-line message and exit code 2."""


class InputError(Exception):
    """A usage or input error: bad arguments, a malformed catalogue or golden, an engine that
    cannot be started, crashes or hangs. The message is one line: what was expected, what was
    found, and what to do."""


EXIT_PASS = 0
EXIT_MISMATCH = 1
EXIT_INPUT = 2
