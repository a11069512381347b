"""Training and its data: the optimiser, the loop, the schedule, the data sets, decoding, the three
baked runs and the gradient check (docs/engines.md)."""
