"""Further pretraining (issue 33): masked LM and TSDAE encoders, their folders, bad inputs."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from quantformer._core.errors import ModelDirError
from quantformer.cli.main import main
from quantformer.io.modeldir import encoder_record, read_record
from quantformer.train.pretrain import pretrain
from quantformer.train.pretrain_tsdae import delete_words
from tiny_models import TINY_CORPUS
from toydata import toy_frame

TINY = {"batch_size": 16, "max_length": 48, "quiet": True, "device": "cpu"}


@pytest.fixture(scope="module")
def corpus(tmp_path_factory) -> Path:
    texts = [f"{t} number {i}" for i, t in enumerate(TINY_CORPUS * 2)][:160]
    path = tmp_path_factory.mktemp("corpus") / "corpus.parquet"
    pd.DataFrame({"doc_id": [f"u{i}" for i in range(160)], "text": texts}).to_parquet(path)
    return path


@pytest.fixture(scope="module")
def mlm_encoder(corpus, tiny_bert_dir, tmp_path_factory) -> tuple[Path, dict]:
    out = tmp_path_factory.mktemp("enc") / "mlm"
    record = pretrain(corpus, out, str(tiny_bert_dir), max_steps=3, head_steps=2, **TINY)
    return out, record


def test_mlm_encoder_record_and_head_warmup(mlm_encoder, corpus, tiny_bert_dir):
    out, record = mlm_encoder
    on_disk = encoder_record(out)
    assert on_disk["kind"] == "encoder" and on_disk["objective"] == "mlm"
    assert on_disk["corpus"]["n_docs"] == 160 and on_disk["corpus"]["n_valid"] == 8
    assert on_disk["corpus"]["n_train"] == 152 and on_disk["corpus"]["n_tokens"] > 160 * 5
    # a base BertModel has no MLM head: a new one, warmed up with the encoder frozen
    assert on_disk["head_warmup"] == {"new_head": True, "steps": 2, "lr": 5e-4,
                                      "encoder_frozen": True}
    before, after = on_disk["valid_before"], on_disk["valid_after"]
    assert before["masked_tokens"] == after["masked_tokens"] > 0  # the same held-out masks
    assert before["perplexity"] == pytest.approx(np.exp(before["loss"]), rel=1e-3)
    assert before["loss"] != after["loss"]
    assert "Gururangan" in on_disk["objective_reason"]
    # the masked-LM class has no pooler, and the folder none (fine-tuning makes a new one, as
    # after run_mlm.py); the encoder's own weights are all there
    from safetensors import safe_open

    with safe_open(str(Path(out) / "model.safetensors"), "pt") as f:
        keys = list(f.keys())
    assert not [k for k in keys if "pooler" in k]
    assert any(k.endswith("encoder.layer.0.attention.self.query.weight") for k in keys)
    with pytest.raises(ModelDirError, match="encoder written by `quantformer pretrain`"):
        read_record(out)


def test_head_steps_for_a_pretrained_head_are_not_used_and_said_so(mlm_encoder, corpus,
                                                                    tmp_path):
    """The encoder of a masked-LM run has its head: pretraining it again has no new head to
    warm up, so the head_steps given are not used, and a warning says so."""
    from quantformer._core.errors import ParamWarning

    with pytest.warns(ParamWarning, match="head_steps 2 not used: '.*' has a pretrained "
                                          "masked-LM head"):
        record = pretrain(corpus, tmp_path / "again", str(mlm_encoder[0]), max_steps=1,
                          head_steps=2, **TINY)
    assert record["head_warmup"] == {"new_head": False}
    assert record["settings"]["head_steps"] == 0
    assert record["settings"]["requested"]["head_steps"] == 2


def test_finetune_and_embed_accept_an_encoder(mlm_encoder, tmp_path, capsys):
    from transformers import AutoModelForSequenceClassification

    out, _ = mlm_encoder
    train = tmp_path / "train.csv"
    toy_frame(24).to_csv(train, index=False)
    assert main(["finetune", "--train", str(train), "--model", str(out), "--epochs", "1",
                 "--quiet", "--device", "cpu", "--out", str(tmp_path / "clf")]) == 0
    clf = read_record(tmp_path / "clf")
    assert clf["labels"] == ["econ", "other"]
    AutoModelForSequenceClassification.from_pretrained(tmp_path / "clf")
    assert main(["embed", "--input", str(train), "--model", str(out), "--device", "cpu",
                 "--quiet", "--out", str(tmp_path / "e.parquet")]) == 0
    assert len(pd.read_parquet(tmp_path / "e.parquet")["embedding"][0]) == 32


def test_tsdae_writes_a_sentence_transformer(corpus, tiny_bert_dir, tmp_path, capsys, caplog):
    from sentence_transformers import SentenceTransformer

    out = tmp_path / "tsdae"
    assert main(["pretrain", "--corpus", str(corpus), "--model", str(tiny_bert_dir),
                 "--objective", "tsdae", "--max-steps", "2", "--batch-size", "16",
                 "--max-length", "48", "--quiet", "--device", "cpu", "--out", str(out)]) == 0
    said = capsys.readouterr()
    assert "held-out loss" in said.out and "tsdae" in said.out
    # --quiet: no line from sentence-transformers (it logged one about the tied decoder)
    assert said.err == ""
    assert [r.getMessage() for r in caplog.records if r.name.startswith("sentence_trans")] == []
    record = encoder_record(out)
    assert record["objective"] == "tsdae" and record["head_warmup"] == {"new_head": False}
    assert (out / "modules.json").is_file()
    vec = SentenceTransformer(str(out), device="cpu").encode(["a text"])
    assert vec.shape == (1, 32)
    train = tmp_path / "train.csv"
    toy_frame(8).assign(label=["econ"] * 4 + ["other"] * 4).to_csv(train, index=False)
    assert main(["finetune", "--method", "setfit", "--model", str(out), "--train", str(train),
                 "--setfit-iterations", "1", "--quiet", "--device", "cpu",
                 "--out", str(tmp_path / "sf")]) == 0
    assert read_record(tmp_path / "sf")["method"] == "setfit"
    assert main(["zeroshot", "--method", "embedding", "--model", str(out), "--input",
                 str(train), "--labels", "economy,other", "--quiet", "--device", "cpu",
                 "--out", str(tmp_path / "z.csv")]) == 0
    assert set(pd.read_csv(tmp_path / "z.csv")["predicted"]) <= {"economy", "other"}
    # auto chooses masked LM for a sentence-transformers folder too, and says why
    again = pretrain(corpus, tmp_path / "auto", str(out), max_steps=1, **TINY)
    assert again["objective"] == "mlm" and "-0.023" in again["objective_reason"]


def test_delete_words_keeps_forty_percent():
    rng = np.random.default_rng(1)
    text = " ".join(f"w{i}" for i in range(1000))
    kept = delete_words(text, rng).split()
    assert 350 < len(kept) < 450 and set(kept) <= set(text.split())
    assert delete_words("one", np.random.default_rng(0)) == "one"


def _cli(*args: str) -> list[str]:
    return [sys.executable, "-m", "quantformer", "pretrain", *args]


def test_resume_after_a_killed_process_gives_the_same_encoder(corpus, tiny_bert_dir, tmp_path):
    from safetensors.numpy import load_file

    common = ["--corpus", str(corpus), "--model", str(tiny_bert_dir), "--max-steps", "40",
              "--head-steps", "0", "--checkpoint-every", "5", "--batch-size", "16",
              "--max-length", "48", "--quiet", "--device", "cpu"]
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    killed = tmp_path / "killed"
    proc = subprocess.Popen(_cli(*common, "--out", str(killed)), env=env)
    mark = tmp_path / "killed.checkpoint" / "checkpoint.json"
    while not mark.exists() and proc.poll() is None:
        time.sleep(0.05)
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    assert not killed.exists() or proc.returncode == 0
    subprocess.run(_cli(*common, "--out", str(killed), "--resume"), env=env, check=True)
    whole = tmp_path / "whole"
    subprocess.run(_cli(*common, "--out", str(whole)), env=env, check=True)
    a, b = load_file(killed / "model.safetensors"), load_file(whole / "model.safetensors")
    assert a.keys() == b.keys()
    for k in a:
        np.testing.assert_allclose(a[k], b[k], atol=1e-6)
    assert not (tmp_path / "killed.checkpoint").exists()
    assert encoder_record(killed)["valid_after"] == encoder_record(whole)["valid_after"]


def _gpt2(tmp_path: Path) -> Path:
    from transformers import GPT2Config

    folder = tmp_path / "gpt"
    GPT2Config(n_layer=1, n_embd=8, n_head=2).save_pretrained(folder)
    return folder


@pytest.mark.parametrize("extra, message", [
    (["--mask-prob", "1.5"], "--mask-prob must be between 0 and 1"),
    (["--mask-prob", "0"], "--mask-prob must be between 0 and 1"),
    (["--max-length", "1000"], "limit of 512 tokens; use --max-length 512 or less (pretraining "
                               "reads the first --max-length tokens of each document)"),
    (["--model", "GPT"], "has no masked-LM encoder architecture"),
    (["--corpus", "SMALL"], "has only 99 documents with text (of 99)"),
    (["--corpus", "EMPTY"], "has 150 documents and every text is empty"),
    (["--out", "EXISTS"], "exists and is not an encoder folder written by `quantformer "
                          "pretrain`; choose another --out"),
    (["--out", "EXISTS", "--resume"], "exists and is not an encoder folder"),
    (["--out", "DONE"], "is a finished encoder already; to pretrain again, delete it or "
                        "choose another --out"),
    (["--out", "LEFT"], "left a checkpoint in '"),
    (["--out", "LEFT"], "pass --resume to continue it, or delete that folder to start over"),
    (["--buffer-docs", "0"], "argument --buffer-docs: must be greater than 0"),
])
def test_bad_inputs_exit_2_before_any_work(corpus, tiny_bert_dir, mlm_encoder, tmp_path, capsys,
                                           extra, message):
    small, empty = tmp_path / "small.csv", tmp_path / "empty.csv"
    pd.DataFrame({"text": [f"text {i}" for i in range(99)]}).to_csv(small, index=False)
    pd.DataFrame({"text": [""] * 150}).to_csv(empty, index=False)
    (tmp_path / "exists").mkdir()
    (tmp_path / "left.checkpoint").mkdir()
    names = {"GPT": str(_gpt2(tmp_path)), "SMALL": str(small), "EMPTY": str(empty),
             "EXISTS": str(tmp_path / "exists"), "DONE": str(mlm_encoder[0]),
             "LEFT": str(tmp_path / "left")}
    args = {"--corpus": str(corpus), "--model": str(tiny_bert_dir),
            "--out": str(tmp_path / "enc")}
    extra = [names.get(x, x) for x in extra]
    for flag in list(args):
        if flag in extra:
            del args[flag]
    argv = ["pretrain", *[x for kv in args.items() for x in kv], *extra, "--quiet"]
    assert main(argv) == 2
    assert message in capsys.readouterr().err
    assert not (tmp_path / "enc").exists() and not (tmp_path / "enc.checkpoint").exists()


def test_out_not_writable(corpus, tiny_bert_dir, tmp_path, capsys):
    blocker = tmp_path / "a_file"
    blocker.write_text("x")
    assert main(["pretrain", "--corpus", str(corpus), "--model", str(tiny_bert_dir),
                 "--out", str(blocker / "enc"), "--quiet"]) == 2
    assert "--out" in capsys.readouterr().err


def test_a_plain_text_corpus_warns_of_its_encoding_once_and_never_of_ids(tiny_bert_dir,
                                                                         tmp_path, capsys):
    texts = [f"Grüße number {i} of the corpus" for i in range(120)]
    plain = tmp_path / "uncoded.txt"
    plain.write_bytes("\n".join(texts).encode("cp1252"))
    assert main(["pretrain", "--corpus", str(plain), "--model", str(tiny_bert_dir),
                 "--max-steps", "1", "--head-steps", "0", "--batch-size", "16",
                 "--max-length", "48", "--quiet", "--device", "cpu",
                 "--out", str(tmp_path / "enc")]) == 0
    err = capsys.readouterr().err
    assert "no id column" not in err and "text1" not in err
    assert err.count("is not valid UTF-8; read it as cp1252") == 1


def test_documents_longer_than_max_length_are_counted_and_warned_of_once(tiny_bert_dir,
                                                                          tmp_path, capsys):
    texts = [f"item {i} " + "the committee met " * (1 + i % 3 * 6) for i in range(120)]
    corpus = tmp_path / "long.parquet"
    pd.DataFrame({"text": texts}).to_parquet(corpus)
    from transformers import AutoTokenizer

    tok = AutoTokenizer.from_pretrained(str(tiny_bert_dir))
    longer = sum(len(x) > 24 for x in tok(texts)["input_ids"])
    assert 0 < longer < 120
    assert main(["pretrain", "--corpus", str(corpus), "--model", str(tiny_bert_dir),
                 "--max-steps", "1", "--head-steps", "0", "--batch-size", "16",
                 "--max-length", "24", "--device", "cpu", "--out", str(tmp_path / "enc")]) == 0
    said = capsys.readouterr()
    share = round(100 * longer / 120)
    assert said.err.count(f"{longer} of 120 documents ({share}%) are longer than --max-length "
                          "24 tokens: pretraining reads the first 24 tokens of each document "
                          "and leaves the rest; a larger --max-length (up to the model's") == 1
    assert encoder_record(tmp_path / "enc")["corpus"]["n_truncated"] == longer
    assert "further on 114 documents (6 more held out for the loss; mlm:" in said.out


def test_resume_of_a_finished_encoder_says_only_that_there_is_nothing_to_do(
        corpus, tiny_bert_dir, mlm_encoder, capsys):
    # mlm_encoder: --max-steps 3 --head-steps 2 --batch-size 16 --max-length 48
    same = ["pretrain", "--corpus", str(corpus), "--model", str(tiny_bert_dir), "--out",
            str(mlm_encoder[0]), "--resume", "--max-steps", "3", "--head-steps", "2",
            "--max-length", "48", "--device", "cpu"]
    assert main([*same, "--batch-size", "16"]) == 0
    said = capsys.readouterr().out
    assert said.strip() == f"{mlm_encoder[0]} is already an encoder of this corpus; nothing to do"
    # other settings: refused, the changed one named (as a checkpoint of other settings is)
    assert main([*same, "--batch-size", "8"]) == 2
    said = capsys.readouterr()
    assert said.out == ""
    assert "made with other settings (--batch-size 16 vs 8 now)" in said.err


def test_a_checkpoint_of_other_settings_names_only_those_asked_for(corpus, tiny_bert_dir,
                                                                   tmp_path, capsys):
    out = tmp_path / "enc"
    common = ["--corpus", str(corpus), "--model", str(tiny_bert_dir), "--out", str(out),
              "--max-steps", "40", "--head-steps", "0", "--checkpoint-every", "5",
              "--max-length", "48", "--quiet", "--device", "cpu"]
    proc = subprocess.Popen(_cli(*common, "--batch-size", "16"),
                            env={**os.environ, "OMP_NUM_THREADS": "1"})
    mark = tmp_path / "enc.checkpoint" / "checkpoint.json"
    while not mark.exists() and proc.poll() is None:
        time.sleep(0.05)
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    assert mark.exists() and not out.exists()
    # epochs follows from --max-steps and --batch-size: not named, though it differs too
    assert main(["pretrain", *common, "--batch-size", "8", "--resume"]) == 2
    err = capsys.readouterr().err
    assert "other settings (--batch-size 16 vs 8 now)" in err and "epochs" not in err


def test_tsdae_encoder_keeps_the_base_window_and_pooling(corpus, tiny_bert_dir, tmp_path):
    """Issue 33: the TSDAE encoder trained at 48 tokens keeps its base's max_seq_length (40)
    for embed, zeroshot and SetFit, and its vectors are the sentence transformer's own (mean
    pooling, as the base)."""
    from sentence_transformers import SentenceTransformer

    import quantformer
    from quantformer.infer.embed import default_max_length, load_encoder

    st = SentenceTransformer(str(tiny_bert_dir), device="cpu")
    st.max_seq_length = 40
    st.save(str(tmp_path / "base"))
    out = tmp_path / "tsdae"
    pretrain(corpus, out, str(tmp_path / "base"), objective="tsdae", max_steps=1, **TINY)
    adapted = SentenceTransformer(str(out), device="cpu")
    assert adapted.max_seq_length == 40
    assert default_max_length(load_encoder(str(out), "cpu")) == 40
    assert adapted[1].get_config_dict()["pooling_mode"] == "mean"
    frame = toy_frame(8).assign(label=["econ"] * 4 + ["other"] * 4)
    ours = quantformer.embed(frame, model=str(out), device="cpu", quiet=True, normalize=False,
                            precision="fp32")  # auto is bf16 on CPUs with AVX-512 BF16
    theirs = adapted.encode(frame["text"].tolist())
    assert np.allclose(ours, theirs, atol=1e-4)  # padding of other batch shapes
    clf = quantformer.finetune(frame, model=str(out), method="setfit", setfit_iterations=1,
                               quiet=True, device="cpu")
    assert clf.record["hyperparameters"]["max_length"] == 40
    shot = quantformer.zeroshot(frame, ["economy", "other"], model=str(out), method="embedding",
                                device="cpu", quiet=True)
    assert shot.attrs["quantformer"]["max_length"] == 40


def test_the_cut_warning_names_a_fix_that_fits_the_model_limit():
    from types import SimpleNamespace

    from quantformer.train.pretrain import _warn_cut

    data = SimpleNamespace(n_cut=3, n_docs=200)
    for limit, fix in ((None, "; a larger max_length reads more of them"),
                       (512, "; a larger max_length (up to the model's 512) reads more"),
                       (128, "; split longer documents into parts (paragraphs)")):
        with pytest.warns(UserWarning) as seen:
            _warn_cut(data, 128, limit)
        text = str(seen[0].message)
        assert text.startswith("3 of 200 documents (2%) are longer than max_length 128 "
                               "tokens: pretraining reads the first 128 tokens")
        assert fix in text and "None" not in text
