"""Public model architectures built from configs with random weights (no hub access), with inputs:
the ground the tests and `benchmarks/models.py` compare tjc.compile against eager and torch.compile.

    for name in MODELS:                  # "nanogpt", "resnet", "lstm_lm", "transformer_lm", "bert", ...
        model, inputs = build(name)      # seeded: the same weights and inputs every time
        out = model(*inputs.args, **inputs.kwargs)
        loss = loss_of(out)              # a scalar from every tensor the model returns

The small self-contained architectures are written here after their public originals (karpathy's
nanoGPT, torchvision's ResNet BasicBlock, pytorch/examples' word_language_model); the HuggingFace
ones come from `transformers` and are skipped where it is not installed (`available()`).
Needs torch.
"""
from __future__ import annotations

import dataclasses
import math

import torch
from torch import nn
from torch.nn import functional as F


@dataclasses.dataclass
class Inputs:
    args: tuple = ()
    kwargs: dict = dataclasses.field(default_factory=dict)


# ---- nanoGPT (karpathy/nanoGPT model.py, the architecture) -------------------------------------

@dataclasses.dataclass
class GPTConfig:
    block_size: int = 64
    vocab_size: int = 100
    n_layer: int = 2
    n_head: int = 2
    n_embd: int = 32
    dropout: float = 0.0
    bias: bool = True


class LayerNorm(nn.Module):
    def __init__(self, ndim, bias):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(ndim))
        self.bias = nn.Parameter(torch.zeros(ndim)) if bias else None

    def forward(self, input):
        return F.layer_norm(input, self.weight.shape, self.weight, self.bias, 1e-5)


class CausalSelfAttention(nn.Module):
    def __init__(self, config):
        super().__init__()
        assert config.n_embd % config.n_head == 0
        self.c_attn = nn.Linear(config.n_embd, 3 * config.n_embd, bias=config.bias)
        self.c_proj = nn.Linear(config.n_embd, config.n_embd, bias=config.bias)
        self.attn_dropout = nn.Dropout(config.dropout)
        self.resid_dropout = nn.Dropout(config.dropout)
        self.n_head = config.n_head
        self.n_embd = config.n_embd
        self.dropout = config.dropout
        self.flash = hasattr(torch.nn.functional, "scaled_dot_product_attention")

    def forward(self, x):
        B, T, C = x.size()
        q, k, v = self.c_attn(x).split(self.n_embd, dim=2)
        k = k.view(B, T, self.n_head, C // self.n_head).transpose(1, 2)
        q = q.view(B, T, self.n_head, C // self.n_head).transpose(1, 2)
        v = v.view(B, T, self.n_head, C // self.n_head).transpose(1, 2)
        if self.flash:
            y = torch.nn.functional.scaled_dot_product_attention(
                q, k, v, attn_mask=None, dropout_p=self.dropout if self.training else 0, is_causal=True)
        else:
            att = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(k.size(-1)))
            att = att.masked_fill(torch.ones(T, T, dtype=torch.bool).tril().logical_not(), float("-inf"))
            att = F.softmax(att, dim=-1)
            y = self.attn_dropout(att) @ v
        y = y.transpose(1, 2).contiguous().view(B, T, C)
        return self.resid_dropout(self.c_proj(y))


class MLP(nn.Module):
    def __init__(self, config):
        super().__init__()
        self.c_fc = nn.Linear(config.n_embd, 4 * config.n_embd, bias=config.bias)
        self.gelu = nn.GELU()
        self.c_proj = nn.Linear(4 * config.n_embd, config.n_embd, bias=config.bias)
        self.dropout = nn.Dropout(config.dropout)

    def forward(self, x):
        return self.dropout(self.c_proj(self.gelu(self.c_fc(x))))


class Block(nn.Module):
    def __init__(self, config):
        super().__init__()
        self.ln_1 = LayerNorm(config.n_embd, bias=config.bias)
        self.attn = CausalSelfAttention(config)
        self.ln_2 = LayerNorm(config.n_embd, bias=config.bias)
        self.mlp = MLP(config)

    def forward(self, x):
        x = x + self.attn(self.ln_1(x))
        return x + self.mlp(self.ln_2(x))


class GPT(nn.Module):
    def __init__(self, config):
        super().__init__()
        self.config = config
        self.transformer = nn.ModuleDict(dict(
            wte=nn.Embedding(config.vocab_size, config.n_embd),
            wpe=nn.Embedding(config.block_size, config.n_embd),
            drop=nn.Dropout(config.dropout),
            h=nn.ModuleList([Block(config) for _ in range(config.n_layer)]),
            ln_f=LayerNorm(config.n_embd, bias=config.bias),
        ))
        self.lm_head = nn.Linear(config.n_embd, config.vocab_size, bias=False)
        self.transformer.wte.weight = self.lm_head.weight  # weight tying
        self.apply(self._init_weights)
        for pn, p in self.named_parameters():
            if pn.endswith("c_proj.weight"):
                torch.nn.init.normal_(p, mean=0.0, std=0.02 / math.sqrt(2 * config.n_layer))

    def _init_weights(self, module):
        if isinstance(module, nn.Linear):
            torch.nn.init.normal_(module.weight, mean=0.0, std=0.02)
            if module.bias is not None:
                torch.nn.init.zeros_(module.bias)
        elif isinstance(module, nn.Embedding):
            torch.nn.init.normal_(module.weight, mean=0.0, std=0.02)

    def forward(self, idx, targets=None):
        device = idx.device
        b, t = idx.size()
        assert t <= self.config.block_size, f"Cannot forward sequence of length {t}"
        pos = torch.arange(0, t, dtype=torch.long, device=device)
        tok_emb = self.transformer.wte(idx)
        pos_emb = self.transformer.wpe(pos)
        x = self.transformer.drop(tok_emb + pos_emb)
        for block in self.transformer.h:
            x = block(x)
        x = self.transformer.ln_f(x)
        if targets is not None:
            logits = self.lm_head(x)
            loss = F.cross_entropy(logits.view(-1, logits.size(-1)), targets.view(-1), ignore_index=-1)
        else:
            logits = self.lm_head(x[:, [-1], :])
            loss = None
        return logits, loss


def _nanogpt():
    model = GPT(GPTConfig())
    idx = torch.randint(0, 100, (2, 32), generator=_generator())
    targets = torch.randint(0, 100, (2, 32), generator=_generator(2))
    return model, Inputs((idx, targets))


# ---- decoding with a KV cache (gpt-fast's pattern: static caches as buffers, written in place) ---

class KVCache(nn.Module):
    """One layer's keys and values for positions 0..max_seq-1, as buffers written in place at the
    positions a step decodes: the buffer mutation that CUDA graphs must see as static.
    The keys go in with index_copy_, the values with an index assignment (index_put_), so both
    spellings users write are covered."""

    def __init__(self, batch, n_head, max_seq, head_dim):
        super().__init__()
        self.register_buffer("k", torch.zeros(batch, n_head, max_seq, head_dim), persistent=False)
        self.register_buffer("v", torch.zeros(batch, n_head, max_seq, head_dim), persistent=False)

    def update(self, pos, k, v):
        self.k.index_copy_(2, pos, k)
        self.v[:, :, pos] = v
        return self.k, self.v


class DecodeAttention(nn.Module):
    def __init__(self, config, batch):
        super().__init__()
        self.c_attn = nn.Linear(config.n_embd, 3 * config.n_embd, bias=config.bias)
        self.c_proj = nn.Linear(config.n_embd, config.n_embd, bias=config.bias)
        self.n_head = config.n_head
        self.n_embd = config.n_embd
        self.cache = KVCache(batch, config.n_head, config.block_size, config.n_embd // config.n_head)

    def forward(self, x, pos, mask):
        B, T, C = x.size()
        q, k, v = self.c_attn(x).split(self.n_embd, dim=2)
        q, k, v = (t.view(B, T, self.n_head, C // self.n_head).transpose(1, 2) for t in (q, k, v))
        k, v = self.cache.update(pos, k, v)
        y = F.scaled_dot_product_attention(q, k, v, attn_mask=mask)
        return self.c_proj(y.transpose(1, 2).contiguous().view(B, T, C))


class DecodeBlock(nn.Module):
    def __init__(self, config, batch):
        super().__init__()
        self.ln_1 = LayerNorm(config.n_embd, bias=config.bias)
        self.attn = DecodeAttention(config, batch)
        self.ln_2 = LayerNorm(config.n_embd, bias=config.bias)
        self.mlp = MLP(config)

    def forward(self, x, pos, mask):
        x = x + self.attn(self.ln_1(x), pos, mask)
        return x + self.mlp(self.ln_2(x))


class DecodeGPT(nn.Module):
    """nanoGPT's architecture decoding one token per call: forward(idx (B, 1), pos (1,)) writes the
    step's keys and values into every layer's cache at `pos` and attends over positions <= pos.
    The position is a tensor, so every step runs the same graph (no recompile per position);
    reset_cache() empties the caches for a new sequence."""

    def __init__(self, config, batch=1):
        super().__init__()
        self.config = config
        self.wte = nn.Embedding(config.vocab_size, config.n_embd)
        self.wpe = nn.Embedding(config.block_size, config.n_embd)
        self.h = nn.ModuleList([DecodeBlock(config, batch) for _ in range(config.n_layer)])
        self.ln_f = LayerNorm(config.n_embd, bias=config.bias)
        self.lm_head = nn.Linear(config.n_embd, config.vocab_size, bias=False)
        self.register_buffer("causal", torch.ones(config.block_size, config.block_size, dtype=torch.bool).tril(),
                             persistent=False)

    def forward(self, idx, pos):
        x = self.wte(idx) + self.wpe(pos)
        mask = self.causal[pos]
        for block in self.h:
            x = block(x, pos, mask)
        return self.lm_head(self.ln_f(x))

    def reset_cache(self):
        for block in self.h:
            block.attn.cache.k.zero_()
            block.attn.cache.v.zero_()


def decode_steps(config=None, batch=1, steps=8, device=None):
    """(DecodeGPT, [(idx, pos)] for steps 0..steps-1), seeded; the model is on `device` in eval mode."""
    torch.manual_seed(0)
    config = config or GPTConfig(block_size=16)
    model = DecodeGPT(config, batch).to(device).eval()
    tokens = torch.randint(0, config.vocab_size, (steps, batch, 1), generator=_generator())
    return model, [(tokens[i].to(device), torch.tensor([i], device=device)) for i in range(steps)]


# ---- torchvision-style ResNet (BasicBlock, batch norm with running stats) -----------------------

class BasicBlock(nn.Module):
    expansion = 1

    def __init__(self, inplanes, planes, stride=1, downsample=None):
        super().__init__()
        self.conv1 = nn.Conv2d(inplanes, planes, 3, stride, 1, bias=False)
        self.bn1 = nn.BatchNorm2d(planes)
        self.relu = nn.ReLU(inplace=True)
        self.conv2 = nn.Conv2d(planes, planes, 3, 1, 1, bias=False)
        self.bn2 = nn.BatchNorm2d(planes)
        self.downsample = downsample
        self.stride = stride

    def forward(self, x):
        identity = x
        out = self.relu(self.bn1(self.conv1(x)))
        out = self.bn2(self.conv2(out))
        if self.downsample is not None:
            identity = self.downsample(x)
        out += identity
        return self.relu(out)


class ResNet(nn.Module):
    def __init__(self, layers=(1, 1, 1, 1), num_classes=10, width=8):
        super().__init__()
        self.inplanes = width
        self.conv1 = nn.Conv2d(3, width, 7, 2, 3, bias=False)
        self.bn1 = nn.BatchNorm2d(width)
        self.relu = nn.ReLU(inplace=True)
        self.maxpool = nn.MaxPool2d(kernel_size=3, stride=2, padding=1)
        self.layer1 = self._make_layer(width, layers[0])
        self.layer2 = self._make_layer(width * 2, layers[1], stride=2)
        self.layer3 = self._make_layer(width * 4, layers[2], stride=2)
        self.layer4 = self._make_layer(width * 8, layers[3], stride=2)
        self.avgpool = nn.AdaptiveAvgPool2d((1, 1))
        self.fc = nn.Linear(width * 8 * BasicBlock.expansion, num_classes)

    def _make_layer(self, planes, blocks, stride=1):
        downsample = None
        if stride != 1 or self.inplanes != planes * BasicBlock.expansion:
            downsample = nn.Sequential(
                nn.Conv2d(self.inplanes, planes * BasicBlock.expansion, 1, stride, bias=False),
                nn.BatchNorm2d(planes * BasicBlock.expansion))
        layers = [BasicBlock(self.inplanes, planes, stride, downsample)]
        self.inplanes = planes * BasicBlock.expansion
        layers.extend(BasicBlock(self.inplanes, planes) for _ in range(1, blocks))
        return nn.Sequential(*layers)

    def forward(self, x):
        x = self.maxpool(self.relu(self.bn1(self.conv1(x))))
        x = self.layer4(self.layer3(self.layer2(self.layer1(x))))
        x = torch.flatten(self.avgpool(x), 1)
        return self.fc(x)


def _resnet():
    return ResNet(), Inputs((torch.randn(2, 3, 32, 32, generator=_generator()),))


# ---- pytorch/examples word_language_model (RNNModel, TransformerModel) --------------------------

class RNNModel(nn.Module):
    def __init__(self, rnn_type, ntoken, ninp, nhid, nlayers, dropout=0.0, tie_weights=False):
        super().__init__()
        self.ntoken = ntoken
        self.drop = nn.Dropout(dropout)
        self.encoder = nn.Embedding(ntoken, ninp)
        if rnn_type in ["LSTM", "GRU"]:
            self.rnn = getattr(nn, rnn_type)(ninp, nhid, nlayers, dropout=dropout)
        else:
            nonlinearity = {"RNN_TANH": "tanh", "RNN_RELU": "relu"}[rnn_type]
            self.rnn = nn.RNN(ninp, nhid, nlayers, nonlinearity=nonlinearity, dropout=dropout)
        self.decoder = nn.Linear(nhid, ntoken)
        if tie_weights:
            self.decoder.weight = self.encoder.weight
        self.rnn_type = rnn_type
        self.nhid = nhid
        self.nlayers = nlayers

    def forward(self, input, hidden):
        emb = self.drop(self.encoder(input))
        output, hidden = self.rnn(emb, hidden)
        output = self.drop(output)
        decoded = self.decoder(output).view(-1, self.ntoken)
        return F.log_softmax(decoded, dim=1), hidden

    def init_hidden(self, bsz):
        weight = next(self.parameters())
        if self.rnn_type == "LSTM":
            return (weight.new_zeros(self.nlayers, bsz, self.nhid), weight.new_zeros(self.nlayers, bsz, self.nhid))
        return weight.new_zeros(self.nlayers, bsz, self.nhid)


class PositionalEncoding(nn.Module):
    def __init__(self, d_model, dropout=0.0, max_len=64):
        super().__init__()
        self.dropout = nn.Dropout(p=dropout)
        pe = torch.zeros(max_len, d_model)
        position = torch.arange(0, max_len, dtype=torch.float).unsqueeze(1)
        div_term = torch.exp(torch.arange(0, d_model, 2).float() * (-math.log(10000.0) / d_model))
        pe[:, 0::2] = torch.sin(position * div_term)
        pe[:, 1::2] = torch.cos(position * div_term)
        self.register_buffer("pe", pe.unsqueeze(0).transpose(0, 1))

    def forward(self, x):
        x = x + self.pe[:x.size(0), :]
        return self.dropout(x)


class TransformerModel(nn.Transformer):
    def __init__(self, ntoken, ninp, nhead, nhid, nlayers, dropout=0.0):
        super().__init__(d_model=ninp, nhead=nhead, dim_feedforward=nhid, num_encoder_layers=nlayers,
                         dropout=dropout)  # (the original keeps nn.Transformer's 0.1: 0 compares exactly)
        self.model_type = "Transformer"
        self.src_mask = None
        self.pos_encoder = PositionalEncoding(ninp, dropout)
        self.input_emb = nn.Embedding(ntoken, ninp)
        self.ninp = ninp
        self.decoder = nn.Linear(ninp, ntoken)
        nn.init.uniform_(self.input_emb.weight, -0.1, 0.1)
        nn.init.zeros_(self.decoder.bias)
        nn.init.uniform_(self.decoder.weight, -0.1, 0.1)

    def _generate_square_subsequent_mask(self, sz):
        return torch.log(torch.tril(torch.ones(sz, sz)))

    def forward(self, src, has_mask=True):
        if has_mask:
            device = src.device
            if self.src_mask is None or self.src_mask.size(0) != len(src):
                mask = self._generate_square_subsequent_mask(len(src)).to(device)
                self.src_mask = mask
        else:
            self.src_mask = None
        src = self.input_emb(src) * math.sqrt(self.ninp)
        src = self.pos_encoder(src)
        output = self.encoder(src, mask=self.src_mask)
        output = self.decoder(output)
        return F.log_softmax(output, dim=-1)


def _lstm_lm():
    model = RNNModel("LSTM", 100, 32, 32, 2)
    data = torch.randint(0, 100, (16, 4), generator=_generator())
    return model, Inputs((data, model.init_hidden(4)))


def _transformer_lm():
    model = TransformerModel(100, 32, 2, 64, 2)
    model.src_mask = model._generate_square_subsequent_mask(16)  # as after the first batch
    return model, Inputs((torch.randint(0, 100, (16, 4), generator=_generator()),))


# ---- HuggingFace transformers, tiny configs ----------------------------------------------------

def _ids(batch=2, seq=16, vocab=100, seed=1):
    return torch.randint(0, vocab, (batch, seq), generator=_generator(seed))


def _bert():
    import transformers

    config = transformers.BertConfig(vocab_size=100, hidden_size=32, num_hidden_layers=2, num_attention_heads=2,
                                     intermediate_size=64, max_position_embeddings=64,
                                     hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0)
    mask = torch.ones(2, 16, dtype=torch.long)
    mask[1, 10:] = 0
    return transformers.BertModel(config), Inputs(kwargs=dict(input_ids=_ids(), attention_mask=mask))


def _gpt2():
    import transformers

    config = transformers.GPT2Config(vocab_size=100, n_embd=32, n_layer=2, n_head=2, n_positions=64,
                                     resid_pdrop=0.0, embd_pdrop=0.0, attn_pdrop=0.0)
    ids = _ids()
    return transformers.GPT2LMHeadModel(config), Inputs(kwargs=dict(input_ids=ids, labels=ids))


def _llama():
    import transformers

    config = transformers.LlamaConfig(vocab_size=100, hidden_size=32, intermediate_size=64, num_hidden_layers=2,
                                      num_attention_heads=2, num_key_value_heads=1, max_position_embeddings=64)
    ids = _ids()
    return transformers.LlamaForCausalLM(config), Inputs(kwargs=dict(input_ids=ids, labels=ids))


def _t5():
    import transformers

    config = transformers.T5Config(vocab_size=100, d_model=32, d_kv=16, d_ff=64, num_layers=2, num_heads=2,
                                   dropout_rate=0.0, decoder_start_token_id=0, pad_token_id=0)
    return transformers.T5ForConditionalGeneration(config), Inputs(
        kwargs=dict(input_ids=_ids(), labels=_ids(seq=8, seed=3)))


def bart_config(layers: int):
    """A small BartConfig: `layers` encoder and decoder layers, no dropout."""
    import transformers

    return transformers.BartConfig(vocab_size=100, d_model=32, encoder_layers=layers, decoder_layers=layers,
                                   encoder_attention_heads=2, decoder_attention_heads=2, encoder_ffn_dim=64,
                                   decoder_ffn_dim=64, max_position_embeddings=64, dropout=0.0,
                                   attention_dropout=0.0, activation_dropout=0.0, pad_token_id=1,
                                   bos_token_id=0, eos_token_id=2, decoder_start_token_id=2)


def _bart():
    # BartLearnedPositionalEmbedding is an nn.Embedding whose forward calls super().forward.
    import transformers

    return transformers.BartForConditionalGeneration(bart_config(layers=2)), Inputs(
        kwargs=dict(input_ids=_ids(), labels=_ids(seq=8, seed=3)))


def _convnext_stages():
    # Identical blocks at four widths (staged_models.py imports this module: imported here). The
    # stochastic-depth helper runs and reads each block's rate; rates of 0 keep a training step
    # deterministic, to compare with eager's.
    from .staged_models import ConvNeXtStages

    return ConvNeXtStages(stochastic_depth_prob=0.0), Inputs((torch.randn(2, 3, 32, 32, generator=_generator()),))


MODELS = {
    "nanogpt": _nanogpt,
    "resnet": _resnet,
    "convnext_stages": _convnext_stages,
    "lstm_lm": _lstm_lm,
    "transformer_lm": _transformer_lm,
    "bert": _bert,
    "gpt2": _gpt2,
    "llama": _llama,
    "t5": _t5,
    "bart": _bart,
}
HUGGINGFACE = ("bert", "gpt2", "llama", "t5", "bart")


def available(name: str) -> bool:
    """Whether `name` can be built here (the HuggingFace models need `transformers`)."""
    if name not in HUGGINGFACE:
        return True
    try:
        import transformers  # noqa: F401
    except ImportError:
        return False
    return True


def build(name: str):
    """(model, Inputs) for `name`, seeded: the same weights and inputs on every call."""
    try:
        make = MODELS[name]
    except KeyError:
        raise ValueError(f"unknown model {name!r}; known: {', '.join(MODELS)}") from None
    torch.manual_seed(0)
    model, inputs = make()
    return model, inputs


def loss_of(out) -> torch.Tensor:
    """A scalar that every floating-point tensor in `out` (tuples, lists, dicts, ModelOutputs)
    contributes to, so a backward pass reaches every parameter the forward used."""
    total = None
    for t in _tensors(out):
        if t.is_floating_point() and t.requires_grad:
            term = t.float().square().mean()
            total = term if total is None else total + term
    if total is None:
        raise ValueError("the output holds no tensor that requires grad")
    return total


def train_step(model, inputs, lr: float = 0.1):
    """One training step: forward, loss_of, backward, SGD; returns (outputs, grads, buffers,
    params) after it, each detached, for comparing a compiled model's step with eager's."""
    out = model(*inputs.args, **inputs.kwargs)
    loss_of(out).backward()
    grads = {n: p.grad.clone() for n, p in model.named_parameters() if p.grad is not None}
    with torch.no_grad():
        for p in model.parameters():
            if p.grad is not None:
                p -= lr * p.grad
                p.grad = None
    buffers = {n: b.clone() for n, b in model.named_buffers()}
    params = {n: p.detach().clone() for n, p in model.named_parameters()}
    return [t.detach() for t in tensors(out)], grads, buffers, params


def tensors(out):
    """The tensors in `out`, in a fixed order (for comparing outputs)."""
    return list(_tensors(out))


def _tensors(out):
    if isinstance(out, torch.Tensor):
        yield out
    elif isinstance(out, dict):  # ModelOutput is an OrderedDict
        for value in out.values():
            yield from _tensors(value)
    elif isinstance(out, (tuple, list)):
        for value in out:
            yield from _tensors(value)
    elif hasattr(out, "to_legacy_cache") or hasattr(out, "layers"):  # HuggingFace cache objects
        for layer in getattr(out, "layers", ()):
            for name in ("keys", "values"):
                value = getattr(layer, name, None)
                if isinstance(value, torch.Tensor):
                    yield value


def _generator(seed: int = 1) -> torch.Generator:
    return torch.Generator().manual_seed(seed)
