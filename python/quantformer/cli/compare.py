"""``quantformer compare``: fine-tuned Transformer vs SVM/XGBoost baselines by training size
(:func:`quantformer.select.compare.compare`)."""

from __future__ import annotations

import warnings
from pathlib import Path

from .._core.show import print_table
from ..select.common import METRIC_LABEL
from ..select.compare import MODELS, compare, parse_models, task_model_names
from ..io.writable import check_results_dir
from ..io.codebook import make_codebook
from . import _options as opt


def add_cli(sub) -> None:
    p = sub.add_parser(
        "compare",
        help="fine-tuned Transformer vs SVM/XGBoost baselines by training size (Table 1)",
        description="Train each model on stratified samples of each training size (repeated "
                    "draws) and score it on the test set, as in Wankmüller (2022) Table 1 and "
                    "Figure 10; with --llm, a large language model coding the test documents from "
                    "--codebook (zero-shot, and k-shot with --shots) in rows beside them. "
                    "Writes results.csv/.rds (one row per model x size x repeat), "
                    "table.csv/.rds/.md (mean and min-max per size), figure10.png and "
                    "summary.json into --out (a new or empty folder, or --overwrite).",
    )
    opt.add_labelled_corpora(p, "labelled test corpus file", test_required=True)
    p.add_argument("--models", default=None,
                   help=f"comma-separated models, in table order (default: all of the task's; "
                        f"classification: {','.join(MODELS)}, also setfit: SetFit few-shot "
                        "fine-tuning, and nli: --model is an NLI model fine-tuned on the "
                        "classes as hypotheses, see --hypothesis, --label-phrases; regression: "
                        "default,ridge-bow; multilabel: default,logit-bow,svm-bow)")
    opt.add_model_option(p, " for the 'default' Transformer")
    p.add_argument("--train-sizes", default=None,
                   help="comma-separated training sizes, e.g. 500,1000,2000 (default: all "
                        "training documents)")
    p.add_argument("--repeats", type=opt.positive(int), default=5,
                   help="draws per training size (5)")
    p.add_argument("--seed", type=int, default=1, help="base seed (1)")
    p.add_argument("--folds", type=int, default=5, help="CV folds for tuning the baselines (5)")
    opt.add_task_options(p, "regression is scored by RMSE, MAE, Pearson, Spearman, R^2 against "
                        "ridge-bow; multilabel by macro-/micro-F1 and per-label F1 against "
                        "one-vs-rest logit-bow and svm-bow")
    p.add_argument("--vectors", default=None,
                   help="GloVe/word2vec text file for svm-vec/xgb-vec (default: averaged "
                        "MiniLM input embeddings)")
    p.add_argument("--epochs", type=opt.positive(int), default=None,
                   help="fine-tuning epochs (default by model size)")
    p.add_argument("--lr", type=opt.positive(float), default=None,
                   help="fine-tuning learning rate (default by model size)")
    opt.add_selection_training(
        p, max_length_help="tokens per document for the Transformer (512)",
        truncation_help="how the fine-tuned candidates cut long documents (head_tail; "
                        "setfit: head); chunks: read whole as windows, in training and on "
                        "the test set; the baselines are unaffected")
    opt.add_nli_options(p, "the nli model of --models")
    add_llm_options(p)
    p.set_defaults(func=run)


def add_llm_options(p) -> None:
    """``--llm``, ``--codebook``, ``--shots``, ``--endpoint``, ``--api-key-env``: a language
    model's rows (:mod:`quantformer.select.compare_llm`)."""
    g = p.add_argument_group("a large language model as a coder (rows llm, llm-<k>shot)")
    g.add_argument("--llm", default=None,
                   help="a causal LM (Hugging Face id or folder), or the model name the "
                        "--endpoint serves: it codes the test documents from --codebook, as "
                        "quantformer annotate does (row llm: zero-shot)")
    g.add_argument("--codebook", default=None,
                   help="codebook file (.json, .csv, .tsv: label, description, examples); "
                        "its labels must include every class")
    g.add_argument("--shots", type=int, default=0,
                   help="also a k-shot row (llm-<k>shot): k examples drawn from each training "
                        "sample's codes, never test documents (default 0)")
    opt.add_endpoint_options(g)


def run(args) -> int:
    out = check_results_dir(args.out, args.overwrite)
    task = opt.task_kwargs(args)
    names = (parse_models(args.models or MODELS) if task["task"] == "classification"
             else task_model_names(args.models, task["task"]))
    train, test = opt.read_train_test(args, task)
    spec = opt.train_spec(args)  # the fine-tuned candidates' settings, built once
    codebook = make_codebook(path=args.codebook) if args.codebook is not None else None
    with warnings.catch_warnings():
        warnings.filterwarnings("once")
        res = compare(train, test, models=names, spec=spec,
                      train_sizes=args.train_sizes, repeats=args.repeats, seed=args.seed,
                      folds=args.folds, vectors=args.vectors, quiet=args.quiet,
                      title=Path(args.train).name,
                      scheduler=args.scheduler, llm=args.llm, codebook=codebook,
                      shots=args.shots, endpoint=args.endpoint,
                      api_key_env=args.api_key_env, **opt.nli_kwargs(args), **task)
    res.save(out, overwrite=args.overwrite)
    if not args.quiet:
        name = METRIC_LABEL[res.summary.get("metric", "macro_f1")]
        print_table(res.table.drop(columns="description").set_index("model"),
                    title=f"{name} on the test set (Table 1 style)")
    print(f"wrote {opt.written_files(out)} to {out}")
    return 0
