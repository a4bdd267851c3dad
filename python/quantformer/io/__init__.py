"""Layer 1: reading and writing corpora, model directories, gold codes and results.
Imports only :mod:`quantformer._core`."""
