"""The models: the encoder-decoder Transformer, the ViT, BERT and the alignment scorer (docs/engines.md)."""
