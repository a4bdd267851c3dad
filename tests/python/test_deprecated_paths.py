"""Module paths that earlier documentation showed stay importable for one release, with a
DeprecationWarning naming the new path (issue 36, item 25)."""

from __future__ import annotations

import importlib
import subprocess
import sys

import pytest

# every `quantformer.` module path any earlier vignette or doc showed that has since moved
MOVED = {
    "quantformer.datasets": ("quantformer.io.datasets", "split_by_group"),
    "quantformer.frames": ("quantformer.io.frames", "to_frame"),
    "quantformer.label.room.codebook": ("quantformer.io.codebook", "make_codebook"),
    "quantformer.label.room.finetune_now": ("quantformer.room.finetune_now", "FinetuneNow"),
    "quantformer.label.room.loop": ("quantformer.room.loop", "Room"),
    "quantformer.label.room.machine": ("quantformer.room.machine", "add_machine_coder"),
    "quantformer.label.room.server": ("quantformer.room.server", "RoomServer"),
    "quantformer.label.room.store": ("quantformer.room.store", "Store"),
    "quantformer.onnx_recheck": ("quantformer.models.onnx.recheck", None),
    "quantformer.infer.explain": ("quantformer.audit.explain", "explain"),
    "quantformer.infer.explain_check": ("quantformer.audit.explain_check", "check"),
    "quantformer.infer.explain_forward": ("quantformer.audit.explain_forward", "forward_for"),
    "quantformer.infer.explain_words": ("quantformer.audit.explain_words", "words_of"),
    "quantformer.infer.behave": ("quantformer.audit.behave", "run_tests"),
    "quantformer.infer.rules": ("quantformer.cli._rules", "caller_rules"),
    "quantformer.train.scoring": ("quantformer.select.scoring", "make_scoring"),
}


@pytest.mark.parametrize("old", sorted(MOVED))
def test_old_module_paths_import_with_a_warning_naming_the_new_path(old):
    new, name = MOVED[old]
    sys.modules.pop(old, None)
    with pytest.warns(DeprecationWarning, match=f"{old} is deprecated.*import from {new}"):
        shim = importlib.import_module(old)
    target = importlib.import_module(new)
    public = [n for n in dir(target) if not n.startswith("_")]
    assert public and all(getattr(shim, n) is getattr(target, n) for n in public)
    if name is not None:
        assert getattr(shim, name) is getattr(target, name)


def test_the_python_vignettes_earlier_import_runs_in_a_fresh_process():
    code = ("import warnings; warnings.simplefilter('always')\n"
            "from quantformer.datasets import split_by_group\n"
            "from quantformer.io.datasets import split_by_group as new\n"
            "assert split_by_group is new")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         timeout=120)
    assert out.returncode == 0, out.stderr
    assert "quantformer.io.datasets" in out.stderr and "DeprecationWarning" in out.stderr


def test_the_room_store_path_keeps_the_export_that_left_it():
    import quantformer.room.export as export

    sys.modules.pop("quantformer.label.room.store", None)
    with pytest.warns(DeprecationWarning):
        shim = importlib.import_module("quantformer.label.room.store")
    assert all(getattr(shim, n) is getattr(export, n)
               for n in ("EXPORT_COLUMNS", "export_codes", "final_codes"))
