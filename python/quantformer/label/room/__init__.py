"""Deprecated: the modules of ``quantformer.label.room`` are now ``quantformer.room``'s (the
codebook ``quantformer.io.codebook``); each old module path (as in ``from
quantformer.label.room.loop import Room``) works for one release, with a DeprecationWarning."""
