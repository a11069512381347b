"""The case builders the command line calls, one module per family of the catalogue (docs/engines.md)."""
