"""`python -m build` gives a wheel and an sdist that carry every module the CLI needs (#11).

Built without build isolation (no network in tests) from a copy of what the R tarball also
carries (pyproject.toml, README.md, python/), so the working tree gets no build/ or egg-info.
Installing the wheel into a fresh environment and running verbs is the CI user-path test
(scripts/check-user-path.sh).
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tarfile
import zipfile
from pathlib import Path

import pytest

from quantformer.cli.main import VERB_MODULES

REPO = Path(__file__).resolve().parents[2]
PACKAGE = REPO / "python" / "quantformer"


@pytest.fixture(scope="module")
def dist(tmp_path_factory) -> Path:
    src = tmp_path_factory.mktemp("src")
    shutil.copy(REPO / "pyproject.toml", src)
    shutil.copy(REPO / "README.md", src)
    shutil.copytree(REPO / "python", src / "python",
                    ignore=shutil.ignore_patterns("__pycache__", "*.pyc", "*.egg-info"))
    out = tmp_path_factory.mktemp("dist")
    res = subprocess.run([sys.executable, "-m", "build", "--wheel", "--sdist", "--no-isolation",
                          "--outdir", str(out), str(src)], capture_output=True, text=True,
                         env=dict(os.environ, PIP_NO_INDEX="1"), timeout=600)
    assert res.returncode == 0, res.stdout[-3000:] + res.stderr[-3000:]
    return out


def _modules() -> set[str]:
    """Every module, and the coding room's page (package data: HTML, script, style)."""
    static = [p for p in (PACKAGE / "room" / "static").iterdir()]
    assert {p.suffix for p in static} == {".html", ".js", ".css"}
    return {p.relative_to(PACKAGE.parent).as_posix() for p in [*PACKAGE.rglob("*.py"), *static]
            if "__pycache__" not in p.parts}


def test_wheel_carries_every_module_and_the_console_script(dist):
    wheels = list(dist.glob("quantformer-*-py3-none-any.whl"))
    assert len(wheels) == 1
    with zipfile.ZipFile(wheels[0]) as z:
        names = set(z.namelist())
        entry = next(n for n in names if n.endswith(".dist-info/entry_points.txt"))
        scripts = z.read(entry).decode()
        meta = z.read(next(n for n in names if n.endswith(".dist-info/METADATA"))).decode()
    assert _modules() <= names, sorted(_modules() - names)
    for verb_module in VERB_MODULES + ["quantformer.cli.main", "quantformer.__main__"]:
        assert verb_module.replace(".", "/") + ".py" in names
    assert "quantformer = quantformer.cli.main:main" in scripts
    assert not any(n.startswith("tests/") for n in names)
    assert "Provides-Extra: all" in meta and "Requires-Dist: torch" in meta


def test_sdist_carries_pyproject_and_the_package_not_the_tests(dist):
    sdists = list(dist.glob("quantformer-*.tar.gz"))
    assert len(sdists) == 1
    with tarfile.open(sdists[0]) as t:
        names = {n.split("/", 1)[1] for n in t.getnames() if "/" in n}
    assert "pyproject.toml" in names
    assert {f"python/{m}" for m in _modules()} <= names
    assert not any(n.startswith("tests/") or "__pycache__" in n for n in names)


def test_r_tarball_without_vignettes_says_where_they_are_issue27(tmp_path):
    """The README's build (--no-build-vignettes) gives a tarball without knitted vignettes, so
    R's vignette index is empty: the build says so and where to read them."""
    done = subprocess.run(["bash", str(REPO / "scripts" / "build-tarball.sh"), str(tmp_path),
                           "--no-build-vignettes", "--no-manual"],
                          capture_output=True, text=True, check=True)
    tarball = Path(done.stdout.strip())
    with tarfile.open(tarball) as tar:
        names = tar.getnames()
    assert "quantformer/vignettes/findings.Rmd" in names
    assert not any(n.startswith("quantformer/inst/doc/") for n in names)
    assert "quantformer/build/vignette.rds" not in names
    assert ("note: the vignettes were not built, so vignette(package = \"quantformer\") lists "
            "none: read them in vignettes/") in done.stderr
    assert "once quantformer_install() has run, rebuild without --no-build-vignettes" \
        in done.stderr
