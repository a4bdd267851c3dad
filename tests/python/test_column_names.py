"""The names of the label, prediction and probability columns have one home: io/columns.py.

Every other module reads them from there (``LABEL_COLUMN``, ``PREDICTED_COLUMN``,
``prob_column()``, ``PROB_PREFIX``), so a renamed column is renamed everywhere and a word that
means something else (the field of an LLM's JSON answer, a kind of behavioural test) is a
constant of its own, named for what it is."""

from __future__ import annotations

import ast
from pathlib import Path

from test_architecture import _modules, _probe

#: the words that name an output's or a corpus frame's columns
COLUMN_WORDS = {"label", "predicted"}
#: the prefix of the probability columns
PROB_WORD = "prob_"
#: the module-level constants allowed to hold one of the words: (module, constant)
OWNERS = {
    ("quantformer.io.columns", "LABEL_COLUMN"),
    ("quantformer.io.columns", "PREDICTED_COLUMN"),
    ("quantformer.io.columns", "PROB_PREFIX"),
    # the field of the JSON answer an LLM is asked for (``{"label": L}``)
    ("quantformer.models.llm_probs", "ANSWER_FIELD"),
    # the kind of behavioural test that expects a label (minimum functionality)
    ("quantformer.audit.behave", "EXPECT_LABEL"),
    # the field of a behavioural tests file that gives that label
    ("quantformer.audit.behave", "LABEL_FIELD"),
    # the verb of the --precision help: near ties are "predicted" again in fp32
    ("quantformer.cli._options", "RECHECK_VERB"),
}


#: calls whose second argument is an attribute's name, not a column's
ATTRIBUTE_CALLS = {"getattr", "hasattr", "setattr"}
#: calls whose first argument is text shown on a plot
TEXT_CALLS = {"set_xlabel", "set_ylabel", "set_title"}


def _docstrings(tree) -> set[int]:
    return {id(n.body[0].value) for n in ast.walk(tree)
            if isinstance(n, (ast.Module, ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef))
            and n.body and isinstance(n.body[0], ast.Expr)
            and isinstance(n.body[0].value, ast.Constant)}


def _owned(name: str, tree) -> set[int]:
    return {id(n.value) for n in tree.body
            if isinstance(n, ast.Assign) and len(n.targets) == 1
            and isinstance(n.targets[0], ast.Name) and (name, n.targets[0].id) in OWNERS}


def bare_columns(mods: dict[str, Path]) -> dict[str, list]:
    """Column names written bare, per module in line order: string constants equal to
    ``"label"`` or ``"predicted"`` or starting with ``"prob_"``, f-strings that start with
    ``prob_``, and ``.assign(label=...)``/``.assign(predicted=...)`` keywords. Not counted:
    docstrings, the words inside longer strings (message text), attribute names
    (``getattr(x, "label")``), a plot's axis titles, and the constants of :data:`OWNERS`."""
    found: dict[str, list] = {}
    for name, path in mods.items():
        tree = ast.parse(path.read_text(encoding="utf-8"))
        skip = _docstrings(tree) | _owned(name, tree)
        for node in ast.walk(tree):
            if isinstance(node, ast.Call) and (
                    isinstance(node.func, ast.Name) and node.func.id in ATTRIBUTE_CALLS
                    or isinstance(node.func, ast.Attribute) and node.func.attr in TEXT_CALLS):
                at = 1 if isinstance(node.func, ast.Name) else 0
                skip |= {id(a) for a in node.args[at:at + 1]}
        hits = []
        for node in ast.walk(tree):
            if isinstance(node, ast.Constant) and id(node) not in skip and isinstance(
                    node.value, str) and (node.value in COLUMN_WORDS
                                          or node.value.startswith(PROB_WORD)):
                hits.append((node.lineno, node.col_offset, node.value))
            elif isinstance(node, ast.JoinedStr) and node.values and isinstance(
                    node.values[0], ast.Constant) and str(node.values[0].value).startswith(
                    PROB_WORD):
                skip |= {id(c) for c in ast.walk(node)}
                hits.append((node.lineno, node.col_offset, f"f{node.values[0].value}"))
            elif isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) \
                    and node.func.attr == "assign":
                hits += [(node.lineno, node.col_offset, f"{k.arg}=") for k in node.keywords
                         if k.arg in COLUMN_WORDS]
        if hits:
            found[name] = [value for _, _, value in sorted(hits)]
    return found


def test_column_names_only_in_io_columns():
    assert bare_columns(_modules()) == {}
    probe = _probe(PACKAGE_PROBE, '"""The "label" column."""\n'
                                  'LABEL = "label"\n'
                                  'def f(df, lab):\n'
                                  '    """Read "predicted"."""\n'
                                  '    x = df["predicted"], df[f"prob_{lab}"], "no label here"\n'
                                  '    ax.set_xlabel("predicted"), getattr(df, "label")\n'
                                  '    return df.assign(label=1), "prob_x"\n')
    assert bare_columns({"quantformer.infer._probe": probe}) == {
        "quantformer.infer._probe": ["label", "predicted", "fprob_", "label=", "prob_x"]}


PACKAGE_PROBE = Path("python/quantformer/infer/_probe.py")
