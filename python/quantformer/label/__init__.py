"""Layer 7: helping people code: which documents to code next (active learning: the ``suggest``
verb and its query strategies)."""
