"""Layer 8: the coding room: hand-coding in the browser with the model in the loop (``quantformer
code``), a web application over the active learning of :mod:`quantformer.label`.
:mod:`.store` keeps every code in one SQLite file, :mod:`.loop` chooses the next document and
retrains the light classifier in the background (:mod:`.progress`: its learning curve, its
stability, the coders' agreement), :mod:`.server` serves the page in ``static/``,
:mod:`.export` writes the codes out, :mod:`.finetune_now` runs "fine-tune now" as a
background ``quantformer finetune`` child process, :mod:`.machine` imports a language model's codes as one coder. The
codebook (the labels, their keys, descriptions and examples) is a file format of its own,
:mod:`quantformer.io.codebook`, which ``annotate`` and ``compare`` read too."""
