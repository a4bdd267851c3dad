"""The SOTU example corpus and the grouped train/test split."""

from __future__ import annotations

import pandas as pd
import pytest

from quantformer.io.datasets import sotu, split_by_group
from quantformer._core.errors import InputError


@pytest.fixture(scope="module")
def full():
    return sotu()


def test_sotu_shape_docvars_and_ids(full):
    assert full.columns.tolist() == ["doc_id", "text", "year", "president", "party", "address",
                                     "paragraph"]
    assert len(full) > 20000 and full["address"].nunique() > 200
    assert full["doc_id"].is_unique
    assert (full["doc_id"] == full["address"] + "." + full["paragraph"].astype(str)).all()
    assert full["year"].dtype.kind == "i" and full["year"].min() == 1790
    assert full["address"].iloc[0].startswith("1790-Washington")
    # paragraphs are numbered 1..k within each address, in order
    firsts = full.groupby("address", sort=False)["paragraph"].agg(["min", "max", "size"])
    assert (firsts["min"] == 1).all() and (firsts["max"] == firsts["size"]).all()
    assert full["text"].str.split().str.len().min() >= 8
    assert not full["text"].str.contains("\n\n", regex=False).any()
    assert {"Democratic", "Republican"} <= set(full["party"])


def test_sotu_filters_and_label(full):
    modern = sotu(since=1913, until=2000, parties=("Democratic", "Republican"), label="party")
    assert modern.columns.tolist()[:3] == ["doc_id", "text", "label"]
    assert modern["year"].between(1913, 2000).all()
    assert set(modern["label"]) == {"Democratic", "Republican"}
    assert (modern["label"] == modern["party"]).all()
    expected = full[full["year"].between(1913, 2000) & full["party"].isin(["Democratic",
                                                                           "Republican"])]
    assert modern["doc_id"].tolist() == expected["doc_id"].tolist()
    everything = sotu(since=1962, until=1962, min_words=0)
    some = sotu(since=1962, until=1962)
    assert len(everything) > len(some) > 0
    assert everything["text"].str.split().str.len().min() < 8
    assert sotu(since=2010, until=2010, label="year")["label"].eq("2010").all()


def test_sotu_bad_arguments():
    with pytest.raises(InputError, match="no State of the Union paragraphs match"):
        sotu(since=2100)
    with pytest.raises(InputError, match="label 'nope' is not a docvar; use one of year, "
                                         "president, party, address, paragraph"):
        sotu(since=2010, until=2010, label="nope")


def test_split_by_group_keeps_addresses_apart(full):
    frame = full[full["year"] >= 1990].reset_index(drop=True)
    train, test = split_by_group(frame, "address", test_share=0.25, seed=3)
    assert set(train["address"]).isdisjoint(test["address"])
    assert len(train) + len(test) == len(frame)
    assert sorted(train["doc_id"].tolist() + test["doc_id"].tolist()) == sorted(frame["doc_id"])
    assert 0.1 < test["address"].nunique() / frame["address"].nunique() < 0.4
    # input row order within each part
    pos = {d: i for i, d in enumerate(frame["doc_id"])}
    assert pd.Series([pos[d] for d in train["doc_id"]]).is_monotonic_increasing
    assert pd.Series([pos[d] for d in test["doc_id"]]).is_monotonic_increasing
    again = split_by_group(frame, "address", test_share=0.25, seed=3)[1]
    assert again["doc_id"].tolist() == test["doc_id"].tolist()
    other = split_by_group(frame, "address", test_share=0.25, seed=4)[1]
    assert other["doc_id"].tolist() != test["doc_id"].tolist()
    with pytest.raises(InputError, match="group column 'speech' is not in the frame"):
        split_by_group(frame, "speech")
