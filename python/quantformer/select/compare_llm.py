"""``compare --llm``: a large language model coding the test documents from the codebook, beside
the fine-tuned models and the baselines on the same test documents.

The question every reviewer now asks, "why not just ask an LLM?", is answered by evidence on
the researcher's own data: Ziems et al. (2024, "Can large language models transform
computational social science?", Computational Linguistics 50(1)) and Bucher & Martini (2024,
"Fine-tuned 'small' LLMs (still) significantly outperform zero-shot generative AI models in
text classification") found fine-tuned encoders more accurate than zero- and few-shot LLMs on
most tasks; Halterman & Keith (2025, Political Analysis) found open 7-12B models follow
codebooks unreliably. Rows:

``llm``
    zero-shot: the codebook alone is the prompt (:func:`quantformer.infer.annotate.annotate`,
    the same code as ``quantformer annotate``). The model is not trained, so one coding of the
    test documents is scored for every training size and repeat.
``llm-<k>shot`` (with ``shots = k``)
    k-shot: ``k`` examples drawn from the human codes of that size and repeat's training
    sample (:func:`quantformer.infer.annotate.draw_shots`, seeded by ``seed + repeat``);
    training documents whose id or text is also a test document are never drawn.

The metrics are those of the other rows (macro-F1 and accuracy over the corpus's classes on
the same test documents; an unparsed endpoint answer counts as wrong). ``seconds`` of an LLM row
is the wall time of coding the test documents, the whole cost of its codes, where the other
rows report their training time.
"""

from __future__ import annotations

import sys
import time

import pandas as pd

from .._core.errors import InputError, QuantformerError, unused_error
from ..infer.annotate import (annotate, check_codebook_labels, check_shots, draw_shots,
                              prompt_hash)
from ..infer.annotate import build_messages
from ..io.columns import LABEL_COLUMN, REASON_COLUMN, STATUS_COLUMN
from ..models.hub import resolve_device
from ..models.llm import EndpointLM, LocalLM, check_api_key
from ..models.llm_endpoint import check_endpoint_url
from ..score.metrics import macro_f1

ZERO_SHOT = "llm"


def llm_names(shots: int) -> list[str]:
    """The row names of the LLM: ``llm`` and, with shots, ``llm-<k>shot``."""
    return [ZERO_SHOT] + ([f"llm-{shots}shot"] if shots else [])


def is_llm_row(name: str) -> bool:
    """Whether a model row of a comparison is a language model's (not trained)."""
    return name == ZERO_SHOT or (name.startswith("llm-") and name.endswith("shot"))


def options_given(llm_options: dict) -> list[str]:
    """The names of the language model's options that were given (``shots`` when not 0), in
    the order ``llm``, ``codebook``, ``endpoint``, ``api_key_env``, ``shots``."""
    given = [n for n in ("llm", "codebook", "endpoint", "api_key_env")
             if llm_options.get(n) is not None]
    return given + (["shots"] if llm_options.get("shots") else [])


def check_llm_options(llm, codebook, shots, endpoint, api_key_env, *, classes, samples,
                      test) -> tuple[list[str], str | None]:
    """Every check of the LLM rows that needs no model, before any run.

    Returns:
        The codebook's labels and the API key (None without ``api_key_env``).

    Raises:
        InputError: LLM options without ``llm``; ``llm`` without a codebook; a codebook of
            fewer than two labels or without a class of the corpus; ``shots`` not a whole
            number >= 0, or above the training documents of a sample that are not test
            documents; ``api_key_env`` without ``endpoint``, or its variable unset or empty.
    """
    if llm is None:
        given = options_given({"codebook": codebook, "shots": shots, "endpoint": endpoint,
                               "api_key_env": api_key_env})
        if given:
            raise unused_error(given, "is for the language model's rows: add {llm} or leave it "
                                      "out", "are for the language model's rows: add {llm} or "
                                             "leave them out", also=["llm"])
        return [], None
    if not codebook:
        raise InputError("{llm} needs {codebook}: the labels (with descriptions and examples) "
                         "the language model codes by", params=["llm", "codebook"])
    labels = check_codebook_labels(codebook)
    missing = sorted(set(classes) - set(labels))
    if missing:
        raise InputError(f"{{codebook}} lacks the class(es) {missing} of the labelled documents "
                         f"(its labels: {labels}); the codebook's labels must be the corpus's "
                         "codes", params=["codebook"])
    check_shots(shots)
    fewest = min((len(shot_pool(s, test)) for s in samples.values()), default=0)
    if int(shots) > fewest:
        raise InputError(f"{{shots}} is {shots}, but a training sample has only {fewest} "
                         "coded documents that are not test documents; lower {shots} or "
                         "raise {train_sizes}", params=["shots", "train_sizes"])
    if api_key_env is not None and endpoint is None:
        raise InputError("{api_key_env} is for an {endpoint}; add it or leave the key out",
                         params=["api_key_env", "endpoint"])
    if endpoint is not None:
        check_endpoint_url(endpoint)
    return labels, check_api_key(api_key_env)


def shot_pool(sample: pd.DataFrame, test: pd.DataFrame) -> pd.DataFrame:
    """The training documents a k-shot example may be drawn from: none whose id or text is a
    test document's."""
    clash = sample["doc_id"].astype(str).isin(set(test["doc_id"].astype(str))) | \
        sample["text"].isin(set(test["text"]))
    return sample.loc[~clash, ["doc_id", "text", LABEL_COLUMN]]


def open_llm(llm: str, endpoint: str | None, api_key: str | None, device: str | None):
    """The coder: an endpoint client (asked once for its models) or a local causal LM.

    Raises:
        InputError: the endpoint does not answer; ``llm`` is not a causal LM.
    """
    if endpoint is not None:
        coder = EndpointLM(endpoint, llm, api_key)
        coder.check()
        return coder
    return LocalLM(llm, device=resolve_device(device))


def describe_llm(name: str, llm: str, endpoint: str | None) -> str:
    """The report name of an LLM row."""
    where = f" at {endpoint}" if endpoint else ""
    if name == ZERO_SHOT:
        return f"{llm}{where}, zero-shot from the codebook"
    return f"{llm}{where}, {name[4:-4]}-shot from the training sample's codes"


def code_test(coder, codebook, test, shots, *, labels, quiet) -> dict:
    """Code the test documents once; macro-F1, accuracy, seconds and the run's record."""
    t0 = time.perf_counter()
    codes, record = annotate(test[["doc_id", "text"]], codebook, coder, shots=shots,
                             progress=None if quiet else sys.stderr)
    seconds = time.perf_counter() - t0
    if record["failed"]:  # a failed request is no answer: it must not count as a wrong one
        why = codes.loc[codes[STATUS_COLUMN] == "failed", REASON_COLUMN].iloc[0]
        raise QuantformerError(f"{record['failed']} of {len(test)} test documents failed at "
                               f"the endpoint ({why}); rerun when the server answers")
    pred = [None if pd.isna(x) else str(x) for x in codes[LABEL_COLUMN]]
    truth = test[LABEL_COLUMN].astype(str).tolist()
    accuracy = sum(p == t for p, t in zip(pred, truth)) / len(truth)
    return {"macro_f1": macro_f1(truth, pred, labels), "accuracy": accuracy,
            "seconds": seconds, "params": {"shots": len(shots),
                                           "prompt_hash": record["prompt_hash"],
                                           "unparsed": record["unparsed"]}}


def run_llm(coder, codebook, samples: dict, test: pd.DataFrame, *, shots: int, seed: int,
            labels: list[str], say, quiet: bool) -> tuple[list[dict], list[dict]]:
    """The LLM rows of every (size, repeat): result rows and runs, as compare's plan gives.

    ``labels``: the corpus's classes (macro-F1 averages over them, as for the other rows).
    """
    say(f"  llm: coding the {len(test)} test documents zero-shot with {coder.name}")
    zero = code_test(coder, codebook, test, [], labels=labels, quiet=quiet)
    rows, runs = [], []
    for (s, r), sample in samples.items():
        done = [(ZERO_SHOT, zero)]
        if shots:
            picked = draw_shots(shot_pool(sample, test), shots, test["doc_id"], test["text"],
                                check_codebook_labels(codebook), seed=seed + r)
            res = code_test(coder, codebook, test, picked, labels=labels, quiet=quiet)
            say(f"  llm {shots}-shot, n = {s}, repeat {r}: macro-F1 {res['macro_f1']:.4f}")
            done.append((f"llm-{shots}shot", res))
        for name, res in done:
            rows.append({"model": name, "train_size": s, "repeat": r,
                         **{k: res[k] for k in ("macro_f1", "accuracy", "seconds")}})
            runs.append({"model": name, "train_size": s, "repeat": r, **res["params"]})
    say(f"  llm zero-shot: macro-F1 {zero['macro_f1']:.4f} ({zero['seconds']:.0f} s)")
    return rows, runs


def llm_summary(llm: str, endpoint: str | None, codebook, shots: int) -> dict:
    """``summary["llm"]``: the model, where it ran, the shots and the zero-shot prompt's hash."""
    return {"model": llm, "endpoint": endpoint, "shots": int(shots),
            "labels": check_codebook_labels(codebook),
            "zero_shot_prompt_hash": prompt_hash(build_messages(codebook))}
