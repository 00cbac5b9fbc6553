"""A tiny HuggingFace BertModel (random weights from a config, no hub access) compiled with
tjc.compile: it produces graphs, its outputs and gradients equal eager, later calls compile nothing
new, and every frame that still runs uncompiled is named in the log with its reason."""
import logging

import pytest

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")
pytestmark = [pytest.mark.torch, pytest.mark.usefixtures("fresh_caches")]

import torch_jit_cache as tjc  # noqa: E402



def tiny_bert():
    torch.manual_seed(0)
    config = transformers.BertConfig(vocab_size=100, hidden_size=32, num_hidden_layers=2, num_attention_heads=2,
                                     intermediate_size=64, max_position_embeddings=64,
                                     hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0)
    return transformers.BertModel(config)


def inputs():
    ids = torch.randint(0, 100, (2, 16), generator=torch.Generator().manual_seed(1))
    mask = torch.ones(2, 16, dtype=torch.long)
    mask[1, 10:] = 0  # padding: HuggingFace builds a mask function (a closure) for it per call
    return ids, mask


def test_tiny_bert_compiles_and_matches_eager(caplog):
    # Failed before: installed packages were skipped as library code, 0 graphs.
    caplog.set_level(logging.WARNING, logger="torch_jit_cache")
    model = tiny_bert()
    ids, mask = inputs()
    expected = model(input_ids=ids, attention_mask=mask)
    loss = expected.last_hidden_state.square().mean() + expected.pooler_output.sum()
    loss.backward()
    expected_grads = {n: p.grad.clone() for n, p in model.named_parameters() if p.grad is not None}
    model.zero_grad(set_to_none=True)

    compiled = tjc.compile(model)
    got = compiled(input_ids=ids, attention_mask=mask)
    after_first = tjc.stats()
    assert after_first["graphs"] > 0
    torch.testing.assert_close(got.last_hidden_state, expected.last_hidden_state)
    torch.testing.assert_close(got.pooler_output, expected.pooler_output)
    loss = got.last_hidden_state.square().mean() + got.pooler_output.sum()
    loss.backward()
    grads = {n: p.grad for n, p in model.named_parameters() if p.grad is not None}
    assert grads.keys() == expected_grads.keys()
    for name, grad in grads.items():
        torch.testing.assert_close(grad, expected_grads[name], msg=name)

    # Later calls compile nothing new (the per-call mask closures no longer evict their entries).
    for _ in range(3):
        again = compiled(input_ids=ids, attention_mask=mask)
    torch.testing.assert_close(again.last_hidden_state, expected.last_hidden_state)
    later = tjc.stats()
    assert later["compiles"] == after_first["compiles"]
    assert later["hits"] > after_first["hits"]

    # Each frame that runs uncompiled is logged once with why (full capture is later issues' work).
    if after_first["fallbacks"]:
        reasons = [r.getMessage() for r in caplog.records if "uncompiled:" in r.getMessage()]
        assert reasons, "frames ran uncompiled without a logged reason"
