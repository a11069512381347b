"""The NumPy float64 reference of the attention chapter's maths (see docs/engines.md)."""
