"""Layer 7: choosing among models: cross-validated grid search (tune), Transformers against
the baselines by training size (compare), and the demo."""
