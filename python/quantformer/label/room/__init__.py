"""The coding room: hand-coding in the browser with the model in the loop (``quantformer
code``). :mod:`.store` keeps every code in one SQLite file, :mod:`.codebook` reads the labels,
:mod:`.loop` chooses the next document and retrains the light classifier in the background,
:mod:`.server` serves the page in ``static/``, :mod:`.finetune_now` runs "fine-tune now" as
a background ``quantformer finetune`` child process."""
