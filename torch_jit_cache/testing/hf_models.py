"""Real models whose graph breaks torch.compile does not have, built tiny from configs with random
weights (no hub access): the ground `benchmarks/model_breaks.py` and
tests/python/scenarios/test_model_breaks.py compare tjc.compile with torch.compile on.

    for name in BREAK_MODELS:               # "bart_model", "whisper", "clip", "distilbert_train", ...
        case = build(name)                  # seeded: the same weights and inputs every time
        out = case.model(*case.inputs.args, **case.inputs.kwargs)

Each is a pattern of the Python object model a real model reaches in its forward: BART and Whisper
deep-copy their config and write it through huggingface_hub's strict-dataclass validators (which
read dataclasses.Field objects from closures); CLIP returns a ModelOutput subclass that overrides
`to_tuple`; Wav2Vec2's positional convolution is weight-normed with torch.nn.utils.parametrize and
its encoder asks the lru_cache'd `is_torch_distributed_available()`; DistilBERT and ViT with labels store `config.problem_type` in their loss; ConvNeXt's
stochastic depth (torchvision.ops.stochastic_depth, written here after its public original since
torchvision is not a dependency) logs its use through the function's `__module__`, `__class__`
and `__name__`; diffusers' UNet2DConditionModel reads `inspect.signature(processor).parameters.keys()`
in every attention layer and returns a BaseOutput (diffusers' own OrderedDict-and-dataclass output).
The HuggingFace ones need `transformers`, the UNet `diffusers` (`available()`). Needs torch.
"""
from __future__ import annotations

import dataclasses
from typing import Callable

import torch
from torch import nn

from .models import Inputs, bart_config
from .stochastic_depth import StochasticDepth


@dataclasses.dataclass
class Case:
    model: nn.Module
    inputs: Inputs
    train: bool   # a training step (labels, loss) rather than inference


def _ids(batch=2, seq=16, vocab=100, seed=1):
    return torch.randint(0, vocab, (batch, seq), generator=torch.Generator().manual_seed(seed))


def _randn(*shape, seed=2):
    return torch.randn(*shape, generator=torch.Generator().manual_seed(seed))


def _bart_model():
    import transformers

    return Case(transformers.BartModel(bart_config(layers=1)), Inputs(kwargs=dict(input_ids=_ids())), train=False)


def _whisper(train: bool):
    import transformers

    config = transformers.WhisperConfig(vocab_size=100, num_mel_bins=8, d_model=32, encoder_layers=1,
                                        decoder_layers=1, encoder_attention_heads=2, decoder_attention_heads=2,
                                        encoder_ffn_dim=64, decoder_ffn_dim=64, max_source_positions=16,
                                        max_target_positions=32, pad_token_id=1, bos_token_id=0, eos_token_id=2,
                                        decoder_start_token_id=0, dropout=0.0)
    features = _randn(2, 8, 32)
    kwargs = dict(input_features=features, labels=_ids(seq=8, seed=3)) if train else \
        dict(input_features=features, decoder_input_ids=_ids(seq=8, seed=3))
    return Case(transformers.WhisperForConditionalGeneration(config), Inputs(kwargs=kwargs), train=train)


def _clip():
    import transformers

    text = dict(vocab_size=100, hidden_size=32, intermediate_size=64, num_hidden_layers=1, num_attention_heads=2,
                max_position_embeddings=32, bos_token_id=0, eos_token_id=2, pad_token_id=1)
    vision = dict(hidden_size=32, intermediate_size=64, num_hidden_layers=1, num_attention_heads=2, image_size=32,
                  patch_size=8)
    config = transformers.CLIPConfig(text_config=text, vision_config=vision, projection_dim=16)
    return Case(transformers.CLIPModel(config), Inputs(kwargs=dict(input_ids=_ids(seq=8), pixel_values=_randn(2, 3, 32, 32),
                                                                   return_loss=True)), train=True)


def _wav2vec2():
    import transformers

    config = transformers.Wav2Vec2Config(vocab_size=100, hidden_size=32, num_hidden_layers=1, num_attention_heads=2,
                                         intermediate_size=64, conv_dim=(8, 8), conv_stride=(5, 2), conv_kernel=(10, 3),
                                         num_conv_pos_embeddings=8, num_conv_pos_embedding_groups=2)
    return Case(transformers.Wav2Vec2Model(config), Inputs(kwargs=dict(input_values=_randn(1, 400))), train=False)


def _longformer():
    import transformers

    # Its sliding-window arithmetic divides ints as tensors, then uses them as sizes.
    config = transformers.LongformerConfig(vocab_size=100, hidden_size=32, num_hidden_layers=1, num_attention_heads=2,
                                           intermediate_size=64, attention_window=4)
    return Case(transformers.LongformerModel(config), Inputs(kwargs=dict(input_ids=_ids(batch=1, seq=8))), train=False)


def _distilbert_train():
    import transformers

    config = transformers.DistilBertConfig(vocab_size=100, dim=32, n_layers=1, n_heads=2, hidden_dim=64,
                                           max_position_embeddings=32, dropout=0.0, attention_dropout=0.0,
                                           seq_classif_dropout=0.0, num_labels=2)
    return Case(transformers.DistilBertForSequenceClassification(config),
                Inputs(kwargs=dict(input_ids=_ids(seq=8), labels=torch.tensor([0, 1]))), train=True)


def _vit_train():
    import transformers

    config = transformers.ViTConfig(hidden_size=32, num_hidden_layers=1, num_attention_heads=2, intermediate_size=64,
                                    image_size=32, patch_size=8, num_labels=3, hidden_dropout_prob=0.0,
                                    attention_probs_dropout_prob=0.0)
    return Case(transformers.ViTForImageClassification(config),
                Inputs(kwargs=dict(pixel_values=_randn(2, 3, 32, 32), labels=torch.tensor([0, 2]))), train=True)


# ---- ConvNeXt's block (torchvision.models.convnext.CNBlock) --------------------------------------

class CNBlock(nn.Module):
    """ConvNeXt's block (torchvision.models.convnext.CNBlock, the architecture), tiny."""

    def __init__(self, dim: int, layer_scale: float, sd_prob: float):
        super().__init__()
        self.block = nn.Sequential(nn.Conv2d(dim, dim, kernel_size=7, padding=3, groups=dim),
                                   nn.GroupNorm(1, dim), nn.Conv2d(dim, 4 * dim, 1), nn.GELU(),
                                   nn.Conv2d(4 * dim, dim, 1))
        self.layer_scale = nn.Parameter(torch.ones(dim, 1, 1) * layer_scale)
        self.stochastic_depth = StochasticDepth(sd_prob, "row")

    def forward(self, x):
        return x + self.stochastic_depth(self.layer_scale * self.block(x))


def _convnext_blocks():
    # sd_prob 0.0: the path through stochastic_depth is taken but draws nothing (eval-equal).
    model = nn.Sequential(nn.Conv2d(3, 8, 4, stride=4), *(CNBlock(8, 1e-6, 0.0) for _ in range(3)),
                          nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(8, 5))
    return Case(model, Inputs(args=(_randn(2, 3, 16, 16),)), train=True)


# ---- diffusers' UNet (Stable Diffusion's denoiser), tiny ------------------------------------------

def _unet(train: bool):
    import diffusers

    model = diffusers.UNet2DConditionModel(
        sample_size=8, in_channels=4, out_channels=4, layers_per_block=1, block_out_channels=(16, 32),
        down_block_types=("CrossAttnDownBlock2D", "DownBlock2D"), up_block_types=("UpBlock2D", "CrossAttnUpBlock2D"),
        cross_attention_dim=16, attention_head_dim=4, norm_num_groups=8)
    inputs = Inputs(args=(_randn(2, 4, 8, 8), torch.tensor([10, 20]), _randn(2, 5, 16, seed=3)))
    return Case(model, inputs, train=train)


BREAK_MODELS: dict[str, Callable[[], Case]] = {
    "bart_model": _bart_model,
    "whisper": lambda: _whisper(False),
    "whisper_train": lambda: _whisper(True),
    "clip": _clip,
    "wav2vec2": _wav2vec2,
    "longformer": _longformer,
    "distilbert_train": _distilbert_train,
    "vit_train": _vit_train,
    "convnext_blocks": _convnext_blocks,
    "unet": lambda: _unet(False),
    "unet_train": lambda: _unet(True),
}
# The package each model needs beyond torch (requirements-dev.txt installs them).
NEEDS = {**dict.fromkeys(("bart_model", "whisper", "whisper_train", "clip", "wav2vec2", "longformer",
                          "distilbert_train", "vit_train"), "transformers"),
         "unet": "diffusers", "unet_train": "diffusers"}


def available(name: str) -> bool:
    if name not in NEEDS:
        return True
    try:
        __import__(NEEDS[name])
    except ImportError:
        return False
    return True


def build(name: str) -> Case:
    """The Case for `name`, seeded: the same weights and inputs on every call; in train() mode for a
    training case, eval() otherwise."""
    try:
        make = BREAK_MODELS[name]
    except KeyError:
        raise ValueError(f"unknown model {name!r}; known: {', '.join(BREAK_MODELS)}") from None
    torch.manual_seed(0)
    case = make()
    case.model.train(case.train)
    return case
