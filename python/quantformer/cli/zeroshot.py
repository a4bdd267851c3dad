"""``quantformer zeroshot``: classify with label descriptions only (NLI entailment or
embedding similarity)."""

from __future__ import annotations

import pandas as pd

from pathlib import Path

from .._core.errors import InputError
from .._core.show import print_table
from ..infer.zeroshot import (
    CALIBRATIONS,
    DEFAULT_HYPOTHESIS,
    METHOD_CHOICES,
    METHOD_NAMES,
    check_hypothesis,
    check_labels,
    zeroshot,
)
from ..io.columns import PREDICTED_COLUMN
from ..io.formats import read_text_file
from ..io.writing import write_frame, write_output_record
from ..io.writable import check_output_file
from ..io.frames import read_frame
from ..models.reading import CHUNKS
from ..models.tokenize import warn_truncated
from ..scale.dask import describe as describe_partitions
from ..scale.dask import zeroshot_partitions
from ._options import (
    add_chunk_options,
    add_corpus_options,
    add_model_option,
    chunk_kwargs,
    add_partition_options,
    add_precision_option,
    add_run_options,
    RECHECK,
    corpus_kwargs,
    max_length_arg,
    partitioned,
    positive,
    print_precision,
    refuse_partitioned_chunks_out,
)


def add_cli(sub) -> None:
    p = sub.add_parser(
        "zeroshot",
        help="classify with label descriptions only (NLI entailment or embedding similarity)",
        description="Zero-shot classification (Wankmüller 2022, Appendix J). Each label is "
                    "filled into --hypothesis. NLI models (an 'entailment' label in their "
                    "config) score premise-hypothesis pairs like Hugging Face's zero-shot "
                    "pipeline; other encoders, including the default all-MiniLM-L6-v2, use "
                    "embedding similarity (cosine of mean-pooled embeddings, standardised per "
                    "label over the corpus). Output: doc_id, docvars, predicted, prob_<label>, "
                    "zeroshot_method.",
    )
    add_partition_options(p)
    add_corpus_options(p, label=False)
    g = p.add_mutually_exclusive_group(required=True)
    g.add_argument("--labels", help="comma-separated label phrases, e.g. "
                                    "'in favor of,neutral toward,against'")
    g.add_argument("--labels-file", help="text file with one label phrase a line")
    p.add_argument("--hypothesis", default=DEFAULT_HYPOTHESIS,
                   help="template with one {} for the label (default: 'This text is about {}.')")
    add_model_option(p, "; NLI models such as facebook/bart-large-mnli use the NLI method")
    p.add_argument("--method", default="auto", choices=METHOD_CHOICES,
                   help="auto (NLI when the model has an entailment label, else embedding), "
                        "nli or embedding")
    p.add_argument("--multi-label", action="store_true",
                   help="score each label on its own (probabilities need not sum to 1)")
    p.add_argument("--batch-size", type=positive(int), default=32,
                   help="inputs per forward pass at most (32; fewer for long inputs: at most "
                        "4096 padded tokens per pass)")
    p.add_argument("--max-length", type=max_length_arg, default=None,
                   help="token limit per input (NLI: 512 or the model's limit; embedding: the "
                        "model's sentence-transformers max_seq_length, 256 for the default)")
    p.add_argument("--calibration", default=None, choices=CALIBRATIONS,
                   help="embedding method: per-label calibration of cosines over the corpus "
                        "(standardise); not with the NLI method")
    p.add_argument("--temperature", type=positive(float), default=None,
                   help="embedding method: softmax temperature (1 when standardised, else 0.05); "
                        "not with the NLI method")
    add_run_options(p)
    add_chunk_options(p, training=False)
    add_precision_option(p, detail=RECHECK.format(done="scored") + "; auto keeps --multi-label "
                                   "runs in fp32")
    p.set_defaults(func=run)


def _options(args) -> dict:
    """The keyword arguments that zeroshot() and zeroshot_partitions() share."""
    return {"model": args.model, "method": args.method, "multi_label": args.multi_label,
            "batch_size": args.batch_size, "max_length": args.max_length,
            "truncation": args.truncation, "device": args.device, "quiet": args.quiet,
            "calibration": args.calibration, "temperature": args.temperature,
            "keep_text": args.keep_text, "backend": args.backend, "quantize": args.quantize,
            "precision": args.precision,
            **{k: v for k, v in chunk_kwargs(args).items() if v is not None}}


def run(args) -> int:
    labels = read_label_descriptions(args.labels_file) if args.labels_file else args.labels
    if partitioned(args):
        refuse_partitioned_chunks_out(args)
        print(describe_partitions(zeroshot_partitions(
            args.input, args.out, labels, args.hypothesis, scheduler=args.scheduler,
            resume=args.resume, **_options(args), **corpus_kwargs(args, label=False))))
        return 0
    check_output_file(args.out)
    hypothesis = check_hypothesis(args.hypothesis)
    labels = check_labels(labels, args.multi_label)
    frame = read_frame(args.input, **corpus_kwargs(args, label=False))
    result = zeroshot(frame, labels, hypothesis, chunks_out=args.chunks_out, **_options(args))
    meta = result.attrs["quantformer"]
    print(describe(meta))
    print_precision(meta["precision"])
    if meta["truncation"] != CHUNKS:  # max_chunks warns as the windows are made
        warn_truncated(meta["n_truncated"], meta["n_docs"], meta["max_length"],
                       meta["truncation"])
    print_table(_counts(result, labels), floatfmt="{:.3f}")
    write_frame(result, args.out)
    write_output_record(args.out, "zeroshot", meta["precision"], model=meta["model"],
                        input=str(args.input), documents=len(result), method=meta["method"],
                        n_rechecked=meta.get("n_rechecked"), chunks_out=args.chunks_out)
    print(f"wrote {len(result)} rows to {args.out}")
    return 0


def _counts(result: pd.DataFrame, labels: list[str]) -> pd.DataFrame:
    """Documents and share per predicted label, in ``labels`` order."""
    counts = result[PREDICTED_COLUMN].value_counts().reindex(labels, fill_value=0)
    return pd.DataFrame({"documents": counts.to_numpy(),
                         "share": counts.to_numpy() / max(1, int(counts.sum()))},
                        index=pd.Index(labels, name=PREDICTED_COLUMN))


def read_label_descriptions(path: str | Path) -> list[str]:
    """Labels from a UTF-8 text file (``--labels-file``), one a line; blank lines are skipped.

    Raises:
        InputError: the file is missing.
    """
    p = Path(path)
    if not p.is_file():
        raise InputError(f"labels file not found: '{path}'")
    return [ln.strip() for ln in read_text_file(p).split("\n") if ln.strip()]


def describe(meta: dict) -> str:
    """One line naming the method and its settings (what the CLI prints), from a result's
    ``attrs["quantformer"]``."""
    if meta["method"] == METHOD_NAMES["nli"]:
        how = (f"{meta['method']} ({meta['n_pairs']} premise-hypothesis pairs, "
               f"{'independent entailment vs contradiction per label' if meta['multi_label'] else 'softmax of entailment across labels'})")
    else:
        how = (f"{meta['method']} (cosine of mean-pooled embeddings, calibration "
               f"{meta['calibration']}, {'sigmoid' if meta['multi_label'] else 'softmax'} at "
               f"temperature {meta['temperature']:g})")
    return (f"zero-shot by {how} with {meta['model']}: {meta['n_docs']} documents x "
            f"{len(meta['labels'])} labels, hypothesis '{meta['hypothesis']}'; "
            f"{meta['n_missing']} missing or empty (no prediction), "
            + (f"read in {meta['n_windows']} windows of {meta['max_length']} tokens"
               + (f" ({meta['aggregate']} of the window logits)" if "aggregate" in meta else
                  " (mean of the window embeddings)")
               if meta["truncation"] == CHUNKS else
               f"{meta['n_truncated']} truncated to {meta['max_length']} tokens "
               f"({meta['truncation']})")
            + (f"; backend {meta['backend']}" if meta.get("backend", "torch") != "torch" else ""))
