"""The training record (``quantformer.json``): what was trained, on what, how, and how long."""

from __future__ import annotations

from ..io.modeldir import versions
from ..models.reading import CHUNKS
from .arguments import DROPOUT, MAX_GRAD_NORM


def hyperparameters(settings: dict, size: str) -> dict:
    """The hyperparameter table of the record and the model card."""
    return {"epochs": settings["epochs"], "lr": settings["lr"],
            "batch_size": int(settings["batch_size"]), "max_length": int(settings["max_length"]),
            "truncation": settings["truncation"], "oversample": settings["oversample"],
            "seed": int(settings["seed"]), "weight_decay": 0.0, "warmup_steps": 0,
            "schedule": "linear decay to 0", "dropout": DROPOUT,
            "max_grad_norm": MAX_GRAD_NORM, "optimizer": "AdamW",
            "defaults_by_size": size, "grad_accum": int(settings["grad_accum"]),
            "precision": settings["precision"],
            "early_stopping": settings["early_stopping"],
            **({k: settings[k] for k in ("stride", "max_chunks", "aggregate", "chunk_training")}
               if settings["truncation"] == CHUNKS else {})}


def training_record(*, task, settings: dict, size: str, data, counts: dict, n_rows: int,
                    n_oversampled: int, n_truncated: int, source, model: dict, device: str,
                    loop, started: float, created: str) -> dict:
    """The ``quantformer.json`` record of a training run (validation is added after)."""
    import time

    record = {
        **task.record(),
        "n_train": int(len(data)),
        "n_train_oversampled": int(n_oversampled),
        **counts,
        "n_truncated": n_truncated,
        "data_source": source,
        "n_rows_source": int(n_rows),
        **model,
        "hyperparameters": hyperparameters(settings, size),
        "device": device,
        "train_loss_per_epoch": [round(x, 6) for x in loop.losses],
        "train_seconds": round(time.time() - started, 1),
        "train_loop_seconds": round(loop.seconds, 3),
        "train_loop_cpu_seconds": round(loop.cpu_seconds, 3),
        "padding_ratio": round(loop.padded_tokens / max(loop.real_tokens, 1), 4),
        "validation": None,
        "versions": versions(),
        "created": created,
    }
    if loop.curve:
        record["validation_curve"] = {"metric": task.metric,
                                      "per_epoch": [round(x, 6) for x in loop.curve],
                                      "kept_epoch": (loop.best_epoch if settings["early_stopping"]
                                                     else len(loop.losses)),
                                      "epochs_run": len(loop.losses)}
    return record
