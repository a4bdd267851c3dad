"""Under CI=true a skipped test fails the run unless it names a GPU (conftest.py's hook), and
the shared-data fixture fails instead of skipping (issue 27, point 13)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

HERE = Path(__file__).parent

SKIPPING = '''
import pytest

def test_needs_a_tool():
    pytest.skip("needs a tool")

def test_needs_a_gpu():
    pytest.skip("needs a CUDA GPU")

def test_runs():
    pass
'''

SHARED = '''
def test_uses_the_data(shared_data):
    pass
'''


def _pytest(tmp_path, code: str, name: str, **env):
    test = tmp_path / f"test_{name}.py"
    test.write_text(code)
    # this folder's conftest.py loaded as a plugin: its fixtures and hooks, outside its folder
    run_env = {k: v for k, v in os.environ.items() if k not in ("CI", "QUANTFORMER_SHARED_DATA")}
    run_env.update(env, PYTHONPATH=os.pathsep.join([str(HERE), *sys.path]))
    return subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider",
                           "-p", "conftest", str(test)], cwd=tmp_path, env=run_env,
                          capture_output=True, text=True, timeout=120)


def test_a_skip_fails_under_ci_unless_it_names_a_gpu(tmp_path):
    local = _pytest(tmp_path, SKIPPING, "skips")
    assert local.returncode == 0, local.stdout
    ci = _pytest(tmp_path, SKIPPING, "skips", CI="true")
    assert ci.returncode == 1
    listed = ci.stdout.split("skipped under CI=true")[1]
    assert "test_needs_a_tool: Skipped: needs a tool" in listed
    assert "test_needs_a_gpu" not in listed
    assert "1 passed, 2 skipped" in ci.stdout


def test_shared_data_absent_fails_under_ci(tmp_path):
    absent = str(tmp_path / "no-data")
    local = _pytest(tmp_path, SHARED, "shared", QUANTFORMER_SHARED_DATA=absent)
    assert local.returncode == 0 and "1 skipped" in local.stdout
    ci = _pytest(tmp_path, SHARED, "shared", QUANTFORMER_SHARED_DATA=absent, CI="true")
    assert ci.returncode == 1
    assert f"real data folder {absent} absent under CI=true" in ci.stdout


@pytest.mark.parametrize("reason, fails", [("needs chattr", True), ("needs a GPU", False),
                                           ("CUDA only", False)])
def test_which_reasons_ci_allows(reason, fails):
    from conftest import ci_forbidden_skip

    assert ci_forbidden_skip(reason) is fails
