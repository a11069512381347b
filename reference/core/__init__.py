"""The numeric core: own transcendentals, the shared generator, tensors and in-order sums, digests,
parameter records, golden documents, safetensors and case configs (docs/engines.md)."""
