"""Further pretraining under torchrun and accelerate launch (issue 33): two real processes on
the Gloo backend.

Two processes with 8 documents each per step must train the same encoder as one process with
16 documents per step (the same masks, the gradient of the whole batch), to float rounding;
one process with 8 documents per step, a different run, shows that the check can fail. The
two-process run is killed once it has written a checkpoint of the main phase, refused when
resumed by one process (and a one-process checkpoint when resumed by two), and resumed by two.
``accelerate launch --multi_gpu --num_processes 2`` (torchrun underneath, here on the CPU)
trains the same encoder; its launches that the loop would not follow (``--mixed_precision
bf16``, ``--cpu`` with several processes but no MPI) are refused before any work.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from quantformer.cli.main import main
from quantformer.io.modeldir import encoder_record
from tiny_models import TINY_CORPUS

STEPS = ["--objective", "mlm", "--max-steps", "40", "--head-steps", "2",
         "--checkpoint-every", "4", "--buffer-docs", "64", "--max-length", "48",
         "--quiet", "--device", "cpu"]


@pytest.fixture(scope="module")
def corpus(tmp_path_factory) -> Path:
    texts = [f"{t} number {i}" for i, t in enumerate(TINY_CORPUS * 2)][:160]
    path = tmp_path_factory.mktemp("corpus") / "corpus.parquet"
    pd.DataFrame({"text": texts}).to_parquet(path)
    return path


@pytest.fixture(scope="module")
def no_dropout_bert(tiny_bert_dir, tmp_path_factory) -> Path:
    """The tiny BERT without dropout: dropout draws differ between one process with the whole
    batch and two with half each, masks do not."""
    import shutil

    folder = tmp_path_factory.mktemp("bert") / "bert"
    shutil.copytree(tiny_bert_dir, folder)
    config = json.loads((folder / "config.json").read_text())
    config.update(hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0)
    (folder / "config.json").write_text(json.dumps(config))
    return folder


@pytest.fixture(scope="module")
def one16(corpus, no_dropout_bert, tmp_path_factory) -> Path:
    """The encoder of one process with 16 documents per step."""
    out = tmp_path_factory.mktemp("one") / "one16"
    assert main(["pretrain", "--corpus", str(corpus), "--model", str(no_dropout_bert), *STEPS,
                 "--batch-size", "16", "--out", str(out)]) == 0
    return out


def _torchrun(*args: str) -> list[str]:
    return [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node",
            "2", "-m", "quantformer", "pretrain", *args]


def _weights(folder: Path) -> dict:
    from safetensors.numpy import load_file

    return load_file(folder / "model.safetensors")


def _max_diff(a: dict, b: dict) -> float:
    assert a.keys() == b.keys()
    return max(float(np.abs(a[k] - b[k]).max()) for k in a)


def _descendants(pid: int) -> list[int]:
    """The processes started by ``pid`` and by those (Linux's /proc)."""
    kids = []
    for task in Path(f"/proc/{pid}/task").glob("*"):
        try:
            kids += [int(k) for k in (task / "children").read_text().split()]
        except OSError:  # ended meanwhile
            pass
    return [d for k in kids for d in (k, *_descendants(k))]


def _kill_in_main_phase(cmd: list[str], checkpoint: Path, env: dict) -> None:
    """Start ``cmd`` and kill its whole process group once a main-phase checkpoint exists."""
    proc = subprocess.Popen(cmd, env=env, start_new_session=True)
    meta = checkpoint / "checkpoint.json"
    while proc.poll() is None:
        if meta.is_file() and json.loads(meta.read_text())["phase"] == "train":
            # the launcher starts each worker in a session of its own: killed one by one,
            # or they would finish the run after their launcher is gone
            for pid in [*_descendants(proc.pid), proc.pid]:
                try:
                    os.kill(pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
            break
        time.sleep(0.02)
    proc.wait()


def test_two_processes_train_the_one_process_encoder_and_resume(
        corpus, no_dropout_bert, one16, tmp_path, capsys):
    common = ["--corpus", str(corpus), "--model", str(no_dropout_bert), *STEPS]
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    two = tmp_path / "two"
    _kill_in_main_phase(_torchrun(*common, "--batch-size", "8", "--out", str(two)),
                        tmp_path / "two.checkpoint", env)
    assert not two.exists(), "the run ended before it was killed: nothing was resumed"
    state = json.loads((tmp_path / "two.checkpoint" / "checkpoint.json").read_text())
    assert state["phase"] == "train" and state["settings"]["world_size"] == 2
    assert 0 < state["step"] < 40
    # one process may not continue what two began (the batches would differ), nor two what
    # one began (the checkpoint rewritten as one process's)
    assert main(["pretrain", *common, "--batch-size", "8", "--out", str(two), "--resume"]) == 2
    assert ("was written by 2 processes and this run has 1 (WORLD_SIZE): every step's batch is "
            "--batch-size times the processes, so start 2 processes in all to resume it"
            in capsys.readouterr().err)
    one = tmp_path / "one"
    shutil.copytree(tmp_path / "two.checkpoint", tmp_path / "one.checkpoint")
    meta = tmp_path / "one.checkpoint" / "checkpoint.json"
    meta.write_text(json.dumps({**state, "settings": {**state["settings"], "world_size": 1}}))
    refused = subprocess.run(_torchrun(*common, "--batch-size", "8", "--out", str(one),
                                       "--resume"), env=env, capture_output=True, text=True)
    assert refused.returncode != 0 and not one.exists()
    assert "written by 1 process and this run has 2 (WORLD_SIZE)" in refused.stderr
    assert "resume it in one process, without a launcher" in refused.stderr
    done = subprocess.run(_torchrun(*common, "--batch-size", "8", "--out", str(two),
                                    "--resume"), env=env, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr[-3000:]
    assert done.stdout.count("pretrained ") == 1  # the main process alone reports
    assert not (tmp_path / "two.checkpoint").exists()
    again = subprocess.run(_torchrun(*common, "--batch-size", "8", "--out", str(two),
                                     "--resume"), env=env, capture_output=True, text=True)
    assert again.returncode == 0, again.stderr[-3000:]
    assert again.stdout.count("already an encoder of this corpus; nothing to do") == 1

    one8 = tmp_path / "one8"
    assert main(["pretrain", *common, "--batch-size", "8", "--out", str(one8)]) == 0
    same, other = _max_diff(_weights(two), _weights(one16)), _max_diff(_weights(one8),
                                                                         _weights(one16))
    assert same < 1e-5 < 1e-3 < other, (same, other)

    record, single = encoder_record(two), encoder_record(one16)
    assert record["processes"] == {"world_size": 2, "backend": "gloo",
                                   "batch_size_per_process": 8, "batch_size_per_step": 16}
    assert record["settings"]["world_size"] == 2 and single["settings"]["world_size"] == 1
    assert record["settings"]["steps"] == 40 and record["head_warmup"]["steps"] == 2
    assert record["valid_after"]["loss"] == pytest.approx(single["valid_after"]["loss"],
                                                          abs=1e-4)
    assert record["valid_after"]["loss"] != record["valid_before"]["loss"]


def test_tsdae_under_two_processes(corpus, no_dropout_bert, tmp_path):
    """TSDAE's loss leaves the encoder's pooler unused, which DDP must be told about."""
    from sentence_transformers import SentenceTransformer

    out = tmp_path / "tsdae"
    done = subprocess.run(_torchrun("--corpus", str(corpus), "--model", str(no_dropout_bert),
                                    "--objective", "tsdae", "--max-steps", "2",
                                    "--batch-size", "8", "--max-length", "48", "--quiet",
                                    "--device", "cpu", "--out", str(out)),
                          env={**os.environ, "OMP_NUM_THREADS": "1"}, capture_output=True,
                          text=True)
    assert done.returncode == 0, done.stderr[-3000:]
    record = encoder_record(out)
    assert record["objective"] == "tsdae" and record["processes"]["world_size"] == 2
    assert record["valid_after"]["loss"] != record["valid_before"]["loss"]
    assert SentenceTransformer(str(out), device="cpu").encode(["a text"]).shape == (1, 32)


def _accelerate(config: Path, *args: str) -> list[str]:
    """``accelerate launch`` with a configuration file of the test's own (never the user's
    default one) and a free port (other runs may hold accelerate's default 29500)."""
    if not config.is_file():
        # the launcher is chosen by the options (--multi_gpu, --cpu), not by the file
        config.write_text("compute_environment: LOCAL_MACHINE\ndistributed_type: 'NO'\n"
                          "num_machines: 1\n")
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    return [sys.executable, "-m", "accelerate.commands.accelerate_cli", "launch",
            "--config_file", str(config), "--main_process_port", str(port), "--num_machines",
            "1", "--dynamo_backend", "no", *args]


def test_accelerate_launch_trains_the_one_process_encoder(
        corpus, no_dropout_bert, one16, tmp_path):
    out = tmp_path / "accelerate"
    done = subprocess.run(
        _accelerate(tmp_path / "accelerate.yaml", "--multi_gpu", "--num_processes", "2",
                    "--mixed_precision", "no", "-m", "quantformer", "pretrain",
                    "--corpus", str(corpus), "--model", str(no_dropout_bert), *STEPS,
                    "--batch-size", "8", "--out", str(out)),
        env={**os.environ, "OMP_NUM_THREADS": "1"}, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr[-3000:]
    assert done.stdout.count("pretrained ") == 1
    assert _max_diff(_weights(out), _weights(one16)) < 1e-5
    record = encoder_record(out)
    assert record["processes"]["world_size"] == 2 and record["processes"]["backend"] == "gloo"
    assert record["processes"]["batch_size_per_step"] == 16
    assert record["valid_after"]["loss"] == pytest.approx(
        encoder_record(one16)["valid_after"]["loss"], abs=1e-4)


def test_accelerate_launches_the_loop_would_not_follow_are_refused(
        corpus, no_dropout_bert, tmp_path):
    """bf16 mixed precision is accelerate's Accelerator's, which pretrain does not use (it
    trains in fp32); --cpu with several processes starts one unless MPI starts them."""
    common = ["-m", "quantformer", "pretrain", "--corpus", str(corpus), "--model",
              str(no_dropout_bert), *STEPS, "--batch-size", "8"]
    env, config = {**os.environ, "OMP_NUM_THREADS": "1"}, tmp_path / "accelerate.yaml"
    bf16 = subprocess.run(
        _accelerate(config, "--multi_gpu", "--num_processes", "2", "--mixed_precision", "bf16",
                    *common, "--out", str(tmp_path / "bf16")),
        env=env, capture_output=True, text=True)
    assert bf16.returncode != 0
    assert ("accelerate launch --mixed_precision bf16 (ACCELERATE_MIXED_PRECISION=bf16) is a "
            "setting of accelerate's Accelerator, which pretrain does not use: it trains in "
            "fp32") in bf16.stderr
    cpu = subprocess.run(
        _accelerate(config, "--cpu", "--num_processes", "2", "--mixed_precision", "no",
                    *common, "--out", str(tmp_path / "cpu")),
        env=env, capture_output=True, text=True)
    assert cpu.returncode != 0
    assert ("accelerate launch was asked for several processes (it set MASTER_ADDR) but "
            "started one (no WORLD_SIZE)") in cpu.stderr
    assert "accelerate launch --multi_gpu --num_processes N" in cpu.stderr
    assert sorted(p.name for p in tmp_path.iterdir()) == ["accelerate.yaml"]


@pytest.mark.parametrize("env, device, message", [
    ({"OMPI_COMM_WORLD_SIZE": "2"}, "cpu",
     "started by MPI (OMPI_COMM_WORLD_SIZE=2) without WORLD_SIZE and RANK, so each process "
     "would train alone; start the processes with torchrun --nproc_per_node N"),
    ({"WORLD_SIZE": "2"}, "cuda:1",
     "--device cuda:1 names one GPU, but each of the 2 processes takes its own "
     "(cuda:LOCAL_RANK); pass --device cuda or auto"),
    ({"WORLD_SIZE": "2"}, "mps", "--device mps cannot be shared by several processes"),
])
def test_launches_refused_before_any_work(corpus, no_dropout_bert, tmp_path, monkeypatch,
                                          capsys, env, device, message):
    """mpirun sets its own process count but no WORLD_SIZE (each process would train alone);
    a device several processes cannot share. Refused before a process group or a model."""
    monkeypatch.delenv("WORLD_SIZE", raising=False)
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    args = [a for a in STEPS if a not in ("--device", "cpu")]
    assert main(["pretrain", "--corpus", str(corpus), "--model", str(no_dropout_bert), *args,
                 "--device", device, "--out", str(tmp_path / "out")]) == 2
    assert message in capsys.readouterr().err
    assert list(tmp_path.iterdir()) == []
