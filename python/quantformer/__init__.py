"""quantformer: measure concepts in text with Transformer transfer learning.

Fine-tune a pretrained encoder on a few hundred hand-coded documents, classify with no training
at all (zero-shot NLI or embeddings), and compare against SVM/XGBoost baselines, following
Wankmüller (2022), "Introduction to Neural Transfer Learning with Transformers for Social
Science Text Analysis", sections 6.1-6.5 and Appendix J.

The public API is importable from the package; heavy dependencies (torch, transformers) load
only when a function that needs them is called, so ``import quantformer`` is fast and works
under reticulate.
"""

from __future__ import annotations

from ._core.errors import InputError, ModelDirError, QuantformerError
from ._core.version import __version__
from .io.frames import read_frame
from .io.writing import write_frame

# name -> "module:attribute", resolved on first use (PEP 562)
_LAZY = {
    "tokenize": "quantformer.models.tokenize:token_stats",
    "encode": "quantformer.models.tokenize:encode",
    "sotu": "quantformer.io.datasets:sotu",
    "datasets": "quantformer.io.datasets",
    "split_by_group": "quantformer.io.datasets:split_by_group",
    "finetune": "quantformer.train.finetune:finetune",
    "predict": "quantformer.infer.predict:predict",
    "evaluate": "quantformer.score.evaluate:evaluate",
    "load": "quantformer.infer.load:load_model",
    "estimate": "quantformer.measure.prevalence:estimate",
    "regress": "quantformer.measure.regress:regress",
    "calibrate": "quantformer.score.calibration:calibrate",
    "reliability": "quantformer.score.reliability:coder_agreement",
    "Classifier": "quantformer.infer.classifier:Classifier",
    "zeroshot": "quantformer.infer.zeroshot:zeroshot",
    "embed": "quantformer.infer.embed:embed",
    "pretrain": "quantformer.train.pretrain:pretrain",
    "tune": "quantformer.select.tune:tune",
    "compare": "quantformer.select.compare:compare",
    "baselines": "quantformer.train.baselines",
    "predict_partitions": "quantformer.scale.dask:predict_partitions",
    "zeroshot_partitions": "quantformer.scale.dask:zeroshot_partitions",
    "embed_partitions": "quantformer.scale.dask:embed_partitions",
    "explain_partitions": "quantformer.scale.explain:explain_partitions",
    "read_explanation": "quantformer.scale.explain:read_explanation",
    "suggest": "quantformer.label.suggest:suggest",
}


def __getattr__(name: str):
    target = _LAZY.get(name)
    if target is None:
        raise AttributeError(f"module 'quantformer' has no attribute '{name}'")
    import importlib

    mod_name, _, attr = target.partition(":")
    mod = importlib.import_module(mod_name)
    value = getattr(mod, attr) if attr else mod
    globals()[name] = value
    return value


__all__ = ["__version__", "InputError", "ModelDirError", "QuantformerError", "read_frame", "write_frame",
           *_LAZY]
