"""The further-pretraining objective ``tsdae``: the transformer-based denoising auto-encoder, with
sentence-transformers' own ``DenoisingAutoEncoderLoss``.

The method is Wang et al.'s (2021): the pooled sentence vector of a text with 60 % of its words deleted must let a tied decoder
rebuild the text. Words are split at white space (the library's default noise needs NLTK
data). The encoder keeps its base's ``max_seq_length`` (the window of embed, zeroshot and
SetFit), whatever ``max_length`` it was trained at.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from ..models.hub import load_sentence_transformer, resolve_model
from .pretrain_run import Objective, Run

DELETE_RATIO = 0.6


def delete_words(text: str, rng: np.random.Generator, ratio: float = DELETE_RATIO) -> str:
    """TSDAE's noise (Wang et al. 2021): delete each white-space word with probability
    ``ratio``, keeping one word at least."""
    words = text.split()
    if not words:
        return text
    keep = rng.random(len(words)) >= ratio
    if not keep.any():
        keep[rng.integers(len(words))] = True
    return " ".join(w for w, k in zip(words, keep) if k)


def tsdae_parts(run: Run) -> dict:
    """The sentence transformer and its denoising auto-encoder loss (decoder tied)."""
    try:
        from sentence_transformers.sentence_transformer.losses import DenoisingAutoEncoderLoss
    except ImportError:  # pragma: no cover - sentence-transformers < 6
        from sentence_transformers.losses import DenoisingAutoEncoderLoss

    path = resolve_model(run.settings["model"])
    st = load_sentence_transformer(path, device=run.device)
    window = st.max_seq_length  # the base's own, written back with the encoder (tsdae_save)
    st.max_seq_length = run.settings["max_length"]
    # tied: the decoder is the encoder's own checkpoint (naming it again only logs a warning)
    loss = DenoisingAutoEncoderLoss(st, tie_encoder_decoder=True).to(run.device)
    # the loss never reads the encoder's pooler: unused parameters under several processes
    return {"model": loss, "net": loss, "st": st, "new_head": False, "unused": True,
            "window": window}


def _tsdae_loss(run: Run, net, clean: list[str], noisy: list[str]):
    st = run.parts["st"]
    encode = getattr(st, "preprocess", None) or st.tokenize
    feats = [{k: v.to(run.device) for k, v in encode(x).items() if hasattr(v, "to")}
             for x in (noisy, clean)]
    return net(feats, None)


def tsdae_step(run: Run, net, texts: list[str], step_seed: int):
    """This process's loss on its rows of one global batch (the words deleted over the whole
    batch alike in every process)."""
    import torch

    torch.manual_seed(step_seed)
    rng = np.random.default_rng(step_seed)
    noisy = [delete_words(t, rng) for t in texts]
    rows, weight = run.world.share(len(texts))
    return _tsdae_loss(run, net, texts[rows], noisy[rows]) * weight


def tsdae_evaluate(run: Run) -> dict:
    """Held-out denoising loss (mean over batches; the same deletions every time)."""
    import torch

    model, losses, sizes = run.parts["model"], [], []
    model.eval()
    rng = np.random.default_rng(run.settings["seed"] + 7919)
    with torch.inference_mode():
        for texts in run.corpus.held_out(run.settings["batch_size"]):
            noisy = [delete_words(t, rng) for t in texts]
            losses.append(float(_tsdae_loss(run, model, texts, noisy)))
            sizes.append(len(texts))
    model.train()
    return {"loss": round(float(np.average(losses, weights=sizes)), 5)}


def tsdae_save(run: Run):
    """The function that writes the trained sentence transformer into a folder."""
    parts = run.parts

    def save_st(tmp: Path) -> None:
        # the training length is a setting of the run, not the encoder's window: embed,
        # zeroshot and SetFit read the base's max_seq_length (256 for the default model)
        parts["st"].max_seq_length = parts["window"]
        parts["st"].save(str(tmp))
    return save_st


# the learning rate of Wang et al. (2021)
TSDAE = Objective(name="tsdae", parts=tsdae_parts, step=tsdae_step, evaluate=tsdae_evaluate,
                  save=tsdae_save, lr=3e-5)
