"""`python -m build` gives a wheel and an sdist that carry every module the CLI needs (#11).

Built without build isolation (no network in tests) from a copy of what the R tarball also
carries (pyproject.toml, README.md, python/), so the working tree gets no build/ or egg-info.
Installing the wheel into a fresh environment and running verbs is the CI user-path test
(scripts/check-user-path.sh).

Then the R tarball: what scripts/build-tarball.sh and a plain R CMD build put in it (the core,
no tool caches), the verdict scripts/check-r.sh draws from R CMD check, and the vignettes it
ships (every R export shown running, the Python vignette on the public API).
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

import quantformer
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
        # sourced with $0 not the script, so its main (a whole R CMD check) does not run
        res = subprocess.run(["bash", "-c", 'source "$1"; check_status_ok "$2"', "verdict",
                              str(REPO / "scripts" / "check-r.sh"), status], timeout=60)
        verdicts[status] = res.returncode == 0
    assert verdicts == {"Status: OK": True, "Status: 1 NOTE": True, "Status: 3 NOTEs": True,
                        "Status: 1 WARNING": False, "Status: 1 ERROR": False,
                        "Status: 1 ERROR, 1 WARNING, 2 NOTEs": False, "": False}


# --------------------------------------------------------------------------------------------
# The vignettes the R tarball ships: every function the R package exports is shown in one,
# running, where a researcher would look for it; the Python vignette uses the public API only
# (what quantformer/__init__.py exports). "Shown" means called (``name(``) in an R chunk of
# vignettes/*.Rmd that is both run and echoed: not ``eval = FALSE``, ``include = FALSE`` or
# ``echo = FALSE``. A chunk whose ``eval`` is an expression (``eval = run``,
# ``eval = requireNamespace(...)``) runs when R CMD check knits the vignettes with the Python
# core, so it counts as run.

VIGNETTES = sorted((REPO / "vignettes").glob("*.Rmd"))

#: shown in a vignette, but only in a chunk that is not run, for the reason given
SHOWN_NOT_RUN = {
    "annotate_llm": "needs an instruction-tuned language model of useful quality (gigabytes)",
    "annotate_files": "needs an instruction-tuned language model of useful quality (gigabytes)",
    "code_documents": "the coding room is a server that waits for coders in a browser",
    "read_codes": "reads the codes of a coding-room session (the chunk above it)",
}
#: exported but shown nowhere, for the reason given
NOT_SHOWN = {
    "textmodel_behaviour": "the old name of textstat_behaviour(), deprecated (it warns)",
}

_CHUNK = re.compile(r"^```\{(\w+)([^}]*)\}[ \t]*\n(.*?)^```", re.M | re.S)
_OFF = re.compile(r"\b(eval|include|echo)\s*=\s*(FALSE|F)\b")


def _exports() -> list[str]:
    text = (REPO / "NAMESPACE").read_text(encoding="utf-8")
    return re.findall(r"^export\((\w+)\)", text, re.M)


def _chunks(engine: str):
    """(vignette name, options, code, whether it is run and shown) of every chunk of ``engine``."""
    for path in VIGNETTES:
        for eng, opts, code in _CHUNK.findall(path.read_text(encoding="utf-8")):
            if eng == engine:
                yield path.name, opts, code, not _OFF.search(opts)


def _calls(name: str, code: str) -> bool:
    return re.search(rf"(?<![\w.:$]){re.escape(name)}\(", code) is not None


def _where(name: str, shown: bool) -> list[str]:
    return sorted({v for v, _, code, run in _chunks("r") if run == shown and _calls(name, code)})


def test_chunk_reader_tells_run_from_not_run_chunks():
    chunks = list(_chunks("r"))
    assert len(VIGNETTES) >= 7 and len(chunks) > 50
    run = {(v, opts.strip()) for v, opts, _, r in chunks if r}
    assert ("quantformer.Rmd", "finetune") in run
    assert ("findings.Rmd", "annotate, eval = FALSE") not in run
    assert ("quantformer.Rmd", "setup, include = FALSE") not in run
    assert ("quantformer.Rmd", 'quanteda, eval = requireNamespace("quanteda", quietly = TRUE)') \
        in run


def test_every_exported_r_function_is_shown_running_in_a_vignette():
    exports = _exports()
    assert "textmodel_finetune" in exports and len(exports) > 30
    assert set(SHOWN_NOT_RUN) | set(NOT_SHOWN) <= set(exports), "an exception that is no export"
    missing = [f for f in exports
               if f not in SHOWN_NOT_RUN and f not in NOT_SHOWN and not _where(f, True)]
    assert missing == [], f"exported, but run in no vignette chunk: {missing}"
    unshown = [f for f in SHOWN_NOT_RUN if not _where(f, True) and not _where(f, False)]
    assert unshown == [], f"exported, but shown in no vignette at all: {unshown}"


def test_python_vignette_imports_the_public_api_only():
    public = set(quantformer.__all__)
    code = "\n".join(c for _, _, c, _ in _chunks("python"))
    assert "import quantformer as qf" in code
    deep = re.findall(r"^\s*(?:from|import)\s+(quantformer\.[\w.]+)", code, re.M)
    assert deep == [], f"imports below the package root: {deep}"
    used = set(re.findall(r"\bqf\.(\w+)", code))
    assert used and used <= public, f"not exported by quantformer/__init__.py: {used - public}"
