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

__version__ = "0.1.0"

from .errors import InputError, ModelDirError, QuantformerError  # noqa: E402
from .frames import read_frame, write_frame  # noqa: E402

# name -> "module:attribute", resolved on first use (PEP 562)
_LAZY = {
    "tokenize": "quantformer.tokenization:token_stats",
    "encode": "quantformer.tokenization:encode",
    "sotu": "quantformer.datasets:sotu",
    "datasets": "quantformer.datasets",
    "finetune": "quantformer.finetune",
    "predict": "quantformer.predict",
    "evaluate": "quantformer.evaluate",
    "load": "quantformer.predict:load",
    "estimate": "quantformer.estimate",
    "regress": "quantformer.regress",
    "calibrate": "quantformer.calibration:calibrate",
    "Classifier": "quantformer.predict:Classifier",
    "zeroshot": "quantformer.zeroshot:zeroshot",
    "embed": "quantformer.embed:embed",
    "tune": "quantformer.tune",
    "compare": "quantformer.compare",
    "baselines": "quantformer.baselines",
    "predict_partitions": "quantformer.distributed:predict_partitions",
    "zeroshot_partitions": "quantformer.distributed:zeroshot_partitions",
    "embed_partitions": "quantformer.distributed:embed_partitions",
    "suggest": "quantformer.suggest",
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


__all__ = ["InputError", "ModelDirError", "QuantformerError", "read_frame", "write_frame",
           *_LAZY]
