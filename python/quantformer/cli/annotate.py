"""``quantformer annotate``: a large language model codes a corpus from the codebook."""

from __future__ import annotations

import os
import sys

from .._core.atomic import write_json
from .._core.errors import InputError
from ..infer.annotate import annotate, check_codebook_labels, check_shots, draw_shots
from ..io.frames import read_frame
from ..io.writable import check_output_file
from ..io.writing import write_frame
from ..io.llm_cache import CodeCache
from ..io.writable import check_writable
from ..io.codebook import make_codebook
from ..io.columns import REASON_COLUMN, STATUS_COLUMN, TEXT_COLUMN
from ..models.llm import ENDPOINT_DEFAULTS, EndpointLM, LocalLM, check_api_key, coder_settings
from ..scale.annotate import annotate_partitions
from ..scale.dask import describe
from ._options import (add_corpus_options, add_endpoint_options, add_partition_options,
                       corpus_kwargs, partitioned)


def add_cli(sub) -> None:
    p = sub.add_parser(
        "annotate",
        help="a large language model codes documents from the codebook",
        description="Code every document with a large language model prompted with the "
                    "codebook (labels, descriptions, examples), optionally with k-shot "
                    "examples from human codes. A local causal LM scores each label "
                    "(log-probability of the label's tokens, normalised over labels; the "
                    "codebook prefix's key-value cache is computed once); an endpoint "
                    "speaking the OpenAI chat-completions protocol answers through "
                    "structured output, unparsable answers marked unparsed. Output: doc_id, "
                    "label, prob_<label>, unparsed, coder (the codes frame of a human "
                    "coder), status (coded, unparsed, failed, empty) and reason, and a record "
                    "OUT.json (prompt, prompt hash, model, retries, failures). A document "
                    "whose requests fail past --retries is written as failed and the others "
                    "go on; the run then exits 1, and a rerun asks for just those.",
    )
    add_partition_options(p)
    add_corpus_options(p, label=False)
    p.add_argument("--codebook", required=True,
                   help="codebook file (.json, .csv, .tsv: label, description, examples)")
    p.add_argument("--llm", required=True,
                   help="a causal LM (Hugging Face id or folder), or the model name the "
                        "--endpoint serves")
    p.add_argument("--out", required=True, help="codes file (.parquet, .csv, .rds, ...)")
    p.add_argument("--shots", type=int, default=0,
                   help="k-shot examples drawn from --shots-from (default 0: zero-shot)")
    p.add_argument("--shots-from", default=None,
                   help="human codes (doc_id, text, label) to draw the shots from; never "
                        "documents of --input")
    p.add_argument("--seed", type=int, default=0, help="seed of the shots' draw (default 0)")
    add_endpoint_options(p)
    g = p.add_argument_group("an endpoint's settings (with --endpoint)")
    g.add_argument("--concurrency", type=int, default=None,
                   help="requests in flight to the endpoint (default 4)")
    g.add_argument("--timeout", type=float, default=None,
                   help="seconds per endpoint request (default 60)")
    g.add_argument("--retries", type=int, default=None,
                   help="retries of a request after a 429, 5xx, timeout or lost connection, "
                        "with exponential backoff (default 4)")
    g.add_argument("--top-logprobs", type=int, default=None,
                   help="candidate tokens per answer token asked of the endpoint (logprobs; "
                        "default 20, the OpenAI maximum); the label probabilities come from "
                        "them where the server returns them, else they are missing and "
                        "OUT.json says why; 0 asks for none")
    g.add_argument("--max-tokens", type=int, default=None,
                   help="longest endpoint answer in tokens (default: the server's)")
    p.add_argument("--cache", default=None,
                   help="SQLite file of finished codes, keyed on the run (the model, the "
                        "endpoint and its settings, the codebook and shots; not the --out "
                        "name), default annotate.cache.sqlite in the folder of --out (with a "
                        "folder as --out: OUT.cache.sqlite beside it); a rerun, a resumed run "
                        "or the same run to another --out computes only what is missing")
    p.add_argument("--retry-unparsed", action="store_true",
                   help="ask again for the documents whose cached answer is unparsed (they "
                        "are cached as finished, so a plain rerun does not)")
    p.add_argument("--raw", action="store_true", help="keep the endpoint's raw answer")
    p.add_argument("--keep-text", action="store_true",
                   help="keep the text column (after doc_id), so that the codes are a "
                        "labelled corpus: finetune --train OUT trains an encoder on them "
                        "(distillation)")
    p.add_argument("--device", default=None,
                   help="torch device of a local model (cpu); not with --endpoint")
    p.set_defaults(func=run)


def _human(args):
    if args.shots_from is None:
        return None
    return read_frame(args.shots_from, require_label=True, **corpus_kwargs(args))


def _settings(args) -> dict:
    """The coder's settings as given (None: not given), for
    :func:`quantformer.models.llm.coder_settings`."""
    return {k: getattr(args, k) for k in ENDPOINT_DEFAULTS}


def _run_partitions(args, codebook) -> int:
    """A folder, glob or several files as --input, or --scheduler/--resume: one Parquet of
    codes per partition (:func:`quantformer.scale.annotate.annotate_partitions`)."""
    cache_path = args.cache or args.out.rstrip("/\\") + ".cache.sqlite"
    check_writable(cache_path, "cache")
    print(describe(annotate_partitions(
        args.input, args.out, codebook, args.llm, endpoint=args.endpoint, shots=args.shots,
        human=_human(args), seed=args.seed, cache=cache_path, scheduler=args.scheduler,
        resume=args.resume, keep_raw=args.raw, device=args.device,
        retry_unparsed=args.retry_unparsed,
        corpus=corpus_kwargs(args, label=False), **_settings(args))))
    return 0


def run(args) -> int:
    settings = coder_settings(args.endpoint, device=args.device, **_settings(args))
    if args.retry_unparsed and args.endpoint is None:
        raise InputError("{retry_unparsed} asks an {endpoint} again for the answers it gave "
                         "that did not parse; a local model scores every label and is never "
                         "unparsed: add {endpoint} or leave {retry_unparsed} out",
                         params=["retry_unparsed", "endpoint"])
    check_shots(args.shots, args.shots_from)
    codebook = make_codebook(path=args.codebook)
    labels = check_codebook_labels(codebook)
    if partitioned(args):
        if args.keep_text:
            raise InputError("{keep_text} is for a single {input} file; with a folder, glob or "
                             "{scheduler}, annotate each file, or join the texts to the "
                             "partitions' codes by doc_id",
                             params=["keep_text", "input", "scheduler"])
        return _run_partitions(args, codebook)
    check_output_file(args.out)
    cache_path = args.cache or default_cache(args.out)
    check_writable(cache_path, "cache")
    frame = read_frame(args.input, **corpus_kwargs(args, label=False))
    human = _human(args)
    shots = draw_shots(human, args.shots, frame["doc_id"], frame["text"], labels, args.seed)
    if args.endpoint is not None:
        llm = EndpointLM(args.endpoint, args.llm, check_api_key(settings["api_key_env"]),
                         timeout=settings["timeout"], retries=settings["retries"],
                         top_logprobs=settings["top_logprobs"],
                         max_tokens=settings["max_tokens"])
        llm.check()
    else:
        llm = LocalLM(args.llm, device=settings["device"])
    cache = CodeCache(cache_path)
    try:
        codes, record = annotate(frame, codebook, llm, cache=cache, shots=shots,
                                 keep_raw=args.raw, concurrency=settings["concurrency"],
                                 retry_unparsed=args.retry_unparsed)
    finally:
        cache.close()
    if args.keep_text:
        codes.insert(1, TEXT_COLUMN, frame[TEXT_COLUMN].to_numpy())
    write_frame(codes, args.out)
    write_json(record, args.out + ".json")
    print(f"wrote {len(codes)} codes to {args.out} ({record['from_cache']} from the cache, "
          f"{record['unparsed']} unparsed, {record['failed']} failed)")
    return _failures(codes, record)


def default_cache(out: str) -> str:
    """The cache of a one-file run: ``annotate.cache.sqlite`` in the folder of ``out`` (one
    cache for every output name there; the cache keys on the run, not on the name)."""
    return os.path.join(os.path.dirname(os.path.abspath(out)), "annotate.cache.sqlite")


def _failures(codes, record) -> int:
    """0, or 1 after saying how many documents failed, why, and the fix."""
    if not record["failed"]:
        return 0
    failed = codes[codes[STATUS_COLUMN] == "failed"]
    reasons = failed[REASON_COLUMN].value_counts()
    why = "; ".join(f"{n}: {r}" for r, n in reasons.head(3).items())
    print(f"quantformer annotate: {record['failed']} of {record['documents']} documents failed "
          f"({why}); their rows have status 'failed' and no label, the others are written "
          "and cached. Failed documents are not cached: rerun the same command to ask for "
          "just those (raise --retries or --timeout, or lower --concurrency, if the server "
          "is rate limiting)", file=sys.stderr)
    return 1
