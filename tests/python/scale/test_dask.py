"""Partitioned corpora and Dask (issue 14): partitions in, one Parquet per partition out,
manifest, --resume, doc_id uniqueness across partitions, and a real LocalCluster (2 worker
processes, 1 thread each): equality with single-process predict, a worker killed mid-job,
tune fanned out over the cluster."""

from __future__ import annotations

import json
import os
import signal
import threading
import time

import numpy as np
import pandas as pd
import pytest
from toydata import toy_frame

from quantformer.cli import main as cli
from quantformer.scale import dask as distributed
from quantformer.scale.dask import (
    list_partitions,
    output_names,
    parse_scheduler,
    predict_partitions,
)
from quantformer.io.writable import check_job_dir
from quantformer._core.errors import InputError
from quantformer.train.finetune import finetune
from quantformer.infer.cache import MODELS
from quantformer.infer.predict import predict_file


@pytest.fixture(scope="module")
def model_dir(tiny_bert_dir, tmp_path_factory):
    clf = finetune(toy_frame(32), model=str(tiny_bert_dir), epochs=1, lr=1e-3, quiet=True,
                   device="cpu", max_length=64)
    return clf.save(tmp_path_factory.mktemp("dist") / "model")


def _corpus(n: int) -> pd.DataFrame:
    f = toy_frame(n).drop(columns="label")
    f["doc_id"] = [f"z{(i * 7919) % n:05d}" for i in range(n)]  # ids not in sorted order
    f.loc[[3, n - 2], "text"] = None
    return f


def _write_parts(frame: pd.DataFrame, folder, k: int, ext: str = "parquet") -> list:
    folder.mkdir(parents=True, exist_ok=True)
    paths = []
    for j, part in enumerate(np.array_split(np.arange(len(frame)), k)):
        p = folder / f"part-{j:02d}.{ext}"
        chunk = frame.iloc[part]
        chunk.to_parquet(p, index=False) if ext == "parquet" else chunk.to_csv(p, index=False)
        paths.append(p)
    return paths


def _read_out(out) -> pd.DataFrame:
    files = sorted(p for p in out.iterdir() if p.suffix == ".parquet")
    return pd.concat([pd.read_parquet(p) for p in files], ignore_index=True)


def _assert_same_predictions(got: pd.DataFrame, want: pd.DataFrame) -> None:
    assert got.columns.tolist() == want.columns.tolist()
    assert got["doc_id"].tolist() == want["doc_id"].tolist()
    assert got["predicted"].tolist() == want["predicted"].tolist()
    probs = [c for c in want.columns if c.startswith("prob_")]
    np.testing.assert_allclose(got[probs].to_numpy(), want[probs].to_numpy(), atol=1e-5)


# ------------------------------------------------------------------------------------------
# partitions, output folder, scheduler strings (no model)


def test_list_partitions_folder_glob_list_and_errors(tmp_path):
    a, b = _write_parts(_corpus(10), tmp_path / "in", 2)
    (tmp_path / "in" / ".hidden").write_text("x")
    assert list_partitions(tmp_path / "in") == [a, b]
    assert list_partitions(str(tmp_path / "in" / "*.parquet")) == [a, b]
    assert list_partitions([str(b), str(a)]) == [b, a]  # a list keeps its order
    with pytest.raises(InputError, match="matches no files"):
        list_partitions(str(tmp_path / "in" / "*.csv"))
    with pytest.raises(InputError, match="neither a file, a folder nor a glob"):
        list_partitions(str(tmp_path / "nope.parquet"))
    with pytest.raises(InputError, match="more than once"):
        list_partitions([str(a), str(tmp_path / "in" / "*.parquet")])
    with pytest.raises(InputError, match="would both be written to 'part-00.parquet'"):
        output_names([a, tmp_path / "part-00.csv"])
    assert distributed.is_partitioned(str(a)) is False
    assert distributed.is_partitioned(str(a), scheduler="local:2") is True
    assert distributed.is_partitioned(str(tmp_path / "in")) is True


def test_out_folder_refused_unless_resume_and_scheduler_strings(tmp_path):
    out = tmp_path / "out"
    out.mkdir()
    (out / "x.parquet").write_text("x")
    with pytest.raises(InputError, match="not empty; pass resume"):
        check_job_dir(out, resume=False)
    with pytest.raises(InputError, match="no manifest.json"):
        check_job_dir(out, resume=True)
    assert parse_scheduler(None) is None
    assert parse_scheduler("local:3") == ("local", 3)
    assert parse_scheduler("tcp://10.0.0.5:8786") == ("address", "tcp://10.0.0.5:8786")
    for bad in ("local:0", "local:x", "8786", "slurm"):
        with pytest.raises(InputError, match="use local:N"):
            parse_scheduler(bad)
    assert distributed.torch_threads(2) >= 1


def test_duplicate_ids_across_partitions_refused_before_any_work(tmp_path, model_dir):
    f = _corpus(20)
    f.loc[15, "doc_id"] = f.loc[2, "doc_id"]  # in partition 0 and partition 1
    _write_parts(f, tmp_path / "in", 2, ext="csv")
    with pytest.raises(InputError, match=r"unique across partitions.*part-01\.csv"):
        predict_partitions(model_dir, tmp_path / "in", tmp_path / "out", quiet=True)
    assert not (tmp_path / "out" / "part-00.parquet").exists()
    g = _corpus(20).drop(columns="text")
    g.to_parquet(tmp_path / "notext.parquet")
    with pytest.raises(InputError, match="no text column 'text'"):
        predict_partitions(model_dir, [tmp_path / "notext.parquet"], tmp_path / "out2",
                           quiet=True)


# ------------------------------------------------------------------------------------------
# single process (no scheduler)


def test_partitioned_equals_one_file_default_ids_across_partitions(tmp_path, model_dir, capsys):
    whole = _corpus(90).drop(columns="doc_id")  # no id column: text1..text90 across partitions
    whole.to_csv(tmp_path / "all.csv", index=False)
    predict_file(model_dir, tmp_path / "all.csv", tmp_path / "all.parquet", quiet=True,
                 device="cpu")
    want = pd.read_parquet(tmp_path / "all.parquet")
    parts = _write_parts(whole.iloc[:60], tmp_path / "in", 2, ext="csv")
    whole.iloc[60:].to_parquet(tmp_path / "in" / "part-02.parquet", index=False)
    out = tmp_path / "out"
    code = cli.main(["predict", "--model", str(model_dir), "--input", str(parts[0]),
                     str(parts[1]), str(tmp_path / "in" / "part-02.parquet"), "--out", str(out),
                     "--device", "cpu", "--quiet"])
    assert code == 0
    assert "wrote 3 partition(s) (90 documents)" in capsys.readouterr().out
    _assert_same_predictions(_read_out(out), want)
    assert want["doc_id"].tolist()[-1] == "text90"
    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["job"]["verb"] == "predict" and len(manifest["runs"]) == 1
    assert [manifest["partitions"][f"part-0{j}.parquet"]["rows"] for j in range(3)] == \
        [30, 30, 30]
    # a second run into the same folder is refused (exit 2) and changes nothing
    code = cli.main(["predict", "--model", str(model_dir), "--input", str(tmp_path / "in"),
                     "--out", str(out)])
    assert code == 2 and "pass --resume" in capsys.readouterr().err


def test_partitioned_int8_keeps_the_fp32_recheck_rows(tmp_path, model_dir, monkeypatch):
    """int8 partitions carry the per-row backend of the fp32 recheck as one file does."""
    monkeypatch.setenv("QUANTFORMER_CACHE", str(tmp_path / "cache"))
    monkeypatch.setattr("quantformer.models.onnx.recheck.RECHECK_MARGIN", 0.5)  # some rows, not all
    MODELS.clear()  # no classifier cached with another margin
    whole = _corpus(40)
    whole.to_parquet(tmp_path / "all.parquet", index=False)
    kw = {"quiet": True, "backend": "onnx", "quantize": "int8"}
    predict_file(model_dir, tmp_path / "all.parquet", tmp_path / "one.parquet", **kw)
    want = pd.read_parquet(tmp_path / "one.parquet")
    _write_parts(whole, tmp_path / "in", 2)
    predict_partitions(model_dir, tmp_path / "in", tmp_path / "out", **kw)
    got = _read_out(tmp_path / "out")
    _assert_same_predictions(got, want)
    assert got["backend"].tolist() == want["backend"].tolist()
    assert set(want["backend"]) == {"onnx int8", "onnx fp32 recheck"}


def test_resume_recomputes_only_the_deleted_partitions(tmp_path, model_dir):
    _write_parts(_corpus(100), tmp_path / "in", 5)
    out = tmp_path / "out"
    with pytest.warns(UserWarning, match="2 of 100 document.s. have a missing or empty text"):
        first = predict_partitions(model_dir, tmp_path / "in", out, device="cpu", quiet=True)
    assert (first["done"], first["skipped"], first["rows"]) == (5, 0, 100)
    before = {p.name: p.stat().st_mtime_ns for p in out.glob("*.parquet")}
    (out / "part-01.parquet").unlink()
    (out / "part-03.parquet").unlink()
    again = predict_partitions(model_dir, tmp_path / "in", out, device="cpu", quiet=True,
                               resume=True)
    assert (again["done"], again["skipped"], again["rows_done"]) == (2, 3, 40)
    manifest = json.loads((out / "manifest.json").read_text())
    runs = {name: e["run"] for name, e in manifest["partitions"].items()}
    assert runs == {"part-00.parquet": 1, "part-01.parquet": 2, "part-02.parquet": 1,
                    "part-03.parquet": 2, "part-04.parquet": 1}
    for name in ("part-00.parquet", "part-02.parquet", "part-04.parquet"):
        assert (out / name).stat().st_mtime_ns == before[name]  # not rewritten
    assert [r["partitions_to_do"] for r in manifest["runs"]] == [5, 2]
    got = _read_out(out)
    assert got["doc_id"].tolist() == _corpus(100)["doc_id"].tolist()
    with pytest.raises(InputError, match="other settings.*batch_size"):
        predict_partitions(model_dir, tmp_path / "in", out, device="cpu", quiet=True,
                           resume=True, batch_size=8)


def test_partitioned_predict_counts_truncated_documents_as_one_file(tmp_path, model_dir):
    from quantformer.models.tokenize import TruncationWarning

    f = _corpus(30)
    long = " ".join(toy_frame(40)["text"])  # far above the model's max_length of 64 tokens
    f.loc[[0, 7, 19, 25], "text"] = [long, long[::-1], long, long]
    f.to_parquet(tmp_path / "all.parquet", index=False)
    with pytest.warns(TruncationWarning) as one:
        predict_file(model_dir, tmp_path / "all.parquet", tmp_path / "one.parquet", quiet=True,
                     device="cpu")
    _write_parts(f, tmp_path / "in", 3)
    with pytest.warns(TruncationWarning) as parts:
        predict_partitions(model_dir, tmp_path / "in", tmp_path / "out", device="cpu",
                           quiet=True)
    message = "4 of 30 document(s) truncated to 64 tokens (head_tail), 13% of the documents"
    for caught in (one, parts):
        assert [str(w.message).split(";")[0] for w in caught
                if w.category is TruncationWarning] == [message]
    manifest = json.loads((tmp_path / "out" / "manifest.json").read_text())
    assert [manifest["partitions"][f"part-0{j}.parquet"]["truncated"] for j in range(3)] == \
        [2, 1, 1]


def test_bad_partition_fails_the_job_by_name_others_stay(tmp_path, model_dir, monkeypatch):
    _write_parts(_corpus(60), tmp_path / "in", 3)
    bad = tmp_path / "in" / "part-01.parquet"
    saved = bad.read_bytes()
    scan = distributed.scan_partitions

    def scan_then_damage(parts, corpus):  # the file is damaged after the driver's scan
        result = scan(parts, corpus)
        bad.write_bytes(b"not parquet")
        return result

    monkeypatch.setattr(distributed, "scan_partitions", scan_then_damage)
    out = tmp_path / "out"
    with pytest.raises(InputError, match=r"1 partition\(s\) failed: '.*part-01\.parquet'"):
        predict_partitions(model_dir, tmp_path / "in", out, device="cpu", quiet=True)
    assert sorted(p.name for p in out.glob("*.parquet")) == ["part-00.parquet",
                                                             "part-02.parquet"]
    monkeypatch.undo()
    bad.write_bytes(saved)
    fixed = predict_partitions(model_dir, tmp_path / "in", out, device="cpu", quiet=True,
                               resume=True)
    assert (fixed["done"], fixed["skipped"]) == (1, 2)


def test_embed_on_local_cluster_and_zeroshot_equal_one_process(tmp_path, tiny_bert_dir):
    from quantformer.infer.embed import embed
    from quantformer.infer.zeroshot import zeroshot

    f = _corpus(40)
    _write_parts(f, tmp_path / "in", 2)
    code = cli.main(["embed", "--model", str(tiny_bert_dir), "--input",
                     str(tmp_path / "in" / "*.parquet"), "--out", str(tmp_path / "emb"),
                     "--device", "cpu", "--quiet", "--scheduler", "local:1",
                     "--precision", "fp32"])  # bf16 sums differ with the batches
    assert code == 0
    manifest = json.loads((tmp_path / "emb" / "manifest.json").read_text())
    assert manifest["runs"][0]["scheduler"] == "local:1"
    # the partitions ran in the cluster's worker process, not in this one
    assert all(not e["worker"].endswith(f":{os.getpid()}")
               for e in manifest["partitions"].values())
    got = _read_out(tmp_path / "emb")
    want = embed(f, str(tiny_bert_dir), device="cpu", quiet=True, precision="fp32")
    assert got["doc_id"].tolist() == f["doc_id"].tolist()
    assert got["embedding"][3] is None
    ok = [i for i in range(40) if i not in (3, 38)]
    np.testing.assert_allclose(np.stack(got["embedding"][ok].to_list()), want[ok], atol=1e-5)
    labels = ["the economy", "war"]
    distributed.zeroshot_partitions(tmp_path / "in", tmp_path / "zs", labels,
                                    model=str(tiny_bert_dir), calibration="none",
                                    device="cpu", quiet=True, precision="fp32")
    with pytest.warns(UserWarning):
        whole = zeroshot(f, labels, model=str(tiny_bert_dir), calibration="none",
                         device="cpu", quiet=True, precision="fp32")
    _assert_same_predictions(_read_out(tmp_path / "zs"), whole)


def test_zeroshot_partitions_load_the_model_once_per_process(tmp_path, tiny_bert_dir,
                                                             monkeypatch):
    """Issue 14: the model is loaded once per worker, not once per partition (zeroshot too)."""
    from quantformer.infer import embed

    loads = []
    real = embed._read_encoder
    monkeypatch.setattr(embed, "_read_encoder",
                        lambda *a, **k: loads.append(a) or real(*a, **k))
    MODELS.clear()
    _write_parts(_corpus(30), tmp_path / "in", 3)
    distributed.zeroshot_partitions(tmp_path / "in", tmp_path / "zs", ["the economy", "war"],
                                    model=str(tiny_bert_dir), calibration="none",
                                    device="cpu", quiet=True)
    assert len(_read_out(tmp_path / "zs")) == 30
    assert len(loads) == 1  # three partitions, one load
    assert len(MODELS.models) == 1 and MODELS.size == distributed.WORKER_CACHE


# ------------------------------------------------------------------------------------------
# a real LocalCluster


def test_cluster_equals_single_process(tmp_path, model_dir, cluster):
    address, _ = cluster
    f = _corpus(2000)
    f.to_parquet(tmp_path / "all.parquet", index=False)
    predict_file(model_dir, tmp_path / "all.parquet", tmp_path / "want.parquet", quiet=True,
                 device="cpu")
    _write_parts(f, tmp_path / "in", 5)
    summary = predict_partitions(model_dir, str(tmp_path / "in" / "*.parquet"),
                                 tmp_path / "out", scheduler=address, device="cpu",
                                 quiet=True)
    assert (summary["done"], summary["rows"]) == (5, 2000)
    _assert_same_predictions(_read_out(tmp_path / "out"),
                             pd.read_parquet(tmp_path / "want.parquet"))
    manifest = json.loads((tmp_path / "out" / "manifest.json").read_text())
    assert manifest["runs"][0]["scheduler"] == address
    assert sum(e["rows"] for e in manifest["partitions"].values()) == 2000


def test_worker_killed_mid_job_every_document_once(tmp_path, model_dir, cluster):
    address, client = cluster
    f = _corpus(1600)
    _write_parts(f, tmp_path / "in", 8)
    out = tmp_path / "out"
    result: dict = {}

    def job():
        try:
            result["summary"] = predict_partitions(model_dir, tmp_path / "in", out,
                                                   scheduler=address, device="cpu",
                                                   batch_size=1, quiet=True)
        except BaseException as exc:  # reported by the assertion below
            result["error"] = exc

    thread = threading.Thread(target=job)
    thread.start()
    killed = None
    deadline = time.time() + 300
    while killed is None and time.time() < deadline and thread.is_alive():
        busy = [w for w, keys in client.processing().items() if keys]
        done = (out / "manifest.json").exists() and json.loads(
            (out / "manifest.json").read_text())["partitions"]
        if busy and done:  # one partition finished, others running: kill a busy worker
            pid = client.run(os.getpid, workers=[busy[0]])[busy[0]]
            os.kill(pid, signal.SIGKILL)
            killed = pid
        time.sleep(0.05)
    thread.join(timeout=600)
    assert killed is not None, "the job ended before a worker could be killed"
    assert "error" not in result, result.get("error")
    assert result["summary"]["rows"] == 1600 and result["summary"]["done"] == 8
    got = _read_out(out)
    assert got["doc_id"].tolist() == f["doc_id"].tolist()  # every document exactly once
    manifest = json.loads((out / "manifest.json").read_text())
    assert len(manifest["partitions"]) == 8
    assert not list(out.glob(".*.part"))  # no temporary file of the killed task left
    # the manifest says which partitions ran again because their worker died (issue 27, 7)
    lost = {n: e["workers_lost"] for n, e in manifest["partitions"].items()}
    assert sum(lost.values()) >= 1, lost
    assert all(e["retries"] == 0 for e in manifest["partitions"].values())  # no task error


def test_tune_on_cluster_equals_serial(tiny_bert_dir, cluster):
    from quantformer.select.tune import tune

    address, _ = cluster
    kw = dict(model=str(tiny_bert_dir), lrs=[1e-3, 5e-4], epochs_grid=[1], folds=2, seed=3,
              max_length=64, device="cpu", quiet=True, refit=False, estimate=False)
    serial = tune(toy_frame(24), **kw)
    fanned = tune(toy_frame(24), scheduler=address, **kw)
    cols = ["lr", "epochs", "fold", "macro_f1"]
    pd.testing.assert_frame_equal(fanned.cv_results[cols], serial.cv_results[cols])
    assert fanned.best == serial.best


def test_compare_nli_on_cluster_equals_serial(tiny_roberta_nli_dir, cluster):
    """Issue 13: the nli model's hypothesis, label phrases and pairs reach the Dask workers."""
    import warnings

    from quantformer.select.compare import compare

    address, _ = cluster
    kw = dict(models="nli", model=str(tiny_roberta_nli_dir), train_sizes=[12, 16], repeats=1,
              quiet=True, finetune_kwargs={"epochs": 1, "lr": 1e-3, "device": "cpu"},
              hypothesis="The text is about {}.", nli_pairs="all",
              label_phrases="econ=money and taxes,other=something else")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        serial = compare(toy_frame(16), toy_frame(24).iloc[16:], **kw)
        fanned = compare(toy_frame(16), toy_frame(24).iloc[16:], scheduler=address, **kw)
    cols = ["model", "train_size", "repeat", "macro_f1", "accuracy"]
    pd.testing.assert_frame_equal(fanned.results[cols], serial.results[cols])
    assert [r["n_pairs"] for r in fanned.runs] == [12 * 2, 16 * 2]  # "all" reached the workers
    assert fanned.runs == serial.runs and fanned.summary["nli"] == serial.summary["nli"]
