"""bench/bench_pretrain.py refuses a bad sweep flag before any work: argparse's exit 2 and a
message naming the flag and the fix; a --base-from JSON scored with other settings is refused
naming the flag with both values."""

import json
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[3]
SCRIPT = REPO / "bench" / "bench_pretrain.py"


def run(*args):
    return subprocess.run([sys.executable, str(SCRIPT), *args], capture_output=True, text=True,
                          env={"PYTHONPATH": str(REPO / "python"), "PATH": "/usr/bin:/bin"},
                          timeout=120)


@pytest.mark.parametrize("args, message", [
    (["--accuracy", "--pretrain-epochs", "0"],
     "argument --pretrain-epochs: must be greater than 0, not 0"),
    (["--accuracy", "--pretrain-batch-size", "0"],
     "argument --pretrain-batch-size: must be greater than 0, not 0"),
    (["--pretrain-lr", "1e-4", "--base-from", "x.json"],
     "--pretrain-lr, --base-from: options of --accuracy; add --accuracy or drop them"),
    (["--accuracy", "--smoke", "--pretrain-lr", "1e-4"],
     "--pretrain-lr: --smoke pretrains 2 steps of 8 documents with pretrain's other defaults; "
     "drop --smoke or these"),
    (["--accuracy", "--base-from", "no-such.json"],
     "--base-from: no file 'no-such.json'; give the --out JSON of an earlier --accuracy run"),
])
def test_bad_flag_refused_before_any_work(args, message):
    done = run(*args)
    assert done.returncode == 2
    assert message in done.stderr


def test_base_from_with_other_settings_is_refused(tmp_path):
    sys.path.insert(0, str(REPO / "bench"))
    try:
        import bench_pretrain as bench
    finally:
        sys.path.remove(str(REPO / "bench"))
    settings = {"model": None, "seeds": [1, 2, 3], "finetune_max_length": 128,
                "setfit_per_class": 16, "zeroshot": bench.ZEROSHOT, "smoke": None,
                "device": "cpu"}
    earlier = tmp_path / "earlier.json"
    earlier.write_text(json.dumps({**settings, "tasks": {"handeset": {"base": {"x": 1}}}}))
    assert bench.base_from(str(earlier), dict(settings)) == {"handeset": {"x": 1}}
    with pytest.raises(SystemExit, match=r"--finetune-max-length \(128 there, None here\)"):
        bench.base_from(str(earlier), {**settings, "finetune_max_length": None})
    with pytest.raises(SystemExit, match=r"--model \(None there, 'other' here\)"):
        bench.base_from(str(earlier), {**settings, "model": "other"})
    (tmp_path / "text.json").write_text("not json")
    with pytest.raises(SystemExit, match="not the --out JSON of an --accuracy run"):
        bench.base_from(str(tmp_path / "text.json"), dict(settings))
