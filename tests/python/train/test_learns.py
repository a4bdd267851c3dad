"""Fine-tuning learns, and prediction is the model's softmax (issue 27, point 13).

The pinned values of test_train_pinned.py sit near chance; here a tiny BERT is fine-tuned on a
toy set whose two classes share no word, so a working training loop must separate it; the
predicted probabilities are compared with a plain Hugging Face forward pass (the model's own
``id2label``), so a wrong logit-to-class mapping fails; and ``tune`` is shown picking the
learning rate that learns over one that cannot (a rate of 1e-9 leaves the random head as it is).
"""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from sklearn.metrics import f1_score

import quantformer
from quantformer.select.tune import tune
from quantformer.train.finetune import finetune

ECON = ["tax", "deficit", "jobs", "spending", "trade", "economy"]
OTHER = ["abortion", "unborn", "climate", "immigration", "border", "life"]
# learns the toy set in about 0.5 s on one CPU core (tiny BERT, 32 documents, 10 epochs)
FIT = dict(lr=5e-3, epochs=10, batch_size=8, max_length=32, truncation="head",
           device="cpu", quiet=True)


def separable(n: int = 32) -> pd.DataFrame:
    """``n`` documents of four words each; ``econ`` documents use only :data:`ECON`, ``other``
    documents only :data:`OTHER` (alternating, so every fold of a stratified split has both)."""
    rows = []
    for i in range(n):
        words = ECON if i % 2 == 0 else OTHER
        text = " ".join(words[(i // 2 + k) % len(words)] for k in range(4))
        rows.append((f"d{i:02d}", text, "econ" if i % 2 == 0 else "other"))
    return pd.DataFrame(rows, columns=["doc_id", "text", "label"])


@pytest.fixture(scope="module")
def learned_dir(tiny_bert_dir, tmp_path_factory):
    """The tiny BERT fine-tuned on :func:`separable`, saved as a model folder."""
    clf = finetune(separable(), model=str(tiny_bert_dir), seed=1, valid_fraction=0.0, **FIT)
    return clf.save(tmp_path_factory.mktemp("learned") / "model")


def test_finetuning_separates_a_separable_toy_set(learned_dir):
    frame = separable()
    clf = quantformer.load(learned_dir)
    pred = clf.predict(frame)
    assert f1_score(frame["label"], pred["predicted"], average="macro") >= 0.9
    losses = clf.record["train_loss_per_epoch"]
    assert len(losses) == 10 and losses[-1] < 0.75 * losses[0]


def test_predict_equals_a_plain_hugging_face_forward_pass(learned_dir, fp32_auto):
    import torch
    from transformers import AutoModelForSequenceClassification, AutoTokenizer

    frame = separable(8)
    # one document longer than max_length (32): both sides keep its first 32 tokens ("head")
    frame.loc[3, "text"] = " ".join(OTHER * 12)
    pred = quantformer.load(learned_dir, precision="fp32").predict(frame, warn=False)

    tok = AutoTokenizer.from_pretrained(str(learned_dir))
    model = AutoModelForSequenceClassification.from_pretrained(str(learned_dir)).eval()
    enc = tok(frame["text"].tolist(), truncation=True, max_length=32, padding=True,
              return_tensors="pt")
    assert int(enc["attention_mask"][3].sum()) == 32  # the long document was cut
    with torch.no_grad():
        ref = torch.softmax(model(**enc).logits, dim=-1).numpy()
    id2label = model.config.id2label
    assert sorted(id2label.values()) == ["econ", "other"]
    for j, label in id2label.items():
        np.testing.assert_allclose(pred[f"prob_{label}"], ref[:, int(j)], atol=1e-5)
    assert pred["predicted"].tolist() == [id2label[int(j)] for j in ref.argmax(axis=1)]
    assert pred["predicted"].tolist() == frame["label"].tolist()


def test_tune_picks_the_learning_rate_that_learns(tiny_bert_dir):
    frame = separable()  # folds of 16 training documents: batches of 4 keep 40 steps
    res = tune(frame, model=str(tiny_bert_dir), lrs=[1e-9, FIT["lr"]], epochs_grid=[10],
               folds=2, seed=1, batch_size=4, max_length=32, truncation="head", device="cpu",
               quiet=True, refit=False, estimate=False)
    cv = res.cv_results
    means = cv.groupby("lr")["macro_f1"].mean()
    assert means[FIT["lr"]] >= 0.9 and means[1e-9] < 0.75
    assert res.best["lr"] == FIT["lr"]
    assert res.cv_summary["lr"].tolist() == [FIT["lr"], 1e-9]
