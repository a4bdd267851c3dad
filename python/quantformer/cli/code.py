"""``quantformer code``: the coding room (hand-coding in the browser with the model in the
loop; see :mod:`quantformer.room`), ``--export`` of a project's codes, and
``--add-coder`` of a machine coder's codes."""

from __future__ import annotations

import sys
import warnings

from .._core.errors import InputError
from ..io.columns import LABEL_COLUMN
from ..io.frames import read_frame
from ..io.codebook import make_codebook
from ..room.finetune_now import (
    DEFAULT_MIN_CODES,
    DEFAULT_VALID_FRACTION,
    FinetuneNow,
    check_options,
)
from ..room.loop import Room
from ..room.machine import add_machine_coder
from ..room.ports import moved_port, probe_port, project_port
from ..room.server import RoomServer, check_coders
from ..room.export import export_codes
from ..room.store import Store, check_codebook_change
from ..io.writable import check_project_file
from ..label.strategies import STRATEGIES
from ..label.suggest import embed_corpus
from ._options import (
    add_corpus_options,
    add_device_option,
    add_embedding_cache_options,
    add_precision_option,
    add_quiet_option,
    corpus_kwargs,
    positive,
    print_precision,
)


def add_cli(sub) -> None:
    p = sub.add_parser(
        "code", help="the coding room: hand-code documents in the browser while a model learns",
        description="Serve a local page that shows one document at a time with the codebook; "
                    "keys 1-9 code it, every code is committed at once to the --project "
                    "file (SQLite), and a light classifier over cached embeddings chooses "
                    "the next documents (active learning). 'Fine-tune now' on the page (key "
                    "f) runs `quantformer finetune` on the codes so far as a background child "
                    "process (--models, --finetune-*). Prints the page's address (with its "
                    "access token) on a line of its own, one per --coders. With --export, "
                    "write the project's codes instead; with --add-coder, import a machine "
                    "coder's codes.")
    p.add_argument("--input", default=None, help="corpus file (doc_id, text, docvars)")
    add_corpus_options(p, label=False)
    p.add_argument("--labels", default=None, help="labels, comma-separated (keys 1-9)")
    p.add_argument("--codebook", default=None,
                   help="codebook file: .json (list of {label, description, examples, key}) "
                        "or .csv/.tsv (columns label, description, examples split by |, key)")
    p.add_argument("--project", required=True, help="project file (.sqlite): every code, "
                   "created when absent; a restart resumes it")
    p.add_argument("--export", default=None, metavar="FILE",
                   help="write the project's codes to FILE (.csv, .parquet, .rds) and exit")
    p.add_argument("--add-coder", default=None, metavar="CODES",
                   help="import a machine coder's codes (`quantformer annotate`'s output, "
                        "`predict`'s or `zeroshot`'s predictions, or any file with doc_id, "
                        "label and optionally coder) into --project as "
                        "one coder, then exit (needs --input; the room is not started). Its "
                        "codes never train the model nor leave the humans' queues: the page "
                        "shows each human's alpha and kappa with it, and reconciliation its "
                        "disagreements with them. A re-import replaces its codes")
    p.add_argument("--coder-name", default=None, metavar="NAME",
                   help="with --add-coder: the machine coder's name (default: the file's "
                        "coder column, the model's name; needed for predictions, which have "
                        "none)")
    p.add_argument("--final", action="store_true",
                   help="with --export: one code per document (reconciled or agreed)")
    p.add_argument("--overwrite", action="store_true",
                   help="with --export: replace FILE when it exists (default: refused)")
    p.add_argument("--port", type=int, default=0,
                   help="port (default 0: the port of the project's last start when it is "
                        "free, so that its links keep working, else a free one; a change "
                        "is warned about)")
    p.add_argument("--host", default="127.0.0.1",
                   help="address to serve on (default 127.0.0.1: this computer only; "
                        "0.0.0.0 shares it on the network, with a link per --coders)")
    p.add_argument("--no-browser", action="store_true", help="do not open a browser")
    p.add_argument("--coder", default=None,
                   help="the coder's name (coder1); with --coders, the coder whose page "
                        "opens in this browser (default: the first named)")
    p.add_argument("--new-links", action="store_true",
                   help="revoke the links of earlier starts of this project (by default a "
                        "coder's link keeps working after a restart)")
    p.add_argument("--coders", default=None,
                   help="several coders sharing this server, comma-separated: each gets a "
                        "link with a token of their own (printed one per line), which "
                        "cannot code as another coder")
    p.add_argument("--strategy", default="margin", choices=STRATEGIES,
                   help="which document comes next (margin; switchable on the page)")
    p.add_argument("--random-share", type=float, default=0.1, metavar="SHARE",
                   help="share of an uncertainty batch drawn at random (0.1)")
    p.add_argument("--retrain-every", type=positive(int), default=10,
                   help="retrain the light classifier after this many new codes (10)")
    p.add_argument("--overlap", type=float, default=0.2, metavar="SHARE",
                   help="share of documents every coder codes, blind, for agreement (0.2)")
    p.add_argument("--seed", type=int, default=1, help="random seed (1)")
    p.add_argument("--embed-model", default=None,
                   help="model for the embeddings (default: the bundled all-MiniLM-L6-v2)")
    _add_finetune_now_options(p)
    add_embedding_cache_options(p)
    add_device_option(p)
    add_precision_option(p, detail="It applies to the embeddings the light classifier learns "
                                   "from (their cache is keyed by it; recorded in the project file as "
                                   "'precision'); its uncertainty scores are not rechecked: "
                                   "they order documents, and bf16 vectors keep a cosine "
                                   "similarity above 0.99 with fp32's", onnx=False)
    add_quiet_option(p)
    p.set_defaults(func=run)


def _add_finetune_now_options(p) -> None:
    """The options of the page's 'fine-tune now' (a background ``finetune`` child process)."""
    g = p.add_argument_group("fine-tune now (a background `quantformer finetune` child "
                             "process on the codes so far)")
    g.add_argument("--models", default=None, metavar="DIR",
                   help="folder for the fine-tuned models (default: PROJECT-models next to "
                        "--project); each run writes DIR/finetune-<UTC time>")
    g.add_argument("--finetune-model", default=None, metavar="MODEL",
                   help="pretrained model to fine-tune (default: the bundled "
                        "all-MiniLM-L6-v2)")
    g.add_argument("--finetune-epochs", type=positive(int), default=None, metavar="N",
                   help="passes over the codes (default by model size: 4)")
    g.add_argument("--finetune-valid-fraction", type=float, default=DEFAULT_VALID_FRACTION,
                   metavar="SHARE", help="share of the codes held out for the validation "
                   f"macro-F1 ({DEFAULT_VALID_FRACTION})")
    g.add_argument("--finetune-min-codes", type=positive(int), default=DEFAULT_MIN_CODES,
                   metavar="N", help="fewest codes of every label before a run "
                   f"({DEFAULT_MIN_CODES})")


def run(args) -> int:
    if args.export is not None:
        return run_export(args)
    if args.coder_name is not None and args.add_coder is None:
        raise InputError("{coder_name} applies to {add_coder} only",
                         params=["coder_name", "add_coder"])
    if args.add_coder is not None:
        return run_add_coder(args)
    if args.input is None:
        raise InputError("give the corpus to code with {input} (or --export FILE to write "
                         "the codes of {project})", params=["input", "project"])
    if args.final or args.overwrite:
        raise InputError(f"{'--final' if args.final else '--overwrite'} applies to --export "
                         "only", params=[])
    check_shares(args)
    coders = coder_names(args.coders, args.coder)
    codebook = make_codebook(args.labels, args.codebook)
    check_project_file(args.project)
    probe_port(args.host, args.port)  # a port in use is refused before any work
    room, store = open_room(args, codebook)
    runner = None
    try:
        runner = finetune_runner(args, store)
        serve_room(room, args, coders, runner)
    finally:
        room.stopping = True
        room.wake.set()
        if runner is not None:
            runner.stop()  # a running fine-tune child ends with the server (state stopped)
        store.close()
    return 0


def coder_names(value: str | None, coder: str | None = None) -> list[str] | None:
    """The --coders names (None: one coder), ``coder`` first when it names one of them."""
    if value is None:
        return None
    names = check_coders(value.split(","))
    if coder is not None:
        if coder not in names:
            raise InputError(f"{{coder}} '{coder}' is not one of {{coders}} ({value}); name "
                             "one of them (whose page opens here) or leave it out",
                             params=["coder", "coders"])
        names.remove(coder)
        names.insert(0, coder)
    return names


def finetune_runner(args, store: Store) -> FinetuneNow:
    from pathlib import Path

    project = Path(args.project)
    models = args.models or project.with_name(project.stem + "-models")
    return FinetuneNow(store, models, model=args.finetune_model, epochs=args.finetune_epochs,
                       valid_fraction=args.finetune_valid_fraction,
                       min_codes=args.finetune_min_codes, device=args.device, seed=args.seed)


def run_export(args) -> int:
    given = [f for f, v in (("--input", args.input), ("--labels", args.labels),
                            ("--codebook", args.codebook), ("--add-coder", args.add_coder),
                            ("--coder-name", args.coder_name)) if v is not None]
    if given:
        raise InputError(f"--export reads the project file only; leave out {', '.join(given)}")
    from pathlib import Path

    replaced = Path(args.export).exists()
    table = export_codes(args.project, args.export, final=args.final, overwrite=args.overwrite)
    if not args.quiet:
        print(f"wrote {len(table)} code(s) of {table['doc_id'].nunique()} document(s) to "
              f"{args.export}" + (" (replaced the file that was there)" if replaced else ""),
              file=sys.stderr)
    return 0


def run_add_coder(args) -> int:
    """Import a machine coder's codes into the project (its corpus checked, its codebook
    stored or given), then exit: no embedding, no server."""
    if args.input is None:
        raise InputError("{add_coder} needs the project's corpus with {input}",
                         params=["add_coder", "input"])
    if args.final or args.overwrite:
        raise InputError(f"{'--final' if args.final else '--overwrite'} applies to --export "
                         "only", params=[])
    frame = read_corpus(args)
    codebook = (make_codebook(args.labels, args.codebook)
                if args.labels is not None or args.codebook is not None else None)
    done = add_machine_coder(args.project, frame, args.input, args.add_coder,
                             args.coder_name, codebook)
    if not args.quiet:
        print(f"machine coder {done['coder']}: {done['n_codes']} code(s) in {args.project}"
              f" ({done['n_skipped']} unparsed row(s) skipped)", file=sys.stderr)
    return 0


def check_shares(args) -> None:
    for name, value in (("random_share", args.random_share), ("overlap", args.overlap)):
        if not 0.0 <= value <= 1.0:
            raise InputError(f"{{{name}}} must be a share between 0 and 1, not {value!r}",
                             params=[name])
    check_options(args.finetune_valid_fraction, args.finetune_min_codes)


def read_corpus(args):
    """The corpus frame, checked: documents, texts; a label column is not shown."""
    frame = read_frame(args.input, **corpus_kwargs(args, label=False))
    if len(frame) == 0:
        raise InputError(f"{{input}} '{args.input}' has no documents; give a corpus with "
                         "texts to code", params=["input"])
    text = frame["text"].fillna("").astype(str).str.strip()
    if not text.ne("").any():
        raise InputError(f"every document of {{input}} '{args.input}' has an empty text; "
                         "check --text-col", params=["input"])
    if LABEL_COLUMN in frame.columns:
        warnings.warn("the corpus has a 'label' column: the coding room neither shows nor "
                      "uses it (codes come from the coders)", UserWarning, stacklevel=2)
    return frame


def open_room(args, codebook):
    """Read and check the corpus, open the project (same corpus, same labels), embed."""
    frame = read_corpus(args)
    store = Store(args.project, exclusive=True)
    try:
        store.bind_corpus(frame, args.input)
        check_codebook_change(store, codebook)
        store.put("codebook", codebook)
        used: dict = {}
        vectors = embed_corpus(frame, args.embed_model, corpus_path=args.input,
                               cache=not args.no_cache, cache_dir=args.cache_dir,
                               device=args.device, quiet=args.quiet,
                               precision=args.precision, report=used)
        store.put("precision", used)
        if not args.quiet:
            print_precision(used, "the embeddings", file=sys.stderr)  # stdout: the links
        room = Room(frame, vectors, store, codebook, strategy=args.strategy,
                    random_share=args.random_share, retrain_every=args.retrain_every,
                    overlap=args.overlap, seed=args.seed, precision=used,
                    team=len(args.coders.split(",")) if args.coders else 1,
                    coders=coder_names(args.coders, args.coder) or [args.coder or "coder1"])
        room.step()  # the first model (on resumed codes) and the first queue, before serving
    except BaseException:
        store.close()
        raise
    return room, store


LOCAL_HOSTS = ("127.0.0.1", "localhost", "::1")


def warn_if_shared(host: str) -> None:
    """Warn that a --host other than this computer's makes the page reachable on the
    network."""
    if host not in LOCAL_HOSTS:
        warnings.warn(f"--host {host}: the coding room is reachable from the network, by "
                      "anyone who has a link with its token; share each coder's link "
                      "privately, and use 127.0.0.1 when coding alone", UserWarning,
                      stacklevel=2)


def serve_room(room, args, coders: list[str] | None = None, runner=None) -> None:
    """Serve until 'done' on the page, Ctrl-C or SIGTERM; print the links first (one per
    coder, each alone on its line)."""
    import signal
    import webbrowser

    port, earlier = project_port(room.store, args.host, args.port)  # the links keep working
    server = RoomServer(room, args.host, port, coder=args.coder or "coder1",
                        quiet=args.quiet, coders=coders, finetune=runner,
                        new_links=args.new_links, say=getattr(args, "error_text", str))
    room.store.put("port", server.server_address[1])
    if moved_port(earlier, server.server_address[1]):
        warnings.warn(moved_port(earlier, server.server_address[1]), UserWarning, stacklevel=2)
    warn_if_shared(args.host)
    room.run_background()
    coders = coders or [None]
    for coder in coders:
        print(server.url(coder), flush=True)
    if not args.quiet:
        print(f"quantformer code: serving {len(room.frame)} documents; codes go to "
              f"{args.project} as they are pressed; Ctrl-C stops", file=sys.stderr, flush=True)
    if not args.no_browser:
        webbrowser.open(server.url(coders[0]))

    def stop(signum, frame):
        raise KeyboardInterrupt

    import threading

    main = threading.current_thread() is threading.main_thread()
    previous = signal.signal(signal.SIGTERM, stop) if main else None
    try:
        server.serve_forever(poll_interval=0.2)
    except KeyboardInterrupt:
        pass
    finally:
        if main:
            signal.signal(signal.SIGTERM, previous)
        server.server_close()
