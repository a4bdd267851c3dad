"""Layer 6: the same per-document verbs over partitioned corpora with Dask (a LocalCluster or a
running scheduler), with a manifest and resume."""
