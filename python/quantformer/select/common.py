"""What tune and compare share: the results folder and its one ``save()``, lists of grid
values, training sizes and seeded samples, the comparison's result and its table (Wankmüller
2022, Table 1 and Figure 10)."""

from __future__ import annotations

import contextlib
import math
import os
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pandas as pd

from .._core.atomic import atomic_dir, write_json
from .._core.errors import InputError
from ..io.columns import LABEL_COLUMN
from ..io.writable import check_results_dir
from ..io.writing import write_figure, write_frame
from .compare_llm import is_llm_row

# --------------------------------------------------------------------------------------------
# the results folder

@contextlib.contextmanager
def results_dir(out: str | os.PathLike, overwrite: bool = False):
    """Write a results folder atomically: ``with results_dir(out) as tmp: <write into tmp>``.

    The files are written into a temporary sibling folder (``.<name>.*.part``) that replaces
    ``out`` only when the ``with`` block ends without an error, as
    :func:`quantformer.io.modeldir.write_model_dir` does for model directories. So no file of an
    earlier run survives an ``overwrite``, and an error or interruption leaves the old folder
    (or nothing) as it was.

    Args:
        out: the folder to write.
        overwrite: replace an existing non-empty folder (default False).

    Raises:
        InputError: see :func:`check_results_dir` (checked before the block runs).
    """
    target = Path(os.path.abspath(check_results_dir(out, overwrite)))
    with atomic_dir(target) as tmp:
        yield tmp


def write_table(df: pd.DataFrame, out_dir: Path, stem: str, kinds=("csv", "rds")) -> None:
    """Write ``df`` as ``out_dir/stem.csv`` and ``.rds`` (atomically)."""
    for k in kinds:
        write_frame(df, out_dir / f"{stem}.{k}")


def parse_list(text: str | None, kind, name: str) -> list | None:
    """Parse a comma-separated list of positive numbers (``"1e-5,2e-5"``).

    Args:
        text: the list, or None (returned as it is).
        kind: ``int`` or ``float``.
        name: the parameter that holds the list (``lrs``), named in errors; a flag spelling
            (``--train-sizes``) names the same parameter (``train_sizes``).

    Raises:
        InputError: an item that is not a ``kind`` greater than 0, or no item at all.
    """
    if text is None:
        return None
    name = name.lstrip("-").replace("-", "_")
    out = []
    for item in str(text).split(","):
        item = item.strip()
        try:
            v = kind(item)
        except ValueError:
            v = None
        if v is None or not v > 0 or (kind is float and not math.isfinite(v)):
            what = "whole numbers" if kind is int else "numbers"
            raise InputError(f"{{{name}}} must be comma-separated {what} greater than 0; "
                             f"'{item}' is not", params=[name])
        out.append(v)
    if not out:
        raise InputError(f"{{{name}}} is empty", params=[name])
    return out


def format_seconds(s: float) -> str:
    """``"45 s"``, ``"12 min"``, ``"2 h 05 min"``."""
    if s < 90:
        return f"{s:.0f} s"
    if s < 5400:
        return f"{s / 60:.0f} min"
    return f"{int(s // 3600)} h {int(s % 3600 // 60):02d} min"


class SavedResult:
    """A result that writes itself as a results folder: :meth:`save` writes what
    :meth:`write_files` puts into the folder, atomically (:func:`results_dir`)."""

    def write_files(self, folder: Path) -> None:  # pragma: no cover - each result has its own
        raise NotImplementedError

    def save(self, out: str | os.PathLike, overwrite: bool = False) -> Path:
        """Write the results into folder ``out`` (the files :meth:`write_files` names),
        atomically: an error leaves an existing ``out`` as it was, and ``overwrite`` keeps no
        earlier file.

        Args:
            out: the results folder (str or path).
            overwrite: replace an existing non-empty ``out`` (default False).

        Returns:
            The path of the folder.

        Raises:
            InputError: ``out`` is a file, or a non-empty folder and ``overwrite`` is False.
        """
        with results_dir(out, overwrite) as d:
            self.write_files(d)
        return Path(out)


#: table column prefix of each selection metric (``f1_mean_500``, ``rmse_mean_500``)
PREFIX = {"macro_f1": "f1", "rmse": "rmse"}
METRIC_LABEL = {"macro_f1": "macro-F1", "rmse": "RMSE"}
TRANSFORMERS = ("default", "setfit", "nli")  # fine-tuned: standard, SetFit, NLI (opt-in)


def check_sizes(sizes, n_train: int) -> list[int]:
    """Validate training sizes against the number of labelled training documents.

    ``None`` means one size: all ``n_train`` documents.

    Raises:
        InputError: a size that is not a whole number > 0, or larger than ``n_train``.
    """
    if sizes is None:
        return [n_train]
    if isinstance(sizes, str):
        sizes = parse_list(sizes, int, "train_sizes")
    out = []
    for s in sizes:
        if isinstance(s, bool) or not float(s) == int(s) or int(s) <= 0:
            raise InputError(f"{{train_sizes}} must be whole numbers greater than 0, not "
                             f"{s!r}", params=["train_sizes"])
        out.append(int(s))
    too_big = [s for s in out if s > n_train]
    if too_big:
        raise InputError(
            f"{{train_sizes}} {', '.join(map(str, too_big))} "
            f"{'is' if len(too_big) == 1 else 'are'} larger than the {n_train} labelled "
            f"training documents; use sizes up to {n_train}, or leave {{train_sizes}} out to "
            "train on all of them", params=["train_sizes"])
    return sorted(set(out))


def draw_sample(data: pd.DataFrame, size: int, repeat: int, seed: int,
                stratify: bool = True) -> pd.DataFrame:
    """A stratified random sample of ``size`` rows, the same for the same (seed, size, repeat).

    All rows (in order) when ``size`` equals their number. Falls back to a plain random sample
    when a class is too small to stratify, or when ``stratify`` is False (regression and
    multi-label, whose classes are not defined).
    """
    from sklearn.model_selection import train_test_split

    if size >= len(data):
        return data.reset_index(drop=True)
    state = int(np.random.SeedSequence([int(seed), int(size), int(repeat)]).generate_state(1)[0])
    idx = np.arange(len(data))
    try:
        if not stratify:
            raise ValueError("plain sample")
        keep, _ = train_test_split(idx, train_size=size, stratify=data[LABEL_COLUMN].to_numpy(),
                                   random_state=state)
    except ValueError:
        keep, _ = train_test_split(idx, train_size=size, random_state=state)
    return data.iloc[np.sort(keep)].reset_index(drop=True)


@dataclass
class CompareResult(SavedResult):
    """What :func:`compare` returns; :meth:`save` writes results.csv/.rds, table.csv/.rds,
    table.md, figure10.png and summary.json.

    Attributes:
        results: long table, one row per model x train_size x repeat: ``model``,
            ``train_size``, ``repeat`` (1-based), ``macro_f1``, ``accuracy``, ``seconds``.
        table: wide Table-1 table, one row per model (in ``models`` order): ``model``,
            ``description``, then per size ``s``: ``f1_mean_s``, ``f1_min_s``, ``f1_max_s``,
            ``seconds_s`` (mean training seconds).
        runs: per run, the hyperparameters used or chosen by CV (list of dicts).
        summary: settings, counts and per size the best conventional model and the
            Transformer's margin over it (language-model rows are not conventional models);
            with an LLM, ``summary["llm"]`` (model, endpoint, shots, labels, zero-shot prompt
            hash).
    """

    results: pd.DataFrame
    table: pd.DataFrame
    runs: list = field(default_factory=list)
    summary: dict = field(default_factory=dict)

    def markdown(self, digits: int = 3) -> str:
        """The table as Markdown: ``mean (min–max)`` per size, then mean training seconds."""
        sizes = self.summary["train_sizes"]
        metric = self.summary.get("metric", "macro_f1")
        pre = PREFIX[metric]
        head = "| model | " + " | ".join(f"n = {s:,}" for s in sizes) + " | train s |"
        lines = [head, "|---" * (len(sizes) + 2) + "|"]
        for _, row in self.table.iterrows():
            cells = []
            for s in sizes:
                m, lo, hi = row[f"{pre}_mean_{s}"], row[f"{pre}_min_{s}"], row[f"{pre}_max_{s}"]
                cells.append(f"{m:.{digits}f} ({lo:.{digits}f}–{hi:.{digits}f})"
                             if lo != hi else f"{m:.{digits}f}")
            secs = np.mean([row[f"seconds_{s}"] for s in sizes])
            lines.append(f"| {row['model']}: {row['description']} | " + " | ".join(cells)
                         + f" | {secs:.0f} |")
        rep = self.summary.get("repeats")
        lines.append("")
        lines.append(f"{METRIC_LABEL[metric]} on the test set ({self.summary.get('n_test')} "
                     "documents), mean "
                     f"and (min–max) over {rep} draw(s) of each training size; train s = mean "
                     "training seconds (baselines include their CV tuning).")
        if self.summary.get("nli"):
            lines.append("")
            lines.append(nli_note(self.summary["nli"]))
        if self.summary.get("llm"):
            lines.append("")
            lines.append("llm rows: a language model coding the test documents from the "
                         "codebook (zero-shot, or k-shot from the training sample's codes), "
                         "not trained; their train s are the seconds of coding the test "
                         "documents.")
        return "\n".join(lines)

    def plot(self, path, title: str | None = None) -> Path:
        """Figure 10 of the paper: macro-F1 (regression: RMSE) against training size, min–max
        bands per model."""
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt

        sizes = self.summary["train_sizes"]
        metric = self.summary.get("metric", "macro_f1")
        pre, name = PREFIX[metric], METRIC_LABEL[metric]
        fig, ax = plt.subplots(figsize=(6.4, 4.2))
        for _, row in self.table.iterrows():
            mean = [row[f"{pre}_mean_{s}"] for s in sizes]
            lo = [row[f"{pre}_min_{s}"] for s in sizes]
            hi = [row[f"{pre}_max_{s}"] for s in sizes]
            line, = ax.plot(sizes, mean, marker="o", label=row["model"])
            ax.fill_between(sizes, lo, hi, color=line.get_color(), alpha=0.2, linewidth=0)
            if len(sizes) == 1:
                ax.errorbar(sizes, mean, yerr=[[m - a for m, a in zip(mean, lo)],
                                               [b - m for m, b in zip(mean, hi)]],
                            color=line.get_color(), capsize=4)
        ax.set_xlabel("training documents")
        ax.set_ylabel(f"{name} (test set)")
        ax.set_xticks(sizes)
        ax.grid(alpha=0.3)
        ax.legend(fontsize="small")
        ax.set_title(title or f"{name} by training size (mean, min–max band)")
        fig.tight_layout()
        return write_figure(fig, path)

    def write_files(self, d: Path) -> None:
        """results.csv/.rds, table.csv/.rds, table.md, figure10.png, summary.json."""
        write_table(self.results, d, "results")
        write_table(self.table, d, "table")
        (d / "table.md").write_text(self.markdown() + "\n", encoding="utf-8")
        self.plot(d / "figure10.png", title=self.summary.get("title"))
        write_json({**self.summary, "runs": self.runs}, d / "summary.json")


def build_table(results: pd.DataFrame, models: list[str], descriptions: dict,
                metric: str = "macro_f1") -> pd.DataFrame:
    """The wide Table-1 frame from the long results (see :class:`CompareResult`)."""
    rows, pre = [], PREFIX[metric]
    for m in models:
        row = {"model": m, "description": descriptions[m]}
        for s in sorted(results["train_size"].unique()):
            r = results[(results["model"] == m) & (results["train_size"] == s)]
            row[f"{pre}_mean_{s}"] = r[metric].mean()
            row[f"{pre}_min_{s}"] = r[metric].min()
            row[f"{pre}_max_{s}"] = r[metric].max()
            row[f"seconds_{s}"] = r["seconds"].mean()
        rows.append(row)
    return pd.DataFrame(rows)


def margins(results: pd.DataFrame, metric: str = "macro_f1",
            higher_is_better: bool = True) -> dict:
    """Per training size: mean ``metric`` of each model, the best conventional model, and the
    Transformer's margin over it (None when either is absent). The margin is positive when the
    Transformer is better: its macro-F1 minus the baseline's, or for RMSE the baseline's
    minus its."""
    out = {}
    sign = 1 if higher_is_better else -1
    means = results.groupby(["train_size", "model"])[metric].mean()
    for s in sorted(results["train_size"].unique()):
        m = means.loc[s].to_dict()
        conv = {k: v for k, v in m.items() if k not in TRANSFORMERS and not is_llm_row(k)}
        best = max(conv, key=lambda k: sign * conv[k]) if conv else None
        out[str(s)] = {
            f"mean_{metric}": m,
            "best_conventional": best,
            "transformer_margin": sign * (m["default"] - conv[best]) if best and "default" in m
            else None,
        }
    return out


def nli_note(options: dict) -> str:
    """The line under the Markdown table naming the ``nli`` model's hypotheses and pairs."""
    phrases = "; ".join(f"{c}: '{options['hypothesis'].format(p)}'"
                        for c, p in options["label_phrases"].items())
    return (f"nli: hypothesis template '{options['hypothesis']}', class hypotheses {phrases}; "
            f"training pairs {options['nli_pairs']}.")
