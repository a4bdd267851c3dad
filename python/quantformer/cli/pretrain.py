"""``quantformer pretrain``: further pretraining of an encoder on unlabelled texts (task- and
domain-adaptive pretraining, Gururangan et al. 2020)."""

from __future__ import annotations

from argparse import RawDescriptionHelpFormatter
from pathlib import Path
from textwrap import fill

from ..train.ddp import is_main_process
from ..train.pretrain import OBJECTIVE_CHOICES, pretrain
from ..train.pretrain_corpus import BUFFER_DOCS
from ._options import add_corpus_options, add_device_option, add_model_option, add_quiet_option
from ._options import corpus_kwargs, max_length_arg, positive


EPILOG = """\
several processes (one per GPU; NCCL between GPUs, Gloo with --device cpu):
  one machine, N GPUs:
    torchrun --standalone --nproc_per_node N -m quantformer pretrain ...
    accelerate launch --multi_gpu --num_processes N -m quantformer pretrain ...
  M machines with N GPUs each, machine I of 0..M-1, HOST0 the address of machine 0:
    torchrun --nnodes M --node_rank I --nproc_per_node N --master_addr HOST0 \\
        --master_port 29500 -m quantformer pretrain ...
    accelerate launch --multi_gpu --num_machines M --machine_rank I --num_processes M*N \\
        --main_process_ip HOST0 --main_process_port 29500 -m quantformer pretrain ...
  --batch-size is per process; --resume needs the same number of processes; the corpus
  the same file and --out on a file system all machines share. Training is fp32:
  accelerate's --mixed_precision, --dynamo_backend, FSDP and DeepSpeed are refused.
  Tested: 2 CPU processes (Gloo) under torchrun and accelerate launch give the encoder of
  one process with the whole batch. Not measured here: NCCL on GPUs, several machines."""


def add_cli(sub) -> None:
    p = sub.add_parser(
        "pretrain",
        help="pretrain an encoder further on your unlabelled texts (TAPT/DAPT)",
        # raw (the epilog's command lines keep their lines), so wrapped here
        description=fill(
            "Continue the pretraining of an encoder on a corpus of unlabelled texts "
            "(task-adaptive pretraining on the task's own texts, domain-adaptive on a larger "
            "domain corpus; Gururangan et al. 2020) and write an encoder folder that finetune "
            "--model, tune, compare, embed, zeroshot and finetune --method setfit accept. "
            "Objective auto: masked language modelling for every encoder, the default model "
            "included (measured no worse than TSDAE, Wang et al. 2021, on Abortion). The corpus is "
            "streamed (memory grows with --buffer-docs, not with the corpus; only .rds is read "
            "whole).", 79,
            break_on_hyphens=False),
        epilog=EPILOG, formatter_class=RawDescriptionHelpFormatter,
    )
    p.add_argument("--corpus", required=True,
                   help="unlabelled texts (.parquet, .csv, .tsv, .txt, .jsonl, .rds); at least "
                        "100 documents with text")
    add_corpus_options(p, label=False)
    add_model_option(p)
    p.add_argument("--out", required=True, help="the encoder folder to write (new)")
    p.add_argument("--objective", default="auto", choices=OBJECTIVE_CHOICES,
                   help="auto (mlm, for every encoder), mlm (masked language modelling) or "
                        "tsdae (denoising auto-encoder, for sentence-transformers bodies) (auto)")
    steps = p.add_mutually_exclusive_group()
    steps.add_argument("--epochs", type=positive(float), default=None,
                       help="passes over the training documents (1)")
    steps.add_argument("--max-steps", type=positive(int), default=None,
                       help="training steps (batches) instead of --epochs")
    p.add_argument("--max-length", type=max_length_arg, default=128,
                   help="tokens per document, special tokens included (128)")
    p.add_argument("--mask-prob", type=float, default=0.15,
                   help="mlm: share of tokens masked, between 0 and 1 (0.15)")
    p.add_argument("--whole-word", action="store_true",
                   help="mlm: mask all subwords of a word together (whole-word masking)")
    p.add_argument("--valid-fraction", type=float, default=0.05,
                   help="share of documents held out for the loss before and after (0.05)")
    p.add_argument("--seed", type=int, default=42, help="random seed (42)")
    p.add_argument("--lr", type=positive(float), default=None,
                   help="learning rate (5e-5 for mlm, 3e-5 for tsdae)")
    p.add_argument("--batch-size", type=positive(int), default=32,
                   help="documents per step in each process (32)")
    p.add_argument("--buffer-docs", type=positive(int), default=BUFFER_DOCS,
                   help="documents read, shuffled and length-grouped together; memory grows "
                        f"with it, not with the corpus ({BUFFER_DOCS})")
    p.add_argument("--head-steps", type=int, default=None,
                   help="mlm: warm-up steps of a new masked-LM head with the encoder frozen "
                        "(default one epoch; 0: none)")
    p.add_argument("--checkpoint-every", type=positive(int), default=500,
                   help="steps between checkpoints, kept in OUT.checkpoint until the end (500)")
    p.add_argument("--resume", action="store_true",
                   help="continue an interrupted run of the same corpus, settings and number "
                        "of processes from its last checkpoint")
    add_device_option(p)
    add_quiet_option(p)
    p.set_defaults(func=run)


def run(args) -> int:
    kw = corpus_kwargs(args, label=False)
    # an --out that exists passed the checks only as a finished encoder with --resume: pretrain
    # then says there is nothing to do (or refuses other settings) and trains nothing
    finished = Path(args.out).exists()
    record = pretrain(
        args.corpus, args.out, args.model, objective=args.objective, epochs=args.epochs,
        max_steps=args.max_steps, max_length=args.max_length, mask_prob=args.mask_prob,
        whole_word=args.whole_word, valid_fraction=args.valid_fraction, seed=args.seed,
        lr=args.lr, batch_size=args.batch_size, checkpoint_every=args.checkpoint_every,
        head_steps=args.head_steps, buffer_docs=args.buffer_docs,
        resume=args.resume, device=args.device, quiet=args.quiet,
        text_col=kw["text_col"], id_col=kw["id_col"], fmt=kw["fmt"], quoting=kw["quoting"])
    if finished or not is_main_process():  # under a launcher: the main process reports
        return 0
    before, after = record["valid_before"], record["valid_after"]
    # the record keeps the rounded figures; the message shows what a reader compares
    ppl = (f", perplexity {before['perplexity']:.2f} -> {after['perplexity']:.2f}"
           if "perplexity" in after else "")
    corpus = record["corpus"]
    print(f"pretrained {record['base_model']} further on {corpus['n_train']} documents "
          f"({corpus['n_valid']} more held out for the loss; {record['objective']}: "
          f"{record['objective_reason']}); held-out loss "
          f"{before['loss']:.4f} -> {after['loss']:.4f}{ppl}; wrote {args.out}")
    return 0
