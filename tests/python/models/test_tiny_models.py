"""The shared tiny-model fixtures: loadable, deterministic, with the promised limits and labels."""

import hashlib

import numpy as np
import pytest
import tiny_models

from quantformer.models.hub import max_positions


def _digest(folder):
    return {p.name: hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(folder.iterdir()) if p.suffix in (".safetensors", ".json")}


def test_builders_are_deterministic(tmp_path, tiny_roberta_nli_dir):
    again = tiny_models.build_tiny_roberta_nli(tmp_path / "again")
    first, second = _digest(tiny_roberta_nli_dir), _digest(again)
    assert "model.safetensors" in first and "tokenizer.json" in first
    assert first == second


@pytest.mark.parametrize("fixture, model_type, limit, tokenizer_limit", [
    ("tiny_bert_dir", "bert", 512, 512),
    ("tiny_roberta_dir", "roberta", 512, 512),
    ("tiny_longformer_dir", "longformer", 2048, 2048),
    ("tiny_bart_nli_dir", "bart", 1024, 1024),
    ("tiny_roberta_nli_dir", "roberta", 512, 512),
])
def test_tiny_models_load_with_their_limits(request, fixture, model_type, limit, tokenizer_limit):
    from transformers import AutoConfig, AutoTokenizer

    folder = request.getfixturevalue(fixture)
    cfg = AutoConfig.from_pretrained(folder)
    tok = AutoTokenizer.from_pretrained(folder)
    assert cfg.model_type == model_type
    assert (cfg.hidden_size, cfg.num_hidden_layers) == (tiny_models.HIDDEN, tiny_models.LAYERS)
    assert max_positions(cfg) == limit
    assert tok.is_fast and tok.model_max_length == tokenizer_limit
    assert len(tok) == cfg.vocab_size


@pytest.mark.parametrize("fixture", ["tiny_bart_nli_dir", "tiny_roberta_nli_dir"])
def test_nli_models_work_in_the_zero_shot_pipeline(request, fixture):
    from transformers import AutoModelForSequenceClassification, pipeline

    folder = str(request.getfixturevalue(fixture))
    model = AutoModelForSequenceClassification.from_pretrained(folder)
    assert model.config.id2label == {0: "contradiction", 1: "neutral", 2: "entailment"}
    clf = pipeline("zero-shot-classification", model=folder, device="cpu")
    out = [clf(t, candidate_labels=["economy", "war"]) for t in
           ("The president spoke about taxes", "war war war", "I love cats")]
    import torch
    from transformers import AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(folder)
    model.eval()
    for o, text in zip(out, ("The president spoke about taxes", "war war war", "I love cats")):
        # the pipeline's scores are the softmax of the entailment logits over the labels
        with torch.no_grad():
            logits = model(**tokenizer([text] * 2, [f"This example is {x}." for x in o["labels"]],
                                       return_tensors="pt", padding=True)).logits
        expected = torch.softmax(logits[:, 2], dim=0).numpy()
        np.testing.assert_allclose(o["scores"], expected, atol=1e-5)
    scores = [o["scores"][o["labels"].index("economy")] for o in out]
    # the wider NLI init makes scores depend on the input (not all ~0.5)
    assert max(scores) - min(scores) > 0.05


def test_bert_base_loads_into_a_classifier(tiny_bert_dir):
    import torch
    from transformers import AutoModelForSequenceClassification, AutoTokenizer

    tok = AutoTokenizer.from_pretrained(tiny_bert_dir)
    model = AutoModelForSequenceClassification.from_pretrained(tiny_bert_dir, num_labels=2)
    enc = tok(["the president spoke " * 300, "hi"], truncation=True, padding=True,
              return_tensors="pt")
    assert enc["input_ids"].shape == (2, 512)
    with torch.inference_mode():
        assert model(**enc).logits.shape == (2, 2)
