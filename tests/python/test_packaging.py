"""`python -m build` gives a wheel and an sdist that carry every module the CLI needs (#11).

Built without build isolation (no network in tests) from a copy of what the R tarball also
carries (pyproject.toml, README.md, python/), so the working tree gets no build/ or egg-info.
Installing the wheel into a fresh environment and running verbs is the CI user-path test
(scripts/check-user-path.sh).
"""

from __future__ import annotations

import os
import re
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


#: folders and files of tools' caches that a checkout may hold beside the code
CACHES = [".import_linter_cache/cache.json", ".pytest_cache/v/cache/nodeids",
          ".mypy_cache/3.12/x.json", ".ruff_cache/0.1/x", "quantformer/__pycache__/cli.cpython-312.pyc",
          "quantformer/io/stale.pyc", "quantformer/.ipynb_checkpoints/x.py"]
CACHE_NAMES = re.compile(r"(^|/)(\.[\w-]*cache|__pycache__|\.ipynb_checkpoints)(/|$)|\.py[co]$")


def _checkout_with_caches(tmp_path) -> Path:
    """A copy of the checkout (no .git, no .venv) whose python/ holds every cache of CACHES."""
    copy = tmp_path / "repo"
    shutil.copytree(REPO, copy, symlinks=True,
                    ignore=shutil.ignore_patterns(".git", ".venv", "*.Rcheck", "site", "runs",
                                                  "quantformer_*.tar.gz"))
    for rel in CACHES:
        f = copy / "python" / rel
        f.parent.mkdir(parents=True, exist_ok=True)
        f.write_text("{}")
    return copy


def _pycore_names(tarball: Path) -> list[str]:
    with tarfile.open(tarball) as tar:
        return [n for n in tar.getnames() if n.startswith("quantformer/inst/pycore/python/")]


@pytest.mark.skipif(shutil.which("R") is None, reason="R is not installed")
def test_r_tarball_leaves_caches_out(tmp_path):
    """The R tarball's copy of the core (inst/pycore/python) carries no tool cache when the
    checkout has them: neither scripts/build-tarball.sh (what scripts/check-r.sh builds) nor a
    plain `R CMD build` of the checkout (.Rbuildignore) puts one in."""
    copy = _checkout_with_caches(tmp_path)
    out = tmp_path / "out"
    out.mkdir()
    done = subprocess.run(["bash", str(copy / "scripts" / "build-tarball.sh"), str(out),
                           "--no-build-vignettes", "--no-manual"],
                          capture_output=True, text=True, check=True)
    staged = _pycore_names(Path(done.stdout.strip()))
    assert "quantformer/inst/pycore/python/quantformer/cli/main.py" in staged
    assert [n for n in staged if CACHE_NAMES.search(n)] == []
    plain = tmp_path / "plain"
    plain.mkdir()
    subprocess.run(["R", "CMD", "build", "--no-build-vignettes", "--no-manual", str(copy)],
                   cwd=plain, capture_output=True, text=True, check=True)
    built = _pycore_names(next(plain.glob("quantformer_*.tar.gz")))
    assert "quantformer/inst/pycore/python/quantformer/cli/main.py" in built
    assert [n for n in built if CACHE_NAMES.search(n)] == []
    # and scripts/check-tarball.sh (run by scripts/check-r.sh) refuses a tarball that has one
    bad = tmp_path / "bad" / "quantformer_0.0.0.tar.gz"
    bad.parent.mkdir()
    with tarfile.open(Path(done.stdout.strip())) as src, tarfile.open(bad, "w:gz") as dst:
        for member in src.getmembers():
            dst.addfile(member, src.extractfile(member) if member.isfile() else None)
        extra = tmp_path / "cache.json"
        extra.write_text("{}")
        dst.add(extra, "quantformer/inst/pycore/python/.import_linter_cache/cache.json")
    res = subprocess.run(["bash", str(REPO / "scripts" / "check-tarball.sh"), str(bad)],
                         capture_output=True, text=True)
    assert res.returncode == 1
    assert "inst/pycore/python/.import_linter_cache/cache.json" in res.stdout


def test_check_r_passes_only_ok_or_notes():
    """scripts/check-r.sh's verdict on R CMD check's last Status line: OK or NOTEs only."""
    verdicts = {}
    for status in ["Status: OK", "Status: 1 NOTE", "Status: 3 NOTEs", "Status: 1 WARNING",
                   "Status: 1 ERROR", "Status: 1 ERROR, 1 WARNING, 2 NOTEs", ""]:
        res = subprocess.run(["bash", "-c", 'source "$0"; check_status_ok "$1"',
                              str(REPO / "scripts" / "check-r.sh"), status])
        verdicts[status] = res.returncode == 0
    assert verdicts == {"Status: OK": True, "Status: 1 NOTE": True, "Status: 3 NOTEs": True,
                        "Status: 1 WARNING": False, "Status: 1 ERROR": False,
                        "Status: 1 ERROR, 1 WARNING, 2 NOTEs": False, "": False}
