"""Layer 4: models that answer: the fine-tuned classifier (standard, NLI, SetFit), embeddings,
zero-shot classification, and the one loader with its bounded cache
(:mod:`quantformer.infer.load`)."""
