"""Issue 27, point 5: an output that cannot be written is refused before any work, exit 2."""

from __future__ import annotations

import shutil
import subprocess
import time

import pytest
from toydata import toy_frame

from quantformer.cli import main as cli

pytestmark = pytest.mark.skipif(shutil.which("chattr") is None,
                                reason="needs chattr (e2fsprogs): root ignores chmod, so only "
                                       "an immutable folder is read-only for every user")


@pytest.fixture
def locked(tmp_path):
    """A folder nobody can write into (chattr +i), and a toy corpus beside it."""
    folder = tmp_path / "locked"
    folder.mkdir()
    toy_frame(20).to_csv(tmp_path / "docs.csv", index=False)
    toy_frame(20).assign(doc_id=lambda f: f["doc_id"] + "b").to_csv(tmp_path / "docs2.csv",
                                                                     index=False)
    subprocess.run(["chattr", "+i", str(folder)], check=True)
    yield folder
    subprocess.run(["chattr", "-i", str(folder)], check=True)


def _verbs(docs, model, out):
    docs2 = docs.replace("docs.csv", "docs2.csv")
    return {
        "finetune": ["finetune", "--train", docs, "--model", model, "--out", f"{out}/m"],
        "predict": ["predict", "--model", model, "--input", docs, "--out", f"{out}/p.csv"],
        "embed": ["embed", "--model", model, "--input", docs, "--out", f"{out}/e.parquet"],
        "tokenize": ["tokenize", "--model", model, "--input", docs, "--out", f"{out}/t.csv"],
        "tune": ["tune", "--train", docs, "--model", model, "--out", f"{out}/tune"],
        "compare": ["compare", "--train", docs, "--test", docs, "--model", model,
                    "--train-sizes", "10", "--out", f"{out}/cmp"],
        "evaluate": ["evaluate", "--pred", docs, "--truth-col", "label",
                     "--out", f"{out}/r.json"],
        "partitioned": ["embed", "--model", model, "--input", docs, docs2,
                        "--out", f"{out}/parts"],
    }


@pytest.mark.parametrize("verb", ["finetune", "predict", "embed", "tokenize", "tune", "compare",
                                  "evaluate", "partitioned"])
def test_unwritable_output_is_refused_first(verb, locked, tiny_bert_dir, capsys):
    args = _verbs(str(locked.parent / "docs.csv"), str(tiny_bert_dir), locked)[verb]
    start = time.monotonic()
    assert cli.main(args) == 2
    err = capsys.readouterr().err
    assert f"cannot be written: the folder '{locked}' is read-only" in err
    assert "make it writable or choose another --out" in err
    assert time.monotonic() - start < 5  # nothing trained or loaded first
    assert list(locked.iterdir()) == []


def test_inside_a_file_is_refused(tmp_path, tiny_bert_dir, capsys):
    (tmp_path / "f").write_text("x")
    toy_frame(20).to_csv(tmp_path / "docs.csv", index=False)
    assert cli.main(["finetune", "--train", str(tmp_path / "docs.csv"), "--model",
                     str(tiny_bert_dir), "--out", str(tmp_path / "f" / "m")]) == 2
    assert f"is inside '{tmp_path / 'f'}', which is a file" in capsys.readouterr().err
