"""The side commands, beside the verification core (verify/*.py) and not part of it: `verify show`,
`inspect`, `export`, `diff`, `faults`, `fetch-model` and `cache`. Each module declares its command's
options in parser() and carries it out in run(args, out), using only the core's public names;
verify/cli.py imports it when its command runs (cli.SIDE_COMMANDS), so `verify attention` imports
nothing of this package."""
