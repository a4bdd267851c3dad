"""A tiny causal LM for the R tests of annotate_llm(): a 2-layer Llama with random weights and a
byte-level tokenizer (the 256 byte symbols, no merges, so nothing is trained) with a ChatML
chat template; its end-of-sequence token is <|im_end|>. It needs only what the Python core
depends on (torch, transformers, tokenizers), so the tests of an installed R tarball can build it.
Usage: python tiny_llama.py OUT_FOLDER
"""

import sys

import torch
from tokenizers import Tokenizer, decoders, models, pre_tokenizers
from transformers import LlamaConfig, LlamaForCausalLM, PreTrainedTokenizerFast

CHAT_TEMPLATE = (
    "{% for m in messages %}<|im_start|>{{ m['role'] }}\n{{ m['content'] }}<|im_end|>\n"
    "{% endfor %}{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}")
SPECIALS = ["<s>", "<pad>", "<unk>", "<|im_start|>", "<|im_end|>"]


def build(out: str) -> None:
    torch.manual_seed(1)
    vocab = {s: i for i, s in enumerate(SPECIALS)}
    for symbol in sorted(pre_tokenizers.ByteLevel.alphabet()):
        vocab[symbol] = len(vocab)
    tok = Tokenizer(models.BPE(vocab=vocab, merges=[], unk_token="<unk>"))
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    fast = PreTrainedTokenizerFast(tokenizer_object=tok, bos_token="<s>", eos_token="<|im_end|>",
                                   pad_token="<pad>", unk_token="<unk>",
                                   additional_special_tokens=SPECIALS[3:])
    fast.chat_template = CHAT_TEMPLATE
    config = LlamaConfig(vocab_size=len(vocab), hidden_size=32, intermediate_size=64,
                         num_hidden_layers=2, num_attention_heads=2, num_key_value_heads=2,
                         max_position_embeddings=4096, bos_token_id=vocab["<s>"],
                         eos_token_id=vocab["<|im_end|>"], pad_token_id=vocab["<pad>"],
                         initializer_range=0.3)
    LlamaForCausalLM(config).save_pretrained(out)
    fast.save_pretrained(out)


if __name__ == "__main__":
    build(sys.argv[1])
