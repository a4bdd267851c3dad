"""Precision chosen for the processor at hand (issue 37): the decision, bf16 prediction with
the fp32 recheck of near ties, agreement with fp32, the cache key, the CLI and bad input."""

from __future__ import annotations

import json
import os
import warnings

import numpy as np
import pandas as pd
import pytest
import torch
from toydata import toy_frame

from quantformer._core.errors import InputError
from quantformer.cli import main as cli
from quantformer.infer.cache import MODELS
from quantformer.infer.classifier import Classifier
from quantformer.infer.load import load_model
from quantformer.infer.predict import predict
from quantformer.models import precision as prec
from quantformer.models.onnx.recheck import near_ties
from quantformer.train.finetune import finetune


@pytest.fixture(scope="module")
def model_dir(tiny_bert_dir, tmp_path_factory):
    clf = finetune(toy_frame(48), model=str(tiny_bert_dir), epochs=3, lr=3e-3, quiet=True,
                   device="cpu", max_length=64, seed=3)
    return clf.save(tmp_path_factory.mktemp("prec") / "model")


def _docs(n=60):
    return toy_frame(n).drop(columns="label")


@pytest.fixture
def flags(monkeypatch):
    """Pretend the CPU has the given flags (the decision reads nothing else on a CPU)."""
    def use(*names):
        monkeypatch.setattr(prec, "cpu_flags", lambda: frozenset(names))
    return use


def test_auto_picks_bf16_only_with_native_bf16(flags):
    flags("avx2", "fma")
    got = prec.choose_precision("auto", "cpu")
    assert (got.name, got.requested) == ("fp32", "auto") and "AVX2" in got.reason
    flags("avx2", "avx512f", "avx512_vnni")
    got = prec.choose_precision("auto", "cpu")
    assert got.name == "fp32" and "AVX-512 but neither AMX nor AVX-512 BF16" in got.reason
    flags("avx2", "avx512f", "avx512_bf16")
    assert prec.choose_precision("auto", "cpu").name == "bf16"
    flags("avx2", "amx_bf16", "amx_tile", "avx512_bf16")
    got = prec.choose_precision("auto", "cpu")
    assert got.name == "bf16" and got.reason == "CPU has amx_bf16 and avx512_bf16 (native bf16)"
    assert prec.choose_precision("fp32", "cpu").name == "fp32"


def test_bf16_without_native_support_warns_and_is_allowed(flags):
    flags("avx2")
    with pytest.warns(prec.PrecisionWarning, match="emulated"):
        got = prec.choose_precision("bf16", "cpu")
    assert got.name == "bf16"
    flags("avx512_bf16")
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert prec.choose_precision("bf16", "cpu").name == "bf16"


def test_bad_precision_values_name_the_parameter():
    with pytest.raises(InputError, match="must be one of auto, fp32, bf16, not 'fp16'") as e:
        prec.choose_precision("fp16", "cpu")
    assert tuple(e.value.params) == ("precision",)
    with pytest.raises(InputError, match="bf16 applies to the torch backend") as e:
        prec.check_with_backend("bf16", "onnx")
    assert "precision" in e.value.params
    prec.check_with_backend("auto", "onnx", "int8")  # onnx: quantize applies
    prec.check_with_backend("fp32", "onnx", "int8")
    prec.check_with_backend("bf16", "torch")


def test_bf16_agrees_with_fp32_and_rechecks_exactly_the_near_ties(model_dir):
    docs = _docs()
    ref = Classifier.from_dir(model_dir, device="cpu", precision="fp32").predict(docs)
    bf = Classifier.from_dir(model_dir, device="cpu", precision="bf16")
    assert bf.precision.name == "bf16"
    bf.precision.margin = 0.0  # pure bf16: no recheck
    raw = bf.predict(docs)
    assert set(raw["backend"]) == {"torch bf16"}
    p_ref, p_raw = ref.filter(like="prob_").to_numpy(), raw.filter(like="prob_").to_numpy()
    assert 0 < np.abs(p_raw - p_ref).max() < 0.05  # bf16 moves probabilities a little
    top2 = np.sort(p_raw, axis=1)[:, -2:]
    distinct = np.unique(top2[:, 1] - top2[:, 0])  # the corpus repeats its texts
    assert len(distinct) >= 2
    middle = len(distinct) // 2  # a margin between two observed ones: some rows on each side
    margin = float((distinct[middle - 1] + distinct[middle]) / 2)
    bf.precision.margin = margin
    got = bf.predict(docs)
    ties = near_ties(p_raw, margin)
    assert 0 < ties.sum() < len(docs)  # both kinds of rows occur on this model
    assert got["backend"].tolist() == np.where(ties, "torch fp32 recheck", "torch bf16").tolist()
    p_got = got.filter(like="prob_").to_numpy()
    np.testing.assert_allclose(p_got[ties], p_ref[ties], atol=1e-6)  # recomputed in fp32
    np.testing.assert_array_equal(p_got[~ties], p_raw[~ties])
    assert got["predicted"].tolist() == ref["predicted"].tolist()  # 100 % top-1 agreement


def test_cache_key_holds_precision(model_dir):
    MODELS.clear()
    MODELS.resize(4)
    try:
        loads = MODELS.loads
        a = load_model(model_dir, device="cpu", precision="fp32")
        b = load_model(model_dir, device="cpu", precision="bf16")
        c = load_model(model_dir, device="cpu", precision="bf16")
        assert MODELS.loads - loads == 2 and b is c and a is not b
        assert (a.precision.name, b.precision.name) == ("fp32", "bf16")
    finally:
        MODELS.resize(0)


@pytest.mark.parametrize("cpu", [("avx2", "avx512f", "avx512_bf16"), ("avx2", "fma")],
                         ids=["native-bf16", "no-bf16"])
def test_cache_key_holds_the_resolved_precision(model_dir, flags, cpu):
    """auto is cached as what it resolves to: auto and that precision named share one loaded
    network (each answer records what was asked), the other precision is another model."""
    flags(*cpu)
    want = prec.choose_precision("auto", "cpu").name
    other = "fp32" if want == "bf16" else "bf16"
    MODELS.clear()
    MODELS.resize(4)
    try:
        loads = MODELS.loads
        auto = load_model(model_dir, device="cpu", precision="auto")
        named = load_model(model_dir, device="cpu", precision=want)
        assert MODELS.loads - loads == 1 and named.model is auto.model
        assert (auto.precision.name, named.precision.name) == (want, want)
        assert (auto.precision.chosen.requested, named.precision.chosen.requested) == (
            "auto", want)
        with warnings.catch_warnings():  # bf16 where the CPU only emulates it warns
            warnings.simplefilter("ignore", prec.PrecisionWarning)
            changed = load_model(model_dir, device="cpu", precision=other)
        assert changed.precision.name == other and MODELS.loads - loads == 2
        assert changed.model is not auto.model
        assert load_model(model_dir, device="cpu", precision="auto") is auto
        again = load_model(model_dir, device="cpu", precision=want)
        assert again.model is auto.model and again.precision.chosen.requested == want
        assert MODELS.loads - loads == 2
    finally:
        MODELS.resize(0)


def test_cached_auto_follows_a_change_of_what_auto_resolves_to(model_dir, flags):
    MODELS.clear()
    MODELS.resize(4)
    try:
        flags("avx2", "avx512f", "avx512_bf16")
        assert load_model(model_dir, device="cpu", precision="auto").precision.name == "bf16"
        flags("avx2", "fma")
        again = load_model(model_dir, device="cpu", precision="auto")
        assert again.precision.name == "fp32"
        assert again.predict(_docs(6))["backend"].tolist() == ["torch"] * 6
    finally:
        MODELS.resize(0)


def test_library_predict_auto_follows_the_decision(model_dir):
    out = predict(str(model_dir), _docs(8), device="cpu")
    want = prec.choose_precision("auto", "cpu").name
    assert set(out["backend"]) <= ({"torch"} if want == "fp32"
                                   else {"torch bf16", "torch fp32 recheck"})


def test_cli_predict_precision_and_info(model_dir, tmp_path, capsys):
    src = tmp_path / "in.parquet"
    _docs(12).to_parquet(src)
    out = tmp_path / "out.parquet"
    assert cli.main(["predict", "--model", str(model_dir), "--input", str(src), "--out",
                     str(out), "--precision", "fp32", "--quiet", "--device", "cpu"]) == 0
    assert "precision: fp32 (fp32 asked for)" in capsys.readouterr().out
    assert set(pd.read_parquet(out)["backend"]) == {"torch"}
    assert cli.main(["predict", "--model", str(model_dir), "--input", str(src), "--out",
                     str(out), "--precision", "bf16", "--quiet", "--device", "cpu"]) == 0
    assert "precision: bf16 (bf16 asked for; " in capsys.readouterr().out
    assert set(pd.read_parquet(out)["backend"]) <= {"torch bf16", "torch fp32 recheck"}
    assert cli.main(["info", "--json"]) == 0
    info = json.loads(capsys.readouterr().out)
    assert info["precision_auto"] == prec.choose_precision("auto", "cpu").name
    assert info["precision_reason"] == prec.choose_precision("auto", "cpu").reason
    assert ("avx512_bf16" in info["cpu_isa"].split()) == ("avx512_bf16" in prec.cpu_flags())


def test_partitioned_predict_runs_in_the_precision_asked(model_dir, tmp_path):
    from quantformer.scale.dask import predict_partitions

    src = tmp_path / "in"
    src.mkdir()
    _docs(10).to_parquet(src / "a.parquet")
    other = _docs(6)
    other["doc_id"] = "b" + other["doc_id"]
    other.to_parquet(src / "b.parquet")
    out = tmp_path / "out"
    predict_partitions(str(model_dir), str(src), str(out), precision="bf16", device="cpu",
                       quiet=True)
    rows = pd.concat([pd.read_parquet(f) for f in sorted(out.glob("*.parquet"))])
    assert len(rows) == 16
    assert set(rows["backend"]) <= {"torch bf16", "torch fp32 recheck"}
    with pytest.raises(InputError, match="bf16 applies to the torch backend"):
        predict_partitions(str(model_dir), str(src), str(tmp_path / "o2"), precision="bf16",
                           backend="onnx", quiet=True)


def test_cli_precision_with_onnx_says_which_applies(model_dir, tmp_path, capsys):
    src = tmp_path / "in.parquet"
    _docs(4).to_parquet(src)
    out = tmp_path / "out.parquet"
    rc = cli.main(["predict", "--model", str(model_dir), "--input", str(src), "--out", str(out),
                   "--precision", "bf16", "--backend", "onnx"])
    err = capsys.readouterr().err
    assert rc == 2 and not out.exists()
    assert "--precision bf16 applies to the torch backend; with --backend onnx" in err
    assert cli.main(["predict", "--model", str(model_dir), "--input", str(src), "--out",
                     str(out), "--backend", "onnx", "--quiet"]) == 0
    assert "precision: onnx fp32 (ONNX Runtime: quantize sets the precision)" in \
        capsys.readouterr().out
    assert set(pd.read_parquet(out)["backend"]) == {"onnx fp32"}


def test_prefetch_keeps_order_and_raises_where_the_error_occurred():
    from quantformer.infer.pipeline import prefetched

    def items():
        yield from range(5)
        raise InputError("{input} is damaged at row 5", params=["input"])

    got = []
    with pytest.raises(InputError, match="damaged at row 5"):
        for item, square in prefetched(items(), lambda x: x * x):
            got.append((item, square))
    assert got == [(0, 0), (1, 1), (2, 4), (3, 9), (4, 16)]
    # a caller that stops early leaves no thread blocked behind it
    first = next(iter(prefetched(range(100), lambda x: -x)))
    assert first == (0, 0)


def test_streamed_chunks_tokenised_ahead_equal_one_pass(model_dir, tmp_path):
    from quantformer.infer.predict import predict_file

    docs = _docs(30)
    docs.loc[4, "text"] = None
    src, out = tmp_path / "in.parquet", tmp_path / "out.parquet"
    docs.to_parquet(src)
    from quantformer.infer.pipeline import overlap_pays

    clf = Classifier.from_dir(model_dir, device="cpu", precision="fp32")
    assert overlap_pays("cpu") == (len(os.sched_getaffinity(0)) > torch.get_num_threads())
    with pytest.warns(UserWarning, match="1 of 30"):
        n = predict_file(clf, src, out, chunk_rows=7, quiet=True)
        ref = clf.predict(docs)
    got = pd.read_parquet(out)
    assert n == 30 and got["doc_id"].tolist() == docs["doc_id"].tolist()
    np.testing.assert_allclose(got.filter(like="prob_").to_numpy(),
                               ref.filter(like="prob_").to_numpy(), atol=1e-6)
    assert got["predicted"].isna().tolist() == ref["predicted"].isna().tolist()


def test_behave_runs_in_the_precision_asked_and_records_it(model_dir, tmp_path):
    toy_frame(12).to_csv(tmp_path / "c.csv", index=False)
    got = {}
    for p in ("fp32", "bf16"):
        out = tmp_path / f"{p}.json"
        assert cli.main(["behave", "--model", str(model_dir), "--input", str(tmp_path / "c.csv"),
                         "--perturb", "typos", "--expect", "same", "--out", str(out),
                         "--precision", p, "--device", "cpu"]) == 0
        got[p] = json.loads(out.read_text())
    assert got["fp32"]["precision"] == {"precision": "fp32", "requested": "fp32",
                                        "reason": "fp32 asked for"}
    assert got["bf16"]["precision"]["precision"] == "bf16"
    # the labels behind the fail counts are fp32's: near ties are predicted again in fp32
    assert [t["n_fail"] for t in got["bf16"]["tests"]] == \
        [t["n_fail"] for t in got["fp32"]["tests"]]
