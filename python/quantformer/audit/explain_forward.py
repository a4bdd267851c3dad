"""The differentiable score that :mod:`quantformer.audit.explain` attributes, one per kind of
model that ``predict`` serves.

Each forward maps a padded batch ``(input_ids, attention_mask, token_type_ids)`` to a float
tensor ``(batch, n_outputs)``; Captum's ``LayerIntegratedGradients`` replaces the output of
:meth:`embeddings` (the input word embeddings) along the path from baseline to input.

* **Standard** (:class:`ClassifierForward`): the sequence classifier's logits.
* **NLI** (:class:`NLIForward`; Laurer et al. 2023): the NLI head's logits of one
  (premise, hypothesis) pair; the explained output is the entailment logit of the target
  class's hypothesis, and only the premise (the document) is attributed.
* **SetFit** (:class:`SetFitForward`; Tunstall et al. 2022): body -> mean pooling ->
  [unit length] -> the logistic-regression head's decision function: for three or more
  classes the class scores ``x W' + b`` (the softmax's logits); for two classes the log-odds
  ``z`` of the second class (scikit-learn's ``decision_function``; a head stored with two rows
  gives the difference of their scores) written as the pair ``(-z, z)``, so each class's own
  score is its log-odds.

**Positions.** RoBERTa-type models (RoBERTa, XLM-RoBERTa, CamemBERT, Longformer, ...) derive
position ids from ``input_ids != pad``; a baseline whose words are pad tokens would then get
other positions than the input. For these models the forward passes explicit position ids
computed from the attention mask (``padding_idx + cumsum(mask)`` on real tokens, as
``create_position_ids_from_input_ids`` does for an unpadded input), so input, baseline and
every interpolation step share the input's positions.
"""

from __future__ import annotations

import numpy as np

from .._core.errors import InputError
from ..infer.classifier import Classifier, global_attention_hook
from ..infer.nli import NLIClassifier
from ..infer.setfit import SetFitClassifier
from ..infer.zeroshot_nli import nli_probabilities
from ..models.batching import mean_pool

#: model types whose position ids come from ``input_ids != pad`` (given explicitly instead)
PADDING_POSITION_TYPES = ("roberta", "xlm-roberta", "xlm-roberta-xl", "camembert",
                          "longformer", "data2vec-text", "mpnet", "ernie_m")


def needs_position_ids(config) -> bool:
    """Whether the model type derives positions from the pad token (see the module docstring)."""
    return getattr(config, "model_type", "") in PADDING_POSITION_TYPES


def position_ids(attention_mask, padding_idx: int):
    """RoBERTa position ids from the attention mask: ``padding_idx + 1, + 2, ...`` on real
    tokens, ``padding_idx`` on padding (equal to ``create_position_ids_from_input_ids`` for an
    input whose pad tokens are exactly its padding)."""
    mask = attention_mask.long()
    return (mask.cumsum(dim=1) * mask + padding_idx).long()


def check_architecture(config, path=None) -> None:
    """Refuse encoder-decoder models (BART, T5 classification heads): their classification
    head reads the decoder, whose input is the document again, so an attribution over one
    embedding table mixes two passes.

    Raises:
        InputError: an encoder-decoder model.
    """
    if getattr(config, "is_encoder_decoder", False):
        where = f"'{path}' is" if path is not None else "the model is"
        raise InputError(f"explain supports encoder models (BERT, RoBERTa, DeBERTa, ...); "
                         f"{where} an encoder-decoder model ({config.model_type}), whose "
                         "classification head reads the decoder: fine-tune an encoder model to "
                         "explain its predictions")


class ClassifierForward:
    """A sequence classifier's logits (models fine-tuned the standard way)."""

    kind = "standard"

    def __init__(self, model):
        self.model = model
        self.config = model.config
        self.hook = global_attention_hook(self.config)
        self.padding_idx = (getattr(self.config, "pad_token_id", None) or 0
                            if needs_position_ids(self.config) else None)
        self.n_outputs = int(self.config.num_labels)

    def embeddings(self):
        """The module whose output Integrated Gradients interpolates (word embeddings)."""
        return self.model.get_input_embeddings()

    def batch(self, input_ids, attention_mask, token_type_ids=None) -> dict:
        """The keyword arguments of the model (explicit positions where needed)."""
        batch = {"input_ids": input_ids, "attention_mask": attention_mask}
        if token_type_ids is not None:
            batch["token_type_ids"] = token_type_ids
        if self.padding_idx is not None:
            batch["position_ids"] = position_ids(attention_mask, self.padding_idx)
        if self.hook is not None:
            batch = self.hook(batch)
        return batch

    def __call__(self, input_ids, attention_mask, token_type_ids=None):
        return self.model(**self.batch(input_ids, attention_mask, token_type_ids)).logits.float()


class NLIForward(ClassifierForward):
    """The NLI head's logits of (premise, hypothesis) pairs; the explained output of every pair
    is :attr:`entailment_id`."""

    kind = "nli"

    def __init__(self, clf: NLIClassifier):
        super().__init__(clf.model)
        self.entailment_id = clf.entailment_id
        self.contradiction_id = clf.contradiction_id


class SetFitForward(ClassifierForward):
    """A SetFit model's head scores from its body (see the module docstring)."""

    kind = "setfit"

    def __init__(self, clf: SetFitClassifier):
        import torch

        super().__init__(clf.model)
        self.hook = None
        self.normalize = clf.normalize
        dev = clf.device
        self.coef = torch.as_tensor(clf.coef, dtype=torch.float64, device=dev)
        self.intercept = torch.as_tensor(clf.intercept, dtype=torch.float64, device=dev)
        self.binary = len(clf.labels) == 2
        self.n_outputs = len(clf.labels)

    def __call__(self, input_ids, attention_mask, token_type_ids=None):
        import torch

        hidden = self.model(**self.batch(input_ids, attention_mask,
                                         token_type_ids)).last_hidden_state
        vec = mean_pool(hidden, attention_mask).double()
        if self.normalize:
            vec = vec / vec.norm(dim=1, keepdim=True).clamp(min=1e-12)
        z = vec @ self.coef.T + self.intercept
        if self.binary:  # the log-odds of the second class: one row, or the difference of two
            odds = z[:, -1:] - z[:, :1] if z.shape[1] == 2 else z
            z = torch.cat([-odds, odds], dim=1)
        return z.float()


def forward_for(clf: Classifier) -> ClassifierForward:
    """The forward of a loaded model's kind (standard, NLI or SetFit).

    Raises:
        InputError: a model on the ONNX backend (no gradients), or an encoder-decoder model.
    """
    if getattr(clf.model, "backend", "torch") != "torch":
        raise InputError("explain needs gradients and runs on torch only; load the model with "
                         "{backend} torch", params=["backend"])
    check_architecture(clf.model.config)
    if isinstance(clf, NLIClassifier):
        return NLIForward(clf)
    if isinstance(clf, SetFitClassifier):
        return SetFitForward(clf)
    return ClassifierForward(clf.model)


def class_probabilities(fwd: ClassifierForward, clf: Classifier, scores: np.ndarray):
    """Class probabilities from the class scores the forward explains (rows of NaN stay NaN):
    the task's activation (standard), the softmax of the entailment logits across the classes'
    hypotheses (NLI), the logistic head's ``predict_proba`` (SetFit)."""
    import torch

    if fwd.kind == "nli":
        return nli_probabilities(scores[:, :, None], 0, 0)
    if fwd.kind == "setfit" and fwd.binary:
        p1 = 1.0 / (1.0 + np.exp(-scores[:, 1]))
        return np.column_stack([1.0 - p1, p1])
    probs = clf.task.activation(torch.from_numpy(np.nan_to_num(scores))).numpy()
    return np.where(np.isnan(scores).any(axis=1, keepdims=True), np.nan,
                    probs.astype(np.float64))
