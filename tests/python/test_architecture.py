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
