"""Layer 5: training. :func:`quantformer.train.finetune.finetune` is the method switch (standard,
NLI, SetFit) and reads as a table of contents over these modules:

``arguments``  the parameter table: defaults by model size, checks shared with tune/compare
``data``       preparing the data: missing labels/texts, validation split, oversampling,
               length-grouped batches, seeding
``loop``       the epoch loop: AdamW (fused), linear decay, gradient accumulation, mixed
               precision, early stopping with the best epoch's weights restored
``record``     the training record written as ``quantformer.json``
``nli``        NLI fine-tuning on class hypotheses (Laurer et al. 2023)
``setfit``     SetFit few-shot fine-tuning (Tunstall et al. 2022)
``baselines``  the conventional baselines: SVM and XGBoost on bag of words and word vectors

Task heads (classification, regression, multi-label) live in :mod:`quantformer.models.tasks`.
Heavy libraries load inside functions.
"""
