"""The side commands, beside the verification core (verify/*.py) and not part of it: `verify
inspect`, `verify export`, `verify diff`, `verify faults`, `verify fetch-model` and `verify cache`. Each uses only
the core's public functions; verify/cli.py imports a command's module inside that command's
handler, so `verify attention` imports nothing of this package."""
