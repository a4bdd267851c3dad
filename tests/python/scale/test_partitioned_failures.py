"""Issue 27, point 7: a failed partitioned run leaves nothing when it wrote no partition, an
unreachable scheduler fails at once before anything is written, an interrupt leaves no
temporary file."""

from __future__ import annotations

import time
from pathlib import Path

import numpy as np
import pytest
from toydata import toy_frame

from quantformer._core.atomic import temporary_sibling
from quantformer._core.errors import InputError
from quantformer.cli import main as cli
from quantformer.scale import dask as distributed
from quantformer.scale.dask import predict_partitions
from quantformer.train.finetune import finetune


@pytest.fixture(scope="module")
def model_dir(tiny_bert_dir, tmp_path_factory):
    clf = finetune(toy_frame(16), model=str(tiny_bert_dir), epochs=1, lr=1e-3, quiet=True,
                   device="cpu", max_length=32)
    return clf.save(tmp_path_factory.mktemp("fail") / "model")


def _parts(folder, k=3, n=30):
    folder.mkdir()
    frame = toy_frame(n).drop(columns="label")
    for j, idx in enumerate(np.array_split(np.arange(n), k)):
        frame.iloc[idx].to_parquet(folder / f"part-{j:02d}.parquet", index=False)
    return sorted(folder.iterdir())


def test_unreachable_scheduler_fails_at_once_and_writes_nothing(tmp_path, tiny_bert_dir,
                                                                capsys):
    _parts(tmp_path / "in")
    out = tmp_path / "out"
    start = time.monotonic()
    assert cli.main(["embed", "--model", str(tiny_bert_dir), "--input", str(tmp_path / "in"),
                     "--out", str(out), "--scheduler", "tcp://127.0.0.1:1", "--quiet"]) == 2
    assert time.monotonic() - start < 10  # not Dask's 30 s connect timeout
    err = capsys.readouterr().err
    assert "cannot reach the Dask scheduler at tcp://127.0.0.1:1 (Connection refused)" in err
    assert "check --scheduler" in err
    assert not out.exists()


def test_a_run_that_wrote_no_partition_leaves_nothing(tmp_path, model_dir, monkeypatch):
    parts = _parts(tmp_path / "in")
    saved = [p.read_bytes() for p in parts]
    scan = distributed.scan_partitions

    def scan_then_damage(ps, corpus):  # every file damaged after the driver's scan
        result = scan(ps, corpus)
        for p in parts:
            p.write_bytes(b"not parquet")
        return result

    monkeypatch.setattr(distributed, "scan_partitions", scan_then_damage)
    out = tmp_path / "out"
    with pytest.raises(InputError, match=r"3 partition\(s\) failed"):
        predict_partitions(model_dir, tmp_path / "in", out, device="cpu", quiet=True)
    assert not out.exists()  # no manifest.json, no folder: a plain rerun is not refused
    monkeypatch.undo()
    for p, b in zip(parts, saved):
        p.write_bytes(b)
    assert predict_partitions(model_dir, tmp_path / "in", out, device="cpu",
                              quiet=True)["done"] == 3


@pytest.mark.parametrize("at", [0, 1])
def test_interrupt_leaves_no_part_file(tmp_path, model_dir, monkeypatch, at):
    """Ctrl-C while partition ``at`` is written (its temporary file exists): the .part file
    goes; after the first partition the manifest stays for --resume, before it nothing does."""
    _parts(tmp_path / "in")
    out = tmp_path / "out"
    real = distributed.run_partition
    calls = []

    def interrupted(spec):
        calls.append(spec["output"])
        if len(calls) - 1 == at:
            temporary_sibling(Path(spec["output"]))  # a half-written output
            raise KeyboardInterrupt
        return real(spec)

    monkeypatch.setattr(distributed, "run_partition", interrupted)
    with pytest.raises(KeyboardInterrupt):
        predict_partitions(model_dir, tmp_path / "in", out, device="cpu", quiet=True)
    if at == 0:
        assert not out.exists()
        return
    assert sorted(p.name for p in out.iterdir()) == ["manifest.json", "part-00.parquet"]
    monkeypatch.undo()
    resumed = predict_partitions(model_dir, tmp_path / "in", out, device="cpu", quiet=True,
                                 resume=True)
    assert (resumed["done"], resumed["skipped"]) == (2, 1)


def test_local_cluster_closes_without_noise(tmp_path, tiny_bert_dir):
    """``--scheduler local:N`` closes its workers gracefully: no nanny "still alive after 4.0
    seconds, killing", no "leaked semaphore" at exit; the manifest records how often each
    partition ran again (none here)."""
    import json
    import os
    import subprocess
    import sys

    _parts(tmp_path / "in", k=2, n=20)
    out = tmp_path / "out"
    env = {**os.environ, "PYTHONPATH": str(Path(distributed.__file__).parents[2])}
    run = subprocess.run([sys.executable, "-m", "quantformer", "embed", "--model",
                          str(tiny_bert_dir), "--input", str(tmp_path / "in"), "--out",
                          str(out), "--scheduler", "local:2", "--device", "cpu", "--quiet"],
                         capture_output=True, text=True, env=env, timeout=300)
    assert run.returncode == 0, run.stderr
    assert "still alive" not in run.stderr and "leaked semaphore" not in run.stderr, run.stderr
    parts = json.loads((out / "manifest.json").read_text())["partitions"]
    assert {n: (e["workers_lost"], e["retries"]) for n, e in parts.items()} == {
        "part-00.parquet": (0, 0), "part-01.parquet": (0, 0)}
