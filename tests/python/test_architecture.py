"""The layers of the core (docs/architecture.md), read from the code: no import circle among
modules (function-local imports included), argparse only in cli/, no function over 80 lines.
import-linter (pyproject.toml, run by scripts/check.sh) checks the layer order itself."""

from __future__ import annotations

import ast
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[2] / "python" / "quantformer"
LIMIT = 80  # lines per function, docstring excluded
ARGPARSE_CALLS = {"add_argument", "add_parser", "add_subparsers", "add_argument_group",
                  "add_mutually_exclusive_group"}


def _modules() -> dict[str, Path]:
    mods = {}
    for f in sorted(PACKAGE.rglob("*.py")):
        parts = list(f.relative_to(PACKAGE.parent).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts = parts[:-1]
        mods[".".join(parts)] = f
    return mods


def _imports(name: str, path: Path, mods: dict) -> set[str]:
    """The package's modules that ``name`` imports anywhere in its code."""
    base = name.split(".") if path.name == "__init__.py" else name.split(".")[:-1]
    out = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.ImportFrom) and node.level:
            target = ".".join(base[:len(base) - node.level + 1] + ([node.module] if node.module
                                                                     else []))
            targets = [f"{target}.{a.name}" for a in node.names] + [target]
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            targets = [a.name for a in node.names] if isinstance(node, ast.Import) \
                else [node.module or ""]
        else:
            continue
        for t in targets:
            while t and t not in mods:
                t = t.rpartition(".")[0]
            if t and t != name and not name.startswith(t + "."):
                out.add(t)
    return out


def _cycle(graph: dict[str, set[str]]) -> list[str]:
    """One import circle of ``graph`` (empty when there is none)."""
    state: dict[str, int] = {}
    stack: list[str] = []

    def visit(v):
        state[v] = 1
        stack.append(v)
        for w in sorted(graph[v]):
            if state.get(w) == 1:
                return stack[stack.index(w):] + [w]
            if w not in state and (found := visit(w)):
                return found
        state[v] = 2
        stack.pop()
        return []

    for v in sorted(graph):
        if v not in state and (found := visit(v)):
            return found
    return []


def test_no_import_circle_among_modules():
    mods = _modules()
    graph = {m: _imports(m, f, mods) for m, f in mods.items()}
    assert _cycle(graph) == []
    # the check can fail: a circle added to a copy of the graph is found
    graph["quantformer._core.errors"] = graph["quantformer._core.errors"] | {"quantformer.cli.main"}
    assert _cycle(graph)[0] == _cycle(graph)[-1]


def test_argparse_only_in_cli():
    users = []
    for name, path in _modules().items():
        if name.startswith("quantformer.cli") or name == "quantformer.__main__":
            continue
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if (isinstance(node, ast.Import) and any(a.name == "argparse" for a in node.names)) \
                    or (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
                        and node.func.attr in ARGPARSE_CALLS):
                users.append(name)
    assert sorted(set(users)) == []


def test_no_function_over_80_lines():
    long = []
    for name, path in _modules().items():
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                n = node.end_lineno - node.lineno + 1
                doc = node.body[0] if node.body else None
                if isinstance(doc, ast.Expr) and isinstance(doc.value, ast.Constant) \
                        and isinstance(doc.value.value, str):
                    n -= doc.end_lineno - doc.lineno + 1
                if n > LIMIT:
                    long.append(f"{name}.{node.name}: {n} lines")
    assert long == []


def test_nothing_imports_cli():
    mods = _modules()
    importers = sorted(m for m, f in mods.items()
                       if not m.startswith("quantformer.cli") and m != "quantformer.__main__"
                       and any(t.startswith("quantformer.cli") for t in _imports(m, f, mods)))
    assert importers == []


# --------------------------------------------------------------------------------------------
# rules import-linter cannot see (issue 32)

HEAVY = {"torch", "transformers", "sklearn", "dask", "distributed", "onnxruntime", "onnx",
         "matplotlib", "captum", "setfit", "sentence_transformers", "xgboost", "scipy",
         "statsmodels", "ppi_py", "krippendorff", "pyreadr", "optimum", "accelerate", "tokenizers",
         "datasets", "selenium", "safetensors", "Stemmer", "importlib"}
ENTRY_POINTS = {"quantformer.__main__"}  # imports the CLI after arranging to die with R


def _resolve(name: str, path: Path, node: ast.ImportFrom) -> str:
    base = name.split(".") if path.name == "__init__.py" else name.split(".")[:-1]
    if node.level:
        return ".".join(base[:len(base) - node.level + 1] + ([node.module] if node.module
                                                             else []))
    return node.module or ""


def _subpackage(module: str) -> str:
    parts = module.split(".")
    return parts[1] if len(parts) > 2 or (len(parts) == 2 and parts[1] != "__main__") else ""


def _package_imports(name: str, path: Path):
    """(node, target module) for every import of a quantformer module in ``name``."""
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.ImportFrom):
            target = _resolve(name, path, node)
            if target == "quantformer" or target.startswith("quantformer."):
                yield node, target
        elif isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name == "quantformer" or alias.name.startswith("quantformer."):
                    yield node, alias.name


def root_importers(mods: dict[str, Path]) -> list[str]:
    """Modules below cli/ that import the package root (``from quantformer import x``)."""
    found = []
    for name, path in mods.items():
        if name == "quantformer" or name.startswith("quantformer.cli") or name in ENTRY_POINTS:
            continue
        found += [name for node, target in _package_imports(name, path) if target == "quantformer"]
    return sorted(set(found))


def private_crossings(mods: dict[str, Path]) -> list[str]:
    """``_private`` names imported from another subpackage: 'importer <- module._name'."""
    found = []
    for name, path in mods.items():
        for node, target in _package_imports(name, path):
            if not isinstance(node, ast.ImportFrom) or _subpackage(target) == _subpackage(name):
                continue
            found += [f"{name} <- {target}.{a.name}" for a in node.names
                      if a.name.startswith("_") and not a.name.startswith("__")]
    return sorted(found)


def late_imports(mods: dict[str, Path]) -> list[str]:
    """Imports of the package's own modules, or of light libraries, that are not at the top of
    their module (inside a function, or after the first definition)."""
    found = []
    for name, path in mods.items():
        if name in ENTRY_POINTS:
            continue
        tree = ast.parse(path.read_text(encoding="utf-8"))
        defs = [n.lineno for n in tree.body
                if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef))]
        first_def = min(defs, default=10**9)
        top = {id(n) for n in tree.body if n.lineno < first_def}
        for node in ast.walk(tree):
            if not isinstance(node, (ast.Import, ast.ImportFrom)) or id(node) in top:
                continue
            if isinstance(node, ast.ImportFrom) and (node.level or (node.module or "").startswith(
                    "quantformer")):
                found.append(f"{name}:{node.lineno}")
    return sorted(found)


def record_file_users(mods: dict[str, Path]) -> list[str]:
    """Modules other than io/modeldir whose code (not docstrings) names ``quantformer.json``."""
    found = []
    for name, path in mods.items():
        if name == "quantformer.io.modeldir":
            continue
        tree = ast.parse(path.read_text(encoding="utf-8"))
        docs = {id(n.body[0].value) for n in ast.walk(tree)
                if isinstance(n, (ast.Module, ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef))
                and n.body and isinstance(n.body[0], ast.Expr)
                and isinstance(n.body[0].value, ast.Constant)}
        for node in ast.walk(tree):
            if isinstance(node, ast.Constant) and isinstance(node.value, str) \
                    and node.value.strip() == "quantformer.json" and id(node) not in docs:
                found.append(f"{name}:{node.lineno}")
    return sorted(found)


def verb_command_lines(mods: dict[str, Path]) -> list[str]:
    """Modules outside cli/ that build the command line of a quantformer verb
    (``[..., "-m", "quantformer", "finetune", ...]``)."""
    verbs = {p.stem for p in (PACKAGE / "cli").glob("*.py") if not p.stem.startswith("_")}
    found = []
    for name, path in mods.items():
        if name.startswith("quantformer.cli"):
            continue
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.List):
                words = [e.value for e in node.elts if isinstance(e, ast.Constant)]
                if "quantformer" in words and any(w in verbs for w in words):
                    found.append(f"{name}:{node.lineno}")
    return found


def test_lower_layers_do_not_import_the_package_root():
    mods = _modules()
    assert root_importers(mods) == []
    # the check can fail: a module of io/ importing the root is found
    fake = PACKAGE.parent / "quantformer" / "io" / "_probe_root.py"
    assert root_importers({"quantformer.io._probe_root": _probe(fake, "from .. import finetune\n")}) \
        == ["quantformer.io._probe_root"]


def test_no_private_name_crosses_a_subpackage():
    mods = _modules()
    assert private_crossings(mods) == []
    probe = _probe(PACKAGE / "infer" / "_probe.py", "from ..io.frames import _x\n")
    assert private_crossings({"quantformer.infer._probe": probe}) == [
        "quantformer.infer._probe <- quantformer.io.frames._x"]


def test_package_imports_at_the_top_of_a_module():
    mods = _modules()
    assert late_imports(mods) == []
    probe = _probe(PACKAGE / "infer" / "_probe.py", "def f():\n    from ..io import frames\n")
    assert late_imports({"quantformer.infer._probe": probe}) == ["quantformer.infer._probe:2"]


def test_only_io_modeldir_names_the_record_file():
    mods = _modules()
    assert record_file_users(mods) == []
    probe = _probe(PACKAGE / "infer" / "_probe.py", 'X = "quantformer.json"\n')
    assert record_file_users({"quantformer.infer._probe": probe}) == ["quantformer.infer._probe:1"]


def test_no_verb_command_line_outside_cli():
    mods = _modules()
    assert verb_command_lines(mods) == []
    probe = _probe(PACKAGE / "label" / "_probe.py",
                   'ARGS = ["python", "-m", "quantformer", "finetune", "--out", "m"]\n')
    assert verb_command_lines({"quantformer.label._probe": probe}) == ["quantformer.label._probe:1"]


#: the owner of how a document is read: the only module that writes its choices and window
READING_OWNER = "quantformer.models.reading"
#: the same words meaning something else there (a value of the rule is (module, constant))
NOT_A_READING = {
    ("quantformer.train.pretrain_run", "head"),  # the warm-up phase that trains the new head
    ("quantformer.train.arguments", 512),  # a bound on the hidden size (SIZE_DEFAULTS)
}


def bare_readings(mods: dict[str, Path]) -> dict[str, list]:
    """Truncation names and the window length written bare outside the owner, per module in
    line order: string constants equal to one of ``TRUNCATIONS`` and the int
    ``DEFAULT_MAX_LENGTH`` used as values. Not counted: docstrings, the field names of
    ``params=[...]``, dict keys and subscripts (record fields), the words inside longer
    strings and f-strings (message text), and :data:`NOT_A_READING`."""
    from quantformer.models.reading import DEFAULT_MAX_LENGTH, TRUNCATIONS

    found: dict[str, list] = {}
    for name, path in mods.items():
        if name == READING_OWNER:
            continue
        tree = ast.parse(path.read_text(encoding="utf-8"))
        skip = {id(n.body[0].value) for n in ast.walk(tree)
                if isinstance(n, (ast.Module, ast.FunctionDef, ast.AsyncFunctionDef,
                                  ast.ClassDef))
                and n.body and isinstance(n.body[0], ast.Expr)
                and isinstance(n.body[0].value, ast.Constant)}
        for node in ast.walk(tree):
            if isinstance(node, ast.keyword) and node.arg == "params":
                skip |= {id(c) for c in ast.walk(node.value)}
            elif isinstance(node, ast.JoinedStr):
                skip |= {id(c) for c in ast.walk(node)}
            elif isinstance(node, ast.Dict):
                skip |= {id(k) for k in node.keys if k is not None}
            elif isinstance(node, ast.Subscript):
                skip.add(id(node.slice))
        hits = sorted((node.lineno, node.col_offset, node.value) for node in ast.walk(tree)
                      if isinstance(node, ast.Constant) and id(node) not in skip
                      and ((isinstance(node.value, str) and node.value in TRUNCATIONS)
                           or (type(node.value) is int and node.value == DEFAULT_MAX_LENGTH))
                      and (name, node.value) not in NOT_A_READING)
        if hits:
            found[name] = [value for _, _, value in hits]
    return found


def test_no_bare_truncation_name_or_window_length_outside_the_reading():
    found = bare_readings(_modules())
    assert found == {}
    probe = _probe(PACKAGE / "infer" / "_probe.py",
                   '"""Cut with "head_tail"."""\n'
                   'def f(x, truncation="head_tail", max_length=512):\n'
                   '    raise E("{truncation} chunks", params=["chunks"], d={"tail": x[\'head\']})\n')
    assert bare_readings({"quantformer.infer._probe": probe}) == {
        "quantformer.infer._probe": ["head_tail", 512]}


#: the resolved precisions (models/precision.PRECISION_USES lists them with ``auto``)
PRECISION_NAMES = {"fp32", "bf16", "fp16"}


def _names_precision(node) -> bool:
    return any(isinstance(n, ast.Constant) and n.value in PRECISION_NAMES for n in ast.walk(node))


def precision_resolvers(mods: dict[str, Path]) -> list[str]:
    """Functions outside models/precision that map ``"auto"`` to a precision: they compare a
    value with ``"auto"`` and return (or pick by a conditional expression) a precision's name."""
    found = []
    for name, path in mods.items():
        if name == "quantformer.models.precision":
            continue
        for fn in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if not isinstance(fn, (ast.FunctionDef, ast.AsyncFunctionDef)):
                continue
            inner = list(ast.walk(fn))
            auto = any(isinstance(n, ast.Compare) and any(
                isinstance(c, ast.Constant) and c.value == "auto"
                for c in (n.left, *n.comparators)) for n in inner)
            picks = any(isinstance(n, ast.Return) and n.value is not None
                        and _names_precision(n.value)
                        or isinstance(n, ast.IfExp) and _names_precision(n) for n in inner)
            if auto and picks:
                found.append(f"{name}:{fn.name}")
    return sorted(set(found))


def precision_lists(mods: dict[str, Path]) -> list[str]:
    """Tuple, list or set constants outside models/precision holding both ``"fp32"`` and
    ``"bf16"``: a second list of the precision choices."""
    found = []
    for name, path in mods.items():
        if name == "quantformer.models.precision":
            continue
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, (ast.Tuple, ast.List, ast.Set)):
                words = {e.value for e in node.elts if isinstance(e, ast.Constant)}
                if {"fp32", "bf16"} <= words:
                    found.append(f"{name}:{node.lineno}")
    return found


def test_one_precision_choice_and_one_list():
    mods = _modules()
    assert precision_resolvers(mods) == []
    assert precision_lists(mods) == []
    # the checks can fail: a second resolver and a second list of choices are found
    probe = _probe(PACKAGE / "train" / "_probe.py",
                   'PRECISIONS = ("auto", "fp32", "bf16")\n\n\n'
                   'def resolve(precision):\n'
                   '    if precision == "auto":\n'
                   '        return "bf16" if fast() else "fp32"\n'
                   '    return precision\n')
    assert precision_resolvers({"quantformer.train._probe": probe}) == [
        "quantformer.train._probe:resolve"]
    assert precision_lists({"quantformer.train._probe": probe}) == ["quantformer.train._probe:1"]


def _probe(path: Path, text: str):
    """A stand-in for a module file whose text is ``text`` (nothing is written)."""

    class Probe:
        name = path.name

        def read_text(self, encoding="utf-8"):
            return text

    return Probe()


def test_architecture_page_names_every_module():
    """docs/architecture.md's module map is the one scripts/module_map.py makes from the tree,
    so a new module without a line there (or a stale line) fails."""
    import importlib.util

    spec = importlib.util.spec_from_file_location(
        "module_map", PACKAGE.parents[1] / "scripts" / "module_map.py")
    module_map = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module_map)
    page = module_map.current()
    assert page == module_map.render()
    for name in _modules():
        if name.count(".") >= 2:  # quantformer.<subpackage>.<module>
            sub, _, rest = name.partition(".")[2].partition(".")
            assert f"`{sub}/{rest.replace('.', '/')}`" in page, name
        elif name.count(".") == 1 and (PACKAGE / f"{name.partition('.')[2]}.py").is_file() \
                and name != "quantformer.__main__":  # the root's module paths of earlier releases
            assert f"`quantformer/{name.partition('.')[2]}`" in page, name
    # the check can fail: a module left off the page is found
    assert "`infer/_probe`" not in page


def test_tests_mirror_the_layers():
    """tests/python has a folder per subpackage of the core, and a test module at the top only
    for the whole package (architecture, column names, packaging, CI skips, import paths kept
    for a release)."""
    here = Path(__file__).resolve().parent
    subpackages = {p.name for p in PACKAGE.iterdir() if p.is_dir() and (p / "__init__.py").exists()}
    folders = {p.name for p in here.iterdir() if p.is_dir() and p.name != "__pycache__"}
    assert folders <= subpackages
    assert {p.name for p in here.glob("test_*.py")} == {
        "test_architecture.py", "test_packaging.py", "test_ci_skips.py",
        "test_deprecated_paths.py", "test_column_names.py"}


# --------------------------------------------------------------------------------------------
# one owner per setting, engines apart (issue 44)

MODULE_LIMIT = 500  # lines per module


def long_modules(mods: dict[str, Path]) -> list[str]:
    """Modules over :data:`MODULE_LIMIT` lines."""
    return sorted(f"{name}: {n}" for name, path in mods.items()
                  if (n := len(path.read_text(encoding="utf-8").splitlines())) > MODULE_LIMIT)


def test_no_module_over_500_lines():
    assert long_modules(_modules()) == []
    probe = _probe(PACKAGE / "infer" / "_probe.py", "x = 1\n" * (MODULE_LIMIT + 1))
    assert long_modules({"quantformer.infer._probe": probe}) == [
        f"quantformer.infer._probe: {MODULE_LIMIT + 1}"]


#: model classes whose construction loads weights (``SentenceTransformer(path)``)
LOADING_CLASSES = ("SentenceTransformer", "SetFitModel")


def from_pretrained_users(mods: dict[str, Path]) -> list[str]:
    """Calls of ``from_pretrained``, and constructions of :data:`LOADING_CLASSES`, outside the
    models layer (docstrings and text do not count: only a call of an attribute of that name,
    or of that class by name or attribute)."""
    found = []
    for name, path in mods.items():
        if name.startswith("quantformer.models"):
            continue
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if not isinstance(node, ast.Call):
                continue
            called = (node.func.attr if isinstance(node.func, ast.Attribute) else
                      node.func.id if isinstance(node.func, ast.Name) else None)
            if called == "from_pretrained" and isinstance(node.func, ast.Attribute) \
                    or called in LOADING_CLASSES:
                found.append(f"{name}:{node.lineno}")
    return sorted(found)


def test_models_are_loaded_through_the_models_layer():
    assert from_pretrained_users(_modules()) == []
    probe = _probe(PACKAGE / "infer" / "_probe.py", "m = AutoModel.from_pretrained('x')\n")
    assert from_pretrained_users({"quantformer.infer._probe": probe}) == [
        "quantformer.infer._probe:1"]
    probe = _probe(PACKAGE / "train" / "_probe.py",
                   "st = SentenceTransformer('x')\nm = setfit.SetFitModel(body, head)\n"
                   "'SentenceTransformer(x) in text'\n")
    assert from_pretrained_users({"quantformer.train._probe": probe}) == [
        "quantformer.train._probe:1", "quantformer.train._probe:2"]
