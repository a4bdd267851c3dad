"""Tiny, randomly initialised Transformer models built on disk for tests (no network, no hub).

Each builder trains a small subword tokenizer on :data:`TINY_CORPUS` with the ``tokenizers``
library, wraps it in the matching ``transformers`` tokenizer class, builds a model with hidden
size 32 and 2 layers from a config, seeds torch, and saves both with ``save_pretrained`` into
the given folder, so ``AutoTokenizer`` / ``AutoModel*`` / ``AutoModelForSequenceClassification``
/ ``transformers.pipeline(...)`` load the folder exactly like a downloaded checkpoint.

Builders (all return the folder as a :class:`pathlib.Path`):

``build_tiny_bert``        BERT, WordPiece (lower-cased), 512 positions, base ``BertModel``
                           weights (a classification head is added at load time).
``build_tiny_roberta``     RoBERTa, byte-level BPE, 514 positions (512 usable), base weights.
``build_tiny_longformer``  Longformer, byte-level BPE, 2,050 positions (2,048 usable),
                           ``attention_window`` 8, base weights.
``build_tiny_bart_nli``    BART with a 3-way sequence-classification head (NLI labels below).
``build_tiny_roberta_nli`` RoBERTa with a 3-way sequence-classification head (NLI labels).

NLI heads use ``id2label = {0: "contradiction", 1: "neutral", 2: "entailment"}`` (the order of
roberta-large-mnli), so ``pipeline("zero-shot-classification")`` finds the entailment id. The
weights are random: outputs are deterministic but meaningless.

Run ``python tests/python/tiny_models.py OUTDIR`` to build all five into OUTDIR.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

SEED = 1234
HIDDEN = 32
LAYERS = 2
HEADS = 2
FFN = 64
# NLI heads get a wider weight init than the default 0.02 so their logits differ between
# inputs (with 0.02 every input scores almost the same, and zero-shot tests could not tell rows apart).
NLI_INIT_RANGE = 0.3

NLI_ID2LABEL = {0: "contradiction", 1: "neutral", 2: "entailment"}
NLI_LABEL2ID = {v: k for k, v in NLI_ID2LABEL.items()}

BERT_SPECIALS = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]
# RoBERTa/BART/Longformer order: <s>=0, <pad>=1, </s>=2, <unk>=3, <mask>=4
BPE_SPECIALS = ["<s>", "<pad>", "</s>", "<unk>", "<mask>"]

_SENTENCES = [
    "The President spoke to the Congress about the economy, taxes and the war.",
    "We must reduce the deficit and protect the jobs of working families.",
    "Our nation is strong because our people are free and our union is united.",
    "The government will invest in schools, roads, hospitals and clean energy.",
    "Abortion should be legal; women have the right to decide for themselves.",
    "Every life is sacred and the unborn child deserves protection under the law.",
    "Climate change is real and we have to act before it is too late!",
    "I don't think the new policy will help anyone in this country.",
    "Immigration reform, border security and a fair path to citizenship.",
    "The senator voted against the bill because it raised taxes on the middle class.",
    "This comment is rude and toxic, you idiot.",
    "Thank you for the thoughtful reply, I learned something today.",
    "Die Regierung muss die Steuern senken und die Wirtschaft stärken.",
    "Wir lehnen diesen Antrag ab, weil er den Bürgern schadet.",
    "Grüße aus München: Größe, Übermut und Öl.",
    "Le gouvernement doit protéger les travailleurs et les familles.",
    "Numbers like 1,024 and 3.14 and 2016 appear in texts too.",
    "Quotes \"inside\" text, apostrophes ' and hashtags #SemST @user.",
    "Health care, social security and medicare for all Americans.",
    "The committee held a hearing on foreign policy, trade and defence spending.",
]

#: Sentences the tiny tokenizers are trained on (deterministic, about 120 lines).
TINY_CORPUS = [
    f"{a} {b}" for i, a in enumerate(_SENTENCES) for b in _SENTENCES[i::4]
] + _SENTENCES


def _seed() -> None:
    import torch

    torch.manual_seed(SEED)


def train_wordpiece(vocab_size: int = 600) -> dict[str, int]:
    """Train a lower-casing BERT WordPiece vocabulary on :data:`TINY_CORPUS`; returns vocab."""
    from tokenizers import Tokenizer, models, normalizers, pre_tokenizers, trainers

    tok = Tokenizer(models.WordPiece(unk_token="[UNK]"))
    tok.normalizer = normalizers.BertNormalizer(lowercase=True)
    tok.pre_tokenizer = pre_tokenizers.BertPreTokenizer()
    trainer = trainers.WordPieceTrainer(vocab_size=vocab_size, special_tokens=BERT_SPECIALS,
                                        show_progress=False)
    tok.train_from_iterator(TINY_CORPUS, trainer)
    return tok.get_vocab()


def train_byte_bpe(vocab_size: int = 600) -> tuple[dict[str, int], list[tuple[str, str]]]:
    """Train a byte-level BPE (GPT-2/RoBERTa style) on :data:`TINY_CORPUS`; returns vocab, merges."""
    from tokenizers import ByteLevelBPETokenizer

    bpe = ByteLevelBPETokenizer()
    bpe.train_from_iterator(TINY_CORPUS, vocab_size=vocab_size, special_tokens=BPE_SPECIALS,
                            show_progress=False)
    model = json.loads(bpe._tokenizer.to_str())["model"]
    return model["vocab"], [tuple(m) for m in model["merges"]]


def bert_tokenizer(model_max_length: int = 512):
    """A ``BertTokenizer`` (fast, Rust backend) with a freshly trained WordPiece vocabulary."""
    from transformers import BertTokenizer

    return BertTokenizer(vocab=train_wordpiece(), do_lower_case=True,
                         model_max_length=model_max_length)


def roberta_tokenizer(model_max_length: int = 512):
    """A ``RobertaTokenizer`` (fast, Rust backend) with a freshly trained byte-level BPE."""
    from transformers import RobertaTokenizer

    vocab, merges = train_byte_bpe()
    return RobertaTokenizer(vocab=vocab, merges=merges, model_max_length=model_max_length)


def _save(model, tokenizer, out: Path | str) -> Path:
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    model.save_pretrained(out)
    tokenizer.save_pretrained(out)
    return out


def _bpe_ids() -> dict:
    return {"pad_token_id": 1, "bos_token_id": 0, "eos_token_id": 2}


def build_tiny_bert(out: Path | str) -> Path:
    """Tiny BERT (WordPiece, 512 positions) saved as a base ``BertModel`` in ``out``."""
    from transformers import BertConfig, BertModel

    tok = bert_tokenizer(512)
    cfg = BertConfig(vocab_size=len(tok), hidden_size=HIDDEN, num_hidden_layers=LAYERS,
                     num_attention_heads=HEADS, intermediate_size=FFN,
                     max_position_embeddings=512, pad_token_id=tok.pad_token_id)
    _seed()
    return _save(BertModel(cfg), tok, out)


def _roberta_config(tok, **extra):
    from transformers import RobertaConfig

    return RobertaConfig(vocab_size=len(tok), hidden_size=HIDDEN, num_hidden_layers=LAYERS,
                         num_attention_heads=HEADS, intermediate_size=FFN,
                         max_position_embeddings=514, type_vocab_size=1, **_bpe_ids(), **extra)


def build_tiny_roberta(out: Path | str) -> Path:
    """Tiny RoBERTa (byte-level BPE, 514 positions = 512 usable) saved as ``RobertaModel``."""
    from transformers import RobertaModel

    tok = roberta_tokenizer(512)
    cfg = _roberta_config(tok)
    _seed()
    return _save(RobertaModel(cfg), tok, out)


def build_tiny_longformer(out: Path | str, max_tokens: int = 2048) -> Path:
    """Tiny Longformer for ``max_tokens`` (default 2,048) tokens, ``attention_window`` 8."""
    from transformers import LongformerConfig, LongformerModel

    tok = roberta_tokenizer(max_tokens)
    cfg = LongformerConfig(vocab_size=len(tok), hidden_size=HIDDEN, num_hidden_layers=LAYERS,
                           num_attention_heads=HEADS, intermediate_size=FFN,
                           max_position_embeddings=max_tokens + 2, type_vocab_size=1,
                           attention_window=[8] * LAYERS, **_bpe_ids())
    _seed()
    return _save(LongformerModel(cfg), tok, out)


def build_tiny_bart_nli(out: Path | str) -> Path:
    """Tiny BART with a 3-way NLI head (contradiction/neutral/entailment), 1,024 positions."""
    from transformers import BartConfig, BartForSequenceClassification, BartTokenizer

    vocab, merges = train_byte_bpe()
    tok = BartTokenizer(vocab=vocab, merges=merges, model_max_length=1024)
    cfg = BartConfig(vocab_size=len(tok), d_model=HIDDEN, encoder_layers=LAYERS,
                     decoder_layers=LAYERS, encoder_attention_heads=HEADS,
                     decoder_attention_heads=HEADS, encoder_ffn_dim=FFN, decoder_ffn_dim=FFN,
                     max_position_embeddings=1024, decoder_start_token_id=2,
                     forced_eos_token_id=2, num_labels=3, id2label=NLI_ID2LABEL,
                     label2id=NLI_LABEL2ID, init_std=NLI_INIT_RANGE, **_bpe_ids())
    _seed()
    return _save(BartForSequenceClassification(cfg), tok, out)


def build_tiny_roberta_nli(out: Path | str) -> Path:
    """Tiny RoBERTa with a 3-way NLI head (contradiction/neutral/entailment), 512 tokens."""
    from transformers import RobertaForSequenceClassification

    tok = roberta_tokenizer(512)
    cfg = _roberta_config(tok, num_labels=3, id2label=NLI_ID2LABEL, label2id=NLI_LABEL2ID,
                          initializer_range=NLI_INIT_RANGE)
    _seed()
    return _save(RobertaForSequenceClassification(cfg), tok, out)


BUILDERS = {
    "tiny_bert": build_tiny_bert,
    "tiny_roberta": build_tiny_roberta,
    "tiny_longformer": build_tiny_longformer,
    "tiny_bart_nli": build_tiny_bart_nli,
    "tiny_roberta_nli": build_tiny_roberta_nli,
}


def build_all(root: Path | str) -> dict[str, Path]:
    """Build every tiny model into ``root/<name>``; returns ``{name: folder}``."""
    return {name: build(Path(root) / name) for name, build in BUILDERS.items()}


if __name__ == "__main__":  # pragma: no cover
    for name, path in build_all(sys.argv[1] if len(sys.argv) > 1 else "tiny_models").items():
        print(name, path)


#: a ChatML-style chat template for the tiny causal LM
TINY_CHAT_TEMPLATE = (
    "{% for m in messages %}<|im_start|>{{ m['role'] }}\n{{ m['content'] }}<|im_end|>\n"
    "{% endfor %}{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}")


def build_tiny_llama(out) -> Path:
    """A 2-layer Llama causal LM with a byte-level BPE tokenizer and a chat template
    (:data:`TINY_CHAT_TEMPLATE`; ``<|im_end|>`` is its end-of-sequence token)."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers
    from transformers import LlamaConfig, LlamaForCausalLM, PreTrainedTokenizerFast

    _seed()
    vocab, merges = train_byte_bpe()
    specials = ["<|im_start|>", "<|im_end|>"]
    for s in specials:
        vocab.setdefault(s, len(vocab))
    tok = Tokenizer(models.BPE(vocab=vocab, merges=merges))
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    fast = PreTrainedTokenizerFast(tokenizer_object=tok, bos_token="<s>", eos_token="<|im_end|>",
                                   pad_token="<pad>", unk_token="<unk>",
                                   additional_special_tokens=specials)
    fast.chat_template = TINY_CHAT_TEMPLATE
    config = LlamaConfig(vocab_size=len(vocab), hidden_size=HIDDEN, intermediate_size=FFN,
                         num_hidden_layers=LAYERS, num_attention_heads=HEADS,
                         num_key_value_heads=HEADS, max_position_embeddings=2048,
                         bos_token_id=vocab["<s>"], eos_token_id=vocab["<|im_end|>"],
                         pad_token_id=vocab["<pad>"], initializer_range=0.3)
    model = LlamaForCausalLM(config)
    out = Path(out)
    model.save_pretrained(out)
    fast.save_pretrained(out)
    return out


def train_tiny_coder(folder, prompts: list[list[dict]], answers: list[str], steps: int = 60,
                     lr: float = 3e-3) -> Path:
    """Teach the tiny causal LM in ``folder`` (:func:`build_tiny_llama`) to answer each chat in
    ``prompts`` with its answer in ``answers`` followed by the end-of-sequence token: a few
    full-batch AdamW steps on the answer tokens (the loss on the prompt masked out), saved
    back into ``folder``. A model that really answers, so a server generating with it returns
    codes that parse (random weights only babble)."""
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    _seed()
    tok = AutoTokenizer.from_pretrained(folder)
    model = AutoModelForCausalLM.from_pretrained(folder)
    rows = []
    for msgs, answer in zip(prompts, answers):
        head = tok.apply_chat_template(msgs, tokenize=False, add_generation_prompt=True)
        p = tok(head, add_special_tokens=False)["input_ids"]
        a = tok(answer, add_special_tokens=False)["input_ids"] + [tok.eos_token_id]
        rows.append((p + a, [-100] * len(p) + a))
    width = max(len(ids) for ids, _ in rows)
    ids = torch.tensor([x + [tok.pad_token_id] * (width - len(x)) for x, _ in rows])
    labels = torch.tensor([y + [-100] * (width - len(y)) for _, y in rows])
    mask = torch.tensor([[1] * len(x) + [0] * (width - len(x)) for x, _ in rows])
    opt = torch.optim.AdamW(model.parameters(), lr=lr)
    model.train()
    for _ in range(steps):
        loss = model(input_ids=ids, attention_mask=mask, labels=labels).loss
        loss.backward()
        opt.step()
        opt.zero_grad()
    model.eval()
    model.save_pretrained(folder)
    return Path(folder)
