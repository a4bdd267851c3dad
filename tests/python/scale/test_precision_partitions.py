"""Precision and partitioning: under ``precision="auto"`` (bf16 where the CPU has it natively)
a document's probabilities depend a little on which documents share its batch, so partitioned
and single-process prediction may differ in the third decimal; the labels may not. Near ties
(bf16 top-two margin under :data:`quantformer.models.precision.BF16_RECHECK_MARGIN`) are
predicted again in fp32 one document at a time, so their probabilities and labels do not depend
on the batch. In fp32 every probability agrees to 1e-6 whatever the partitioning.

The partitioned runs go through a real :class:`distributed.LocalCluster` (2 worker processes)."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest
import torch
from toydata import toy_frame

from quantformer.infer.classifier import Classifier
from quantformer.infer.predict import predict_file
from quantformer.io.columns import BACKEND_COLUMN, ID_COLUMN, LABEL_COLUMN, PREDICTED_COLUMN
from quantformer.models import precision as prec
from quantformer.models.onnx.recheck import near_ties
from quantformer.scale.dask import predict_partitions
from quantformer.train.finetune import finetune

#: a text not in the toy corpus; the model's head is set so that its fp32 top-two logits are
#: 1e-5 apart (a probability margin of about 5e-6, far under bf16's 2^-8 resolution)
TIE_TEXT = "The council argued all night about the harbour budget and the new ferry tax."
#: bf16 probabilities of one document in two batchings differ by at most this much (measured:
#: 2.4e-4 on the tiny model; 1.4e-3 on a MiniLM classifier): the documented "third decimal"
BF16_BATCH_TOLERANCE = 0.01
FP32_TOLERANCE = 1e-6


def _probs(frame: pd.DataFrame) -> np.ndarray:
    return frame.filter(like="prob_").to_numpy()


@pytest.fixture(scope="module")
def tie_model_dir(tiny_bert_dir, tmp_path_factory):
    """A tiny BERT fine-tuned on the toy corpus, its classifier bias moved so that
    :data:`TIE_TEXT` is a near tie in fp32."""
    clf = finetune(toy_frame(48), model=str(tiny_bert_dir), epochs=6, lr=1e-2, quiet=True,
                   device="cpu", max_length=64, seed=3)
    p = clf.predict_proba([TIE_TEXT], batch_size=1)[0]
    top, second = np.argsort(p)[::-1][:2]
    gap = float(np.log(p[top]) - np.log(p[second]))  # the fp32 logit gap
    with torch.no_grad():
        clf.model.classifier.bias[top] -= gap - 1e-5
    return clf.save(tmp_path_factory.mktemp("tie") / "model")


def _tie_rows(n: int) -> list:
    """The rows of :func:`_corpus` that hold :data:`TIE_TEXT`."""
    return [5, n // 2 + 1, n - 2]


def _corpus(n: int = 300) -> pd.DataFrame:
    f = toy_frame(n).drop(columns=LABEL_COLUMN)
    f[ID_COLUMN] = [f"z{(i * 7919) % n:05d}" for i in range(n)]
    f["text"] = [t + " again" * (i % 7) for i, t in enumerate(f["text"])]  # varied lengths
    f.loc[_tie_rows(n), "text"] = TIE_TEXT
    return f


def _write_parts(frame: pd.DataFrame, folder, k: int) -> None:
    folder.mkdir(parents=True)
    for j, rows in enumerate(np.array_split(np.arange(len(frame)), k)):
        frame.iloc[rows].to_parquet(folder / f"part-{j:02d}.parquet", index=False)


def _read_out(out) -> pd.DataFrame:
    files = sorted(p for p in out.iterdir() if p.suffix == ".parquet")
    return pd.concat([pd.read_parquet(p) for p in files], ignore_index=True)


def test_fp32_near_tie_is_built(tie_model_dir):
    """The fixture's near tie: its fp32 margin is under 1e-4, so bf16 (8 bits of mantissa)
    cannot tell its top two labels apart."""
    fp32 = Classifier.from_dir(tie_model_dir, device="cpu", precision="fp32")
    p = fp32.predict_proba([TIE_TEXT], batch_size=1)
    assert near_ties(p, 1e-4).all() and not near_ties(p, 1e-7).any()


def test_near_ties_are_rechecked_one_by_one_whatever_the_batch(tie_model_dir):
    """bf16 near ties are predicted again in fp32 one document at a time: their probabilities
    are, bit for bit, the document's fp32 probabilities alone, in every batching."""
    docs, ties = _corpus(90), _tie_rows(90)
    fp32 = Classifier.from_dir(tie_model_dir, device="cpu", precision="fp32")
    bf = Classifier.from_dir(tie_model_dir, device="cpu", precision="bf16")
    bf.precision.margin = 0.5  # many near ties, of different lengths, rechecked together
    runs = [bf.predict(docs, batch_size=bs) for bs in (64, 5)]
    reverse = bf.predict(docs.iloc[::-1], batch_size=64).iloc[::-1].reset_index(drop=True)
    alone = np.vstack([fp32.predict_proba([t], batch_size=1) for t in docs["text"]])
    for got in (*runs, reverse):
        rechecked = (got[BACKEND_COLUMN] == prec.TorchPrecision.recheck_label).to_numpy()
        assert rechecked.sum() > len(docs) // 4 and rechecked[ties].all()
        np.testing.assert_array_equal(_probs(got)[rechecked], alone[rechecked])
        assert (got[PREDICTED_COLUMN].iloc[ties] ==
                fp32.labels[int(np.argmax(alone[ties[0]]))]).all()


def _partitioned(model, folder, out, k: int, batch_size: int, precision: str,
                 scheduler=None) -> pd.DataFrame:
    _write_parts(_corpus(), folder, k)
    predict_partitions(model, folder, out, scheduler=scheduler, device="cpu", quiet=True,
                       batch_size=batch_size, precision=precision)
    return _read_out(out)


@pytest.mark.parametrize("precision", ["auto", "fp32"])
def test_partitioned_on_a_cluster_keeps_the_labels(tie_model_dir, cluster, tmp_path, precision):
    """Single-process and partitioned prediction (2 and 5 partitions, batches of 64 and 7, on
    a LocalCluster; 3 partitions in this process): identical labels and ids; probabilities
    within :data:`BF16_BATCH_TOLERANCE` under auto (bf16 here) and within 1e-6 in fp32; the
    near tie predicted in fp32 (``torch fp32 recheck``) under bf16, with fp32's label."""
    _corpus().to_parquet(tmp_path / "all.parquet", index=False)
    used: dict = {}
    predict_file(tie_model_dir, tmp_path / "all.parquet", tmp_path / "one.parquet", quiet=True,
                 device="cpu", precision=precision, report=used)
    want, ties = pd.read_parquet(tmp_path / "one.parquet"), _tie_rows(len(_corpus()))
    bf16 = used["precision"] == "bf16"
    assert used["precision"] == prec.choose_precision(precision, "cpu").name
    address, _ = cluster
    runs = [_partitioned(tie_model_dir, tmp_path / f"in{k}", tmp_path / f"out{k}", k, bs,
                         precision, scheduler)
            for k, bs, scheduler in ((2, 64, address), (5, 7, address), (3, 16, None))]
    fp32 = Classifier.from_dir(tie_model_dir, device="cpu", precision="fp32")
    tie_label = fp32.labels[int(np.argmax(fp32.predict_proba([TIE_TEXT], batch_size=1)))]
    for got in runs:
        assert got[ID_COLUMN].tolist() == want[ID_COLUMN].tolist()
        assert got[PREDICTED_COLUMN].tolist() == want[PREDICTED_COLUMN].tolist()
        diff = np.nan_to_num(np.abs(_probs(got) - _probs(want)))
        assert diff.max() <= (BF16_BATCH_TOLERANCE if bf16 else FP32_TOLERANCE)
        assert (got[PREDICTED_COLUMN].iloc[ties] == tie_label).all()
        if bf16:
            both = ((got[BACKEND_COLUMN] == prec.TorchPrecision.recheck_label)
                    & (want[BACKEND_COLUMN] == prec.TorchPrecision.recheck_label)).to_numpy()
            assert both[ties].all() and (got[BACKEND_COLUMN] == "torch bf16").mean() > 0.9
            assert diff[both].max() <= FP32_TOLERANCE  # rechecked alone in fp32 in both
    manifest = json.loads((tmp_path / "out2" / "manifest.json").read_text())
    assert {e["precision"]["precision"] for e in manifest["partitions"].values()} == \
        {used["precision"]}
