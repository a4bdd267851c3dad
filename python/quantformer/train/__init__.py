"""The fine-tuning loop in parts (issue 15). :func:`quantformer.finetune` reads as a table of
contents over these modules:

``arguments``  the parameter table: defaults by model size, checks shared with tune/compare
``data``       preparing the data: missing labels/texts, validation split, oversampling,
               length-grouped batches, seeding
``tasks``      classification, regression, multilabel: label encoding, the Hugging Face head's
               ``problem_type`` (its loss), output columns, the validation metric
``loop``       the epoch loop: AdamW (fused), linear decay, gradient accumulation, mixed
               precision, early stopping with the best epoch's weights restored
``record``     the training record written as ``quantformer.json``

Nothing here imports :mod:`quantformer.predict`; heavy libraries load inside functions.
"""
