"""Layer 0: what every layer uses and nothing else: errors, the version, the atomic writer,
printing tables. Imports no other quantformer layer."""
