"""``quantformer finetune``: fine-tune a pretrained encoder on labelled documents."""

from __future__ import annotations

from .._core.atomic import write_json
from ..io.frames import read_frame
from ..io.modeldir import read_record
from ..io.writable import check_model_dir, check_writable
from ..models.arguments import TASKS
from ..models.reading import TRUNCATIONS
from ..train.arguments import BATCH_SIZE, DEFAULT_VALID_FRACTION, PRECISIONS
from ..train.finetune import finetune_spec
from ._options import (
    add_chunk_options,
    add_corpus_options,
    add_device_option,
    add_labels_file_option,
    add_model_option,
    add_nli_options,
    add_quiet_option,
    check_task_flags,
    corpus_kwargs,
    max_length_arg,
    nli_kwargs,
    positive,
    train_spec,
)


def add_cli(sub) -> None:
    """The ``finetune`` sub-parser."""
    p = sub.add_parser(
        "finetune",
        help="fine-tune a pretrained encoder on labelled documents",
        description="Fine-tune a pretrained Transformer on hand-coded documents and save a "
                    "model directory (Wankmüller 2022, section 6.4: AdamW, linear decay, no "
                    "warm-up, no weight decay, dropout 0.1, batch 16). Learning rate and "
                    "epochs default by model size (small models: 8e-5, 4 epochs).",
    )
    p.add_argument("--train", required=True, help="labelled corpus file")
    add_corpus_options(p)
    add_labels_file_option(p, "--train")
    add_model_option(p)
    p.add_argument("--epochs", type=positive(int), default=None,
                   help="passes over the data (default by model size: 4)")
    p.add_argument("--lr", type=positive(float), default=None,
                   help="peak learning rate (default by model size: 8e-5 small, 3e-5 base, "
                        "1e-5 large)")
    p.add_argument("--batch-size", type=positive(int), default=BATCH_SIZE,
                   help="documents per step (16)")
    p.add_argument("--max-length", type=max_length_arg, default=None,
                   help="tokens per document incl. special tokens (512; Longformer up to 4096; "
                        "--method setfit: the sentence-transformer's own, 256 for MiniLM)")
    p.add_argument("--truncation", default=None, choices=TRUNCATIONS,
                   help="how long documents are cut (head_tail: first 128 + last 382 at 512; "
                        "--method setfit: head); chunks: read whole as overlapping windows of "
                        "--max-length tokens, the loss on their aggregate")
    p.add_argument("--oversample", type=positive(float), default=None,
                   help="oversample minority classes up to RATIO x the majority (paper: 0.25)")
    p.add_argument("--labels", default=None,
                   help="comma-separated label order (default: sorted training labels)")
    g = p.add_mutually_exclusive_group()
    g.add_argument("--valid", default=None,
                   help="labelled validation file (metrics per epoch, early stopping)")
    g.add_argument("--valid-fraction", type=float, default=DEFAULT_VALID_FRACTION,
                   help="share of --train held out for validation metrics (0: none)")
    _add_task_options(p)
    p.add_argument("--seed", type=int, default=1, help="random seed (1)")
    p.add_argument("--method", default="standard", choices=("standard", "setfit", "nli"),
                   help="standard fine-tuning, or setfit: few-shot contrastive fine-tuning of "
                        "a sentence-transformer body plus a logistic head (8-64 codes per "
                        "class; --epochs, --lr, --batch-size apply to the body), or nli: an NLI "
                        "--model fine-tuned on the classes written as hypotheses (Laurer et "
                        "al. 2023; default 7 epochs, lr 2e-5)")
    add_nli_options(p)
    add_chunk_options(p, training=True)
    p.add_argument("--setfit-iterations", type=positive(int), default=None, metavar="N",
                   help="setfit: pairs drawn per training document and direction (5)")
    add_device_option(p)
    add_quiet_option(p)
    p.add_argument("--out", required=True, help="model directory to write")
    p.add_argument("--record", default=None,
                   help="also write the saved model's run record (its quantformer.json, "
                        "checked) to this JSON file")
    p.add_argument("--overwrite", action="store_true", help="replace an existing --out")
    p.set_defaults(func=run)


def _add_task_options(p) -> None:
    g = p.add_argument_group("what is measured, and how training runs")
    g.add_argument("--task", default="classification", choices=TASKS,
                   help="classification (default; numeric codes stay classes), regression (a "
                        "numeric label) or multilabel (several 0/1 labels)")
    g.add_argument("--label-cols", default=None,
                   help="multilabel: comma-separated 0/1 columns, one per label")
    g.add_argument("--label-sep", default=None,
                   help="multilabel: separator of the labels in one label column (e.g. '|')")
    g.add_argument("--tune-thresholds", action="store_true",
                   help="multilabel: choose each label's threshold by F1 on the validation "
                        "data (default 0.5)")
    g.add_argument("--early-stopping", type=positive(int), default=None, metavar="N",
                   help="stop after N epochs without validation improvement and keep the best "
                        "epoch (needs --valid or --valid-fraction)")
    g.add_argument("--precision", default="auto", choices=PRECISIONS,
                   help="auto: bf16 on CUDA GPUs that support it and on CPUs with AMX or "
                        "AVX-512 BF16 (1.4-1.8x faster at equal macro-F1 there), fp16 on older "
                        "GPUs, fp32 on other CPUs (`quantformer info` says which)")
    g.add_argument("--grad-accum", type=positive(int), default=1, metavar="K",
                   help="one optimisation step every K batches (effective batch = batch x K)")


def run(args) -> int:
    """Check the output folder first, read the corpus, fine-tune, save."""
    check_model_dir(args.out, args.overwrite)
    if args.record:
        check_writable(args.record, "record")
    check_task_flags(args)
    kw = corpus_kwargs(args)
    needs_label = args.label_cols is None
    train = read_frame(args.train, require_label=needs_label, labels_file=args.labels_file, **kw)
    valid = read_frame(args.valid, require_label=needs_label, **kw) if args.valid else None
    spec = train_spec(args, **nli_kwargs(args))  # the settings, built once
    clf = finetune_spec(train, spec, valid=valid, source=str(args.train))
    clf.save(args.out, overwrite=args.overwrite)
    if args.record:  # the checked record, so a caller needs no second call to read it
        write_json(read_record(args.out), args.record)
    print(f"saved the fine-tuned model to {args.out}")
    return 0

