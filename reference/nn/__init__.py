"""The network modules, leaf to root: softmax, attention, positions, norms, FFN, blocks, the lesson's
primitives (docs/engines.md)."""
