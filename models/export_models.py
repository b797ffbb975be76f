#!/usr/bin/python3
"""Export seeded-random-weight models to ONNX and cross-check ONNX Runtime's
reference outputs against PyTorch.

Run with Debian's interpreter (/usr/bin/python3: torch 1.13, torchvision 0.14,
onnx 1.12, numpy).  No weights are downloaded: every parameter comes from
torch.manual_seed(seed) followed by a fixed, single-threaded construction, so
the same model can be rebuilt bit-for-bit later by --check.

  export_models.py --list
  export_models.py --model NAME --out DIR [--opset N] [--dynamic-batch] [--dynamic-plane] [--seed S]
  export_models.py --check DIR [DIR...] [--rtol R] [--atol A]
  export_models.py --accuracy DIR [GOT_DIR...] [--rtol R] [--atol A]
  export_models.py --summary DIR [DIR...] [--json]

--model NAME takes a name from --list, or tv:NAME for any torchvision
classification or segmentation model (models/sweep.sh).  It writes
DIR/model.onnx and DIR/model.json.  model.json records how the model was built
(arch, seed, opset, dynamic) and how ort_run.js should generate its inputs
(integer ranges, mask padding, concrete sizes for symbolic dims).
"""

import argparse
import collections
import contextlib
import json
import math
import os
import sys
import time
import warnings

import numpy as np
import onnx
import onnx.numpy_helper
import torch
import torch.nn as nn
import torch.nn.functional as F
import torchvision
from torchvision.models.resnet import Bottleneck, ResNet

try:
    from torch.onnx._constants import ONNX_MAX_OPSET as _TORCH_MAX_OPSET
except Exception:  # pragma: no cover - older/newer torch layouts
    _TORCH_MAX_OPSET = 17

DEFAULT_OPSET = min(17, _TORCH_MAX_OPSET)


# ---------------------------------------------------------------------------
# BERT, written in plain torch so that its exported graph matches
# HuggingFace's BertModel (eager attention path) op for op.
# ---------------------------------------------------------------------------

class BertConfig:
    def __init__(self, vocab_size, hidden_size, num_hidden_layers,
                 num_attention_heads, intermediate_size,
                 max_position_embeddings=512, type_vocab_size=2,
                 layer_norm_eps=1e-12, initializer_range=0.02):
        self.vocab_size = vocab_size
        self.hidden_size = hidden_size
        self.num_hidden_layers = num_hidden_layers
        self.num_attention_heads = num_attention_heads
        self.intermediate_size = intermediate_size
        self.max_position_embeddings = max_position_embeddings
        self.type_vocab_size = type_vocab_size
        self.layer_norm_eps = layer_norm_eps
        self.initializer_range = initializer_range
        self.hidden_dropout_prob = 0.1
        self.attention_probs_dropout_prob = 0.1


class BertEmbeddings(nn.Module):
    def __init__(self, cfg):
        super().__init__()
        self.word_embeddings = nn.Embedding(cfg.vocab_size, cfg.hidden_size)
        self.position_embeddings = nn.Embedding(cfg.max_position_embeddings, cfg.hidden_size)
        self.token_type_embeddings = nn.Embedding(cfg.type_vocab_size, cfg.hidden_size)
        self.LayerNorm = nn.LayerNorm(cfg.hidden_size, eps=cfg.layer_norm_eps)
        self.dropout = nn.Dropout(cfg.hidden_dropout_prob)
        self.register_buffer(
            "position_ids",
            torch.arange(cfg.max_position_embeddings).expand((1, -1)),
            persistent=False)

    def forward(self, input_ids, token_type_ids):
        seq_length = input_ids.size()[1]
        position_ids = self.position_ids[:, 0:seq_length]
        inputs_embeds = self.word_embeddings(input_ids)
        token_type_embeddings = self.token_type_embeddings(token_type_ids)
        embeddings = inputs_embeds + token_type_embeddings
        position_embeddings = self.position_embeddings(position_ids)
        embeddings += position_embeddings
        embeddings = self.LayerNorm(embeddings)
        embeddings = self.dropout(embeddings)
        return embeddings


class BertSelfAttention(nn.Module):
    def __init__(self, cfg):
        super().__init__()
        self.num_attention_heads = cfg.num_attention_heads
        self.attention_head_size = cfg.hidden_size // cfg.num_attention_heads
        self.all_head_size = self.num_attention_heads * self.attention_head_size
        self.query = nn.Linear(cfg.hidden_size, self.all_head_size)
        self.key = nn.Linear(cfg.hidden_size, self.all_head_size)
        self.value = nn.Linear(cfg.hidden_size, self.all_head_size)
        self.dropout = nn.Dropout(cfg.attention_probs_dropout_prob)

    def transpose_for_scores(self, x):
        new_x_shape = x.size()[:-1] + (self.num_attention_heads, self.attention_head_size)
        x = x.view(new_x_shape)
        return x.permute(0, 2, 1, 3)

    def forward(self, hidden_states, attention_mask):
        mixed_query_layer = self.query(hidden_states)
        key_layer = self.transpose_for_scores(self.key(hidden_states))
        value_layer = self.transpose_for_scores(self.value(hidden_states))
        query_layer = self.transpose_for_scores(mixed_query_layer)

        attention_scores = torch.matmul(query_layer, key_layer.transpose(-1, -2))
        attention_scores = attention_scores / math.sqrt(self.attention_head_size)
        attention_scores = attention_scores + attention_mask
        attention_probs = F.softmax(attention_scores, dim=-1)
        attention_probs = self.dropout(attention_probs)

        context_layer = torch.matmul(attention_probs, value_layer)
        context_layer = context_layer.permute(0, 2, 1, 3).contiguous()
        new_context_layer_shape = context_layer.size()[:-2] + (self.all_head_size,)
        context_layer = context_layer.view(new_context_layer_shape)
        return context_layer


class BertSelfOutput(nn.Module):
    def __init__(self, cfg):
        super().__init__()
        self.dense = nn.Linear(cfg.hidden_size, cfg.hidden_size)
        self.LayerNorm = nn.LayerNorm(cfg.hidden_size, eps=cfg.layer_norm_eps)
        self.dropout = nn.Dropout(cfg.hidden_dropout_prob)

    def forward(self, hidden_states, input_tensor):
        hidden_states = self.dense(hidden_states)
        hidden_states = self.dropout(hidden_states)
        hidden_states = self.LayerNorm(hidden_states + input_tensor)
        return hidden_states


class BertAttention(nn.Module):
    def __init__(self, cfg):
        super().__init__()
        self.self = BertSelfAttention(cfg)
        self.output = BertSelfOutput(cfg)

    def forward(self, hidden_states, attention_mask):
        self_outputs = self.self(hidden_states, attention_mask)
        return self.output(self_outputs, hidden_states)


class BertIntermediate(nn.Module):
    def __init__(self, cfg):
        super().__init__()
        self.dense = nn.Linear(cfg.hidden_size, cfg.intermediate_size)

    def forward(self, hidden_states):
        hidden_states = self.dense(hidden_states)
        # HF's "gelu" activation: exact erf GELU; exported (opset < 20) as
        # x * 0.5 * (1 + erf(x / sqrt(2))).
        return F.gelu(hidden_states)


class BertOutput(nn.Module):
    def __init__(self, cfg):
        super().__init__()
        self.dense = nn.Linear(cfg.intermediate_size, cfg.hidden_size)
        self.LayerNorm = nn.LayerNorm(cfg.hidden_size, eps=cfg.layer_norm_eps)
        self.dropout = nn.Dropout(cfg.hidden_dropout_prob)

    def forward(self, hidden_states, input_tensor):
        hidden_states = self.dense(hidden_states)
        hidden_states = self.dropout(hidden_states)
        hidden_states = self.LayerNorm(hidden_states + input_tensor)
        return hidden_states


class BertLayer(nn.Module):
    def __init__(self, cfg):
        super().__init__()
        self.attention = BertAttention(cfg)
        self.intermediate = BertIntermediate(cfg)
        self.output = BertOutput(cfg)

    def forward(self, hidden_states, attention_mask):
        attention_output = self.attention(hidden_states, attention_mask)
        intermediate_output = self.intermediate(attention_output)
        return self.output(intermediate_output, attention_output)


class BertEncoder(nn.Module):
    def __init__(self, cfg):
        super().__init__()
        self.layer = nn.ModuleList([BertLayer(cfg) for _ in range(cfg.num_hidden_layers)])

    def forward(self, hidden_states, attention_mask):
        for layer_module in self.layer:
            hidden_states = layer_module(hidden_states, attention_mask)
        return hidden_states


class BertPooler(nn.Module):
    def __init__(self, cfg):
        super().__init__()
        self.dense = nn.Linear(cfg.hidden_size, cfg.hidden_size)
        self.activation = nn.Tanh()

    def forward(self, hidden_states):
        first_token_tensor = hidden_states[:, 0]
        pooled_output = self.dense(first_token_tensor)
        return self.activation(pooled_output)


class BertModel(nn.Module):
    """forward(input_ids, attention_mask, token_type_ids) ->
    (last_hidden_state, pooler_output), like HF's BertModel."""

    def __init__(self, cfg):
        super().__init__()
        self.config = cfg
        self.embeddings = BertEmbeddings(cfg)
        self.encoder = BertEncoder(cfg)
        self.pooler = BertPooler(cfg)
        self._init_weights()

    def _init_weights(self):
        std = self.config.initializer_range
        for m in self.modules():
            if isinstance(m, nn.Linear):
                m.weight.data.normal_(0.0, std)
                # HF zeroes biases; small random ones exercise bias fusion.
                m.bias.data.normal_(0.0, std)
            elif isinstance(m, nn.Embedding):
                m.weight.data.normal_(0.0, std)
            elif isinstance(m, nn.LayerNorm):
                # HF uses 1/0; perturb so LayerNorm's affine part matters.
                m.weight.data.copy_(1.0 + 0.1 * torch.randn_like(m.weight))
                m.bias.data.normal_(0.0, 0.05)

    def get_extended_attention_mask(self, attention_mask):
        dtype = torch.float32
        extended_attention_mask = attention_mask[:, None, None, :]
        extended_attention_mask = extended_attention_mask.to(dtype=dtype)
        extended_attention_mask = (1.0 - extended_attention_mask) * torch.finfo(dtype).min
        return extended_attention_mask

    def forward(self, input_ids, attention_mask, token_type_ids):
        extended_attention_mask = self.get_extended_attention_mask(attention_mask)
        embedding_output = self.embeddings(input_ids, token_type_ids)
        sequence_output = self.encoder(embedding_output, extended_attention_mask)
        pooled_output = self.pooler(sequence_output)
        return sequence_output, pooled_output


# ---------------------------------------------------------------------------
# CNNs (torchvision)
# ---------------------------------------------------------------------------

class SmallResNet(ResNet):
    """torchvision ResNet with Bottleneck blocks and every width divided by
    `div` (stem = 64 // (div // 2) so stage 1 still has a downsample branch,
    as in ResNet-50 where 64 -> 256)."""

    _div = 4

    def __init__(self, layers, div=4, num_classes=1000):
        SmallResNet._div = div
        super().__init__(Bottleneck, layers, num_classes=num_classes)
        stem = max(8, 64 * 2 // div)
        self.conv1 = nn.Conv2d(3, stem, kernel_size=7, stride=2, padding=3, bias=False)
        self.bn1 = nn.BatchNorm2d(stem)
        self.inplanes = stem
        self.layer1 = self._make_layer(Bottleneck, 64, layers[0])
        self.fc = nn.Linear(512 * Bottleneck.expansion // div, num_classes)
        for m in list(self.conv1.modules()) + list(self.layer1.modules()):
            if isinstance(m, nn.Conv2d):
                nn.init.kaiming_normal_(m.weight, mode="fan_out", nonlinearity="relu")

    def _make_layer(self, block, planes, blocks, stride=1, dilate=False):
        return super()._make_layer(block, planes // SmallResNet._div, blocks, stride, dilate)


class LoopRefine(nn.Module):
    """A refinement loop with a run-time trip count: h = relu(h W + b) + h, `steps` times, then a
    linear head.  torch.jit.script keeps the loop, so the exporter writes an ONNX Loop whose body
    reads W and b from the enclosing graph (a dimension of 64, 10 outputs)."""

    def __init__(self, dim=64, classes=10):
        super().__init__()
        self.fc = nn.Linear(dim, dim)
        self.head = nn.Linear(dim, classes)

    def forward(self, x, steps):
        h = x
        for _ in range(int(steps.item())):
            h = torch.relu(self.fc(h)) + h
        return self.head(h)


class RecurrentSmall(nn.Module):
    """A 2-layer bidirectional LSTM or GRU (batch first, input 16, hidden 32) with a linear head on
    every step; returns the head's output and the final states (h_n, and c_n for the LSTM).  The
    exporter writes one ONNX LSTM / GRU node per layer (layout 0, Transposes around them)."""

    def __init__(self, cell, input_size=16, hidden=32, classes=10):
        super().__init__()
        rnn = nn.LSTM if cell == "lstm" else nn.GRU
        self.rnn = rnn(input_size, hidden, num_layers=2, bidirectional=True, batch_first=True)
        self.head = nn.Linear(2 * hidden, classes)

    def forward(self, x):
        out, state = self.rnn(x)
        states = state if isinstance(state, tuple) else (state,)
        return (self.head(out),) + states


def _randomize_cnn(model, image_shape, calib_batches=2, calib_batch=4):
    """Give BN layers non-trivial affine params and running statistics, and
    conv/linear layers non-zero biases.  Running stats are calibrated on
    random images (like a trained net's stats would be, which keeps the
    activations in a sane range), then perturbed so they are not exactly
    batch statistics."""
    with torch.no_grad():
        for m in model.modules():
            if isinstance(m, nn.BatchNorm2d):
                m.weight.uniform_(0.5, 1.5)
                m.bias.uniform_(-0.25, 0.25)
            elif isinstance(m, (nn.Conv2d, nn.Linear)) and m.bias is not None:
                m.bias.uniform_(-0.1, 0.1)
        bns = [m for m in model.modules() if isinstance(m, nn.BatchNorm2d)]
        saved = [m.momentum for m in bns]
        for m in bns:
            m.reset_running_stats()
            m.momentum = None  # cumulative average
        model.train()
        c, h, w = image_shape
        for _ in range(calib_batches):
            model(torch.rand(calib_batch, c, h, w) * 2.0 - 1.0)
        model.eval()
        for m, mom in zip(bns, saved):
            m.momentum = mom
            m.running_var.mul_(torch.empty_like(m.running_var).uniform_(0.8, 1.25))
            m.running_mean.add_(0.1 * m.running_var.sqrt() * torch.randn_like(m.running_mean))
    return model


# ---------------------------------------------------------------------------
# Model registry
# ---------------------------------------------------------------------------

def _cnn_spec(shape):
    return {
        "kind": "cnn",
        "inputs": [{"name": "input", "shape": list(shape), "dtype": "float32",
                    "gen": {"kind": "uniform", "low": -1.0, "high": 1.0}}],
        "outputs": ["output"],
        "dynamic_axes": {"input": {0: "batch"}, "output": {0: "batch"}},
        "dims": {"batch": shape[0]},
    }


def _bert_spec(cfg, seq, pad_tail):
    shape = [1, seq]
    return {
        "kind": "bert",
        "inputs": [
            {"name": "input_ids", "shape": shape, "dtype": "int64",
             "gen": {"kind": "int", "low": 0, "high": cfg.vocab_size,
                     "pad_tail": pad_tail, "pad_value": 0}},
            {"name": "attention_mask", "shape": shape, "dtype": "int64",
             "gen": {"kind": "mask", "pad_tail": pad_tail}},
            {"name": "token_type_ids", "shape": shape, "dtype": "int64",
             "gen": {"kind": "segments", "pad_tail": pad_tail}},
        ],
        "outputs": ["last_hidden_state", "pooler_output"],
        "dynamic_axes": {
            "input_ids": {0: "batch", 1: "sequence"},
            "attention_mask": {0: "batch", 1: "sequence"},
            "token_type_ids": {0: "batch", 1: "sequence"},
            "last_hidden_state": {0: "batch", 1: "sequence"},
            "pooler_output": {0: "batch"},
        },
        "dims": {"batch": 1, "sequence": seq},
    }


def _bert_cfg(name):
    if name == "bert_base":
        return BertConfig(vocab_size=30522, hidden_size=768, num_hidden_layers=12,
                          num_attention_heads=12, intermediate_size=3072,
                          max_position_embeddings=512), 128, 16
    if name == "bert_tiny":
        return BertConfig(vocab_size=1000, hidden_size=128, num_hidden_layers=2,
                          num_attention_heads=2, intermediate_size=512,
                          max_position_embeddings=128), 32, 4
    raise KeyError(name)


ARCHS = {
    # name: (description, committed?)
    "resnet50": "torchvision resnet50, 1x3x224x224",
    "mobilenet_v3_large": "torchvision mobilenet_v3_large, 1x3x224x224",
    "bert_base": "BERT-base (12L, H768, 12 heads, FF3072, vocab 30522), seq 128",
    "mobilenet_v3_small": "torchvision mobilenet_v3_small width_mult=0.5, 100 classes, 1x3x224x224",
    "mobilenet_v2_small": "torchvision mobilenet_v2 width_mult=0.5, 100 classes, 1x3x224x224",
    "resnet_small": "torchvision ResNet, Bottleneck [1,2,1,1], widths/4, 100 classes, 1x3x112x112",
    "squeezenet_small": "torchvision squeezenet1_1, 100 classes, 1x3x112x112 (Concat of fire modules)",
    "shufflenet_small": "torchvision shufflenet_v2_x0_5, 100 classes, 1x3x112x112 (channel split and shuffle)",
    "vit_tiny": "torchvision VisionTransformer, 32x32 image, patch 8, 2 layers, 2 heads, hidden 64, MLP 128, 10 classes",
    "swin_tiny": "torchvision SwinTransformer, 32x32 image, patch 4, embed 32, depths [2, 2], heads [2, 4], window 4, 10 classes",
    "bert_tiny": "BERT (2L, H128, 2 heads, FF512, vocab 1000), seq 32",
    "loop_refine": "scripted loop h = relu(h W + b) + h, run-time trip count, dim 64, 2x8x64",
    "lstm_small": "2-layer bidirectional LSTM (input 16, hidden 32, batch first) + linear head, 2x12x16",
    "gru_small": "2-layer bidirectional GRU (input 16, hidden 32, batch first) + linear head, 2x12x16",
}


class _SegmentationOut(nn.Module):
    """torchvision's segmentation models return {"out": ...}; export that tensor."""

    def __init__(self, model):
        super().__init__()
        self.model = model

    def forward(self, x):
        return self.model(x)["out"]


def _torchvision_model(name):
    """tv:NAME: any torchvision classification or segmentation model by its builder's name, with
    seeded random weights (its input 1x3x224x224, 299x299 for inception_v3)."""
    side = 299 if name == "inception_v3" else 224
    kwargs = {"aux_logits": False, "init_weights": True} if name in ("googlenet", "inception_v3") else {}
    if hasattr(torchvision.models.segmentation, name):
        model = getattr(torchvision.models.segmentation, name)(weights=None, weights_backbone=None,
                                                                aux_loss=False)
        model = _SegmentationOut(model)
    elif hasattr(torchvision.models, name) and name[0].islower():
        model = getattr(torchvision.models, name)(weights=None, **kwargs)
    else:
        raise SystemExit("tv:%s: torchvision %s has no such model" % (name, torchvision.__version__))
    with torch.no_grad():
        for m in model.modules():  # ViT's head starts at zero: its output would be its bias alone
            if isinstance(m, (nn.Conv2d, nn.Linear)) and not m.weight.any():
                m.weight.normal_(0.0, 0.02)
    return model, (1, 3, side, side)


def describe(arch):
    if arch.startswith("tv:"):
        return "torchvision %s, seeded random weights (models/sweep.sh)" % arch[3:]
    return ARCHS[arch]


def build(arch, seed):
    """Return (model in eval mode, spec dict).  Deterministic for a seed."""
    prev_threads = torch.get_num_threads()
    torch.set_num_threads(1)  # reductions in BN calibration: bit-reproducible
    try:
        torch.manual_seed(seed)
        if arch.startswith("tv:"):
            model, shape = _torchvision_model(arch[3:])
            _randomize_cnn(model, shape[1:], calib_batches=1, calib_batch=2)
            spec = _cnn_spec(shape)
        elif arch == "resnet50":
            shape = (1, 3, 224, 224)
            model = torchvision.models.resnet50(weights=None)
            _randomize_cnn(model, shape[1:], calib_batches=1, calib_batch=2)
            spec = _cnn_spec(shape)
        elif arch == "mobilenet_v3_large":
            shape = (1, 3, 224, 224)
            model = torchvision.models.mobilenet_v3_large(weights=None)
            _randomize_cnn(model, shape[1:], calib_batches=1, calib_batch=4)
            spec = _cnn_spec(shape)
        elif arch == "mobilenet_v3_small":
            shape = (1, 3, 224, 224)
            model = torchvision.models.mobilenet_v3_small(weights=None, width_mult=0.5,
                                                          num_classes=100)
            _randomize_cnn(model, shape[1:])
            spec = _cnn_spec(shape)
        elif arch == "mobilenet_v2_small":
            shape = (1, 3, 224, 224)
            model = torchvision.models.mobilenet_v2(weights=None, width_mult=0.5, num_classes=100)
            _randomize_cnn(model, shape[1:])
            spec = _cnn_spec(shape)
        elif arch == "resnet_small":
            shape = (1, 3, 112, 112)
            model = SmallResNet([1, 2, 1, 1], div=4, num_classes=100)
            _randomize_cnn(model, shape[1:])
            spec = _cnn_spec(shape)
        elif arch == "vit_tiny":
            shape = (1, 3, 32, 32)
            model = torchvision.models.VisionTransformer(image_size=32, patch_size=8, num_layers=2, num_heads=2,
                                                         hidden_dim=64, mlp_dim=128, num_classes=10)
            with torch.no_grad():  # the head starts at zero: its output would be its bias alone
                model.heads.head.weight.normal_(0.0, 0.02)
                model.heads.head.bias.uniform_(-0.1, 0.1)
            model.eval()
            spec = _cnn_spec(shape)
        elif arch == "swin_tiny":
            # 8x8 tokens in 4x4 windows: stage 1 has four windows, its second block shifted (the
            # -100 mask); stage 2 one window of 4x4, which torchvision leaves unshifted.
            shape = (1, 3, 32, 32)
            model = torchvision.models.SwinTransformer(patch_size=[4, 4], embed_dim=32, depths=[2, 2],
                                                       num_heads=[2, 4], window_size=[4, 4],
                                                       stochastic_depth_prob=0.0, num_classes=10)
            with torch.no_grad():
                # torchvision's init (std 0.02) leaves every attention row near uniform, where the
                # windows' mask and the position bias hardly show in the output: scale the linear
                # layers to unit gain and the bias table to std 1.
                for mod in model.modules():
                    if isinstance(mod, nn.Linear):
                        mod.weight.normal_(0.0, mod.in_features ** -0.5)
                        if mod.bias is not None:
                            mod.bias.uniform_(-0.1, 0.1)
                    if hasattr(mod, "relative_position_bias_table"):
                        mod.relative_position_bias_table.normal_(0.0, 1.0)
            model.eval()
            spec = _cnn_spec(shape)
        elif arch == "shufflenet_small":
            shape = (1, 3, 112, 112)
            model = torchvision.models.shufflenet_v2_x0_5(weights=None, num_classes=100)
            _randomize_cnn(model, shape[1:])
            spec = _cnn_spec(shape)
        elif arch == "squeezenet_small":
            shape = (1, 3, 112, 112)
            model = torchvision.models.squeezenet1_1(weights=None, num_classes=100)
            _randomize_cnn(model, shape[1:])
            spec = _cnn_spec(shape)
        elif arch in ("bert_base", "bert_tiny"):
            cfg, seq, pad = _bert_cfg(arch)
            model = BertModel(cfg)
            spec = _bert_spec(cfg, seq, pad)
            spec["config"] = dict(vars(cfg))
        elif arch == "loop_refine":
            model = LoopRefine()
            spec = {
                "kind": "loop",
                "script": True,
                "inputs": [{"name": "x", "shape": [2, 8, 64], "dtype": "float32",
                            "gen": {"kind": "uniform", "low": -1.0, "high": 1.0}},
                           {"name": "steps", "shape": [], "dtype": "int64",
                            "gen": {"kind": "const", "value": 3}}],
                "outputs": ["y"],
                "dynamic_axes": {},
                "dims": {},
            }
        elif arch in ("lstm_small", "gru_small"):
            cell = arch.split("_")[0]
            model = RecurrentSmall(cell)
            outputs = ["y", "h_n", "c_n"] if cell == "lstm" else ["y", "h_n"]
            spec = {
                "kind": "recurrent",
                "inputs": [{"name": "x", "shape": [2, 12, 16], "dtype": "float32",
                            "gen": {"kind": "uniform", "low": -1.0, "high": 1.0}}],
                "outputs": outputs,
                "dynamic_axes": {"x": {0: "batch"}, "y": {0: "batch"}},
                "dims": {"batch": 2},
            }
        else:
            raise SystemExit("unknown model %r (try --list)" % arch)
    finally:
        torch.set_num_threads(prev_threads)
    model.eval()
    return model, spec


def _dummy_inputs(spec):
    args = []
    for inp in spec["inputs"]:
        if inp["dtype"] == "float32":
            args.append(torch.zeros(inp["shape"], dtype=torch.float32))
        elif inp["gen"]["kind"] == "const":
            t = torch.full(inp["shape"], inp["gen"]["value"], dtype=torch.int64)
            args.append(t)
            continue
        else:
            t = torch.ones(inp["shape"], dtype=torch.int64)
            if inp["gen"]["kind"] == "segments":
                t.zero_()
            args.append(t)
    return tuple(args)


def export(arch, out_dir, opset, seed, dynamic, keep_bn=False, data_dims=None, dynamic_plane=False):
    t0 = time.time()
    model, spec = build(arch, seed)
    t_build = time.time() - t0
    os.makedirs(out_dir, exist_ok=True)
    path = os.path.join(out_dir, "model.onnx")
    input_names = [i["name"] for i in spec["inputs"]]
    kwargs = {}
    if dynamic:
        kwargs["dynamic_axes"] = spec["dynamic_axes"]
    if dynamic_plane:
        # H and W symbolic too, as segmentation and detection exports write them.
        if spec["kind"] != "cnn":
            raise SystemExit("--dynamic-plane is for image models")
        axes = {k: dict(v) for k, v in kwargs.get("dynamic_axes", {}).items()}
        axes.setdefault("input", {}).update({2: "height", 3: "width"})
        kwargs["dynamic_axes"] = axes
    if keep_bn:
        # The default (TrainingMode.EVAL) runs torch's eval peephole pass,
        # which folds every BatchNorm into the preceding Conv.  PRESERVE with
        # the model in eval() skips that pass only: BatchNormalization nodes
        # stay (inference mode) and constant folding still runs.
        kwargs["training"] = torch.onnx.TrainingMode.PRESERVE
    t1 = time.time()
    # Under no_grad, torch 1.13's nn.MultiheadAttention (torchvision's ViT) takes its fused fast
    # path, which does not export; with autograd on it runs the plain ops.
    grad = contextlib.nullcontext() if arch.startswith("tv:") or arch in ("vit_tiny", "swin_tiny") else torch.no_grad()
    with grad, warnings.catch_warnings():
        # PRESERVE + constant folding warns about training-mode exports; the
        # model is in eval() so folding cannot change any parameter here.
        warnings.filterwarnings("ignore", message="It is recommended that constant folding")
        exported = torch.jit.script(model) if spec.get("script") else model
        torch.onnx.export(exported, _dummy_inputs(spec), path,
                          opset_version=opset,
                          input_names=input_names,
                          output_names=spec["outputs"],
                          **kwargs)
    t_export = time.time() - t1
    t2 = time.time()
    onnx.checker.check_model(path)  # path form: works for >2GB and is cheaper
    t_check = time.time() - t2

    meta = {
        "arch": arch,
        "description": describe(arch),
        "seed": seed,
        "opset": opset,
        "dynamic": bool(dynamic),
        "dynamic_plane": bool(dynamic_plane),
        "keep_bn": bool(keep_bn),
        "torch": torch.__version__,
        "torchvision": torchvision.__version__,
        "inputs": [{"name": i["name"], "dtype": i["dtype"],
                    "shape": ([("batch" if (dynamic and d == 0) else
                                ("sequence" if (dynamic and d == 1 and spec["kind"] == "bert") else
                                 ({2: "height", 3: "width"}[d] if (dynamic_plane and d >= 2) else s)))
                               for d, s in enumerate(i["shape"])]),
                    "gen": i["gen"]} for i in spec["inputs"]],
        "outputs": spec["outputs"],
        "dims": dict(spec["dims"], **(data_dims or {})),
    }
    if "config" in spec:
        meta["config"] = spec["config"]
    with open(os.path.join(out_dir, "model.json"), "w") as f:
        json.dump(meta, f, indent=2)
        f.write("\n")
    print("exported %s -> %s (opset %d%s%s, %.1f MB) build %.1fs export %.1fs checker %.1fs"
          % (arch, path, opset, ", dynamic" if dynamic else "", ", BN kept" if keep_bn else "",
             os.path.getsize(path) / 1e6, t_build, t_export, t_check))


# ---------------------------------------------------------------------------
# Cross-check: torch vs the ORT outputs stored in test_data_set_*
# ---------------------------------------------------------------------------

def _load_pb(path):
    t = onnx.TensorProto()
    with open(path, "rb") as f:
        t.ParseFromString(f.read())
    return t.name, onnx.numpy_helper.to_array(t)


def check(out_dir, rtol, atol):
    with open(os.path.join(out_dir, "model.json")) as f:
        meta = json.load(f)
    model, spec = build(meta["arch"], meta["seed"])
    g = onnx.load(os.path.join(out_dir, "model.onnx"), load_external_data=False).graph
    init_names = {i.name for i in g.initializer}
    graph_inputs = [i.name for i in g.input if i.name not in init_names]
    graph_outputs = [o.name for o in g.output]
    want_inputs = [i["name"] for i in spec["inputs"]]
    ok = True
    if graph_inputs != want_inputs or graph_outputs != spec["outputs"]:
        print("  %s: graph I/O %s -> %s, expected %s -> %s"
              % (out_dir, graph_inputs, graph_outputs, want_inputs, spec["outputs"]))
        ok = False
    sets = sorted(d for d in os.listdir(out_dir) if d.startswith("test_data_set_"))
    if not sets:
        print("  %s: no test_data_set_*" % out_dir)
        return False
    worst = 0.0
    for s in sets:
        sd = os.path.join(out_dir, s)
        ins = {}
        for k in range(len(graph_inputs)):
            name, arr = _load_pb(os.path.join(sd, "input_%d.pb" % k))
            if name != graph_inputs[k]:
                print("  %s/input_%d.pb is named %r, graph input %d is %r"
                      % (sd, k, name, k, graph_inputs[k]))
                ok = False
            ins[name] = arr
        args = [torch.from_numpy(np.array(ins[n], copy=True)) for n in want_inputs]
        with torch.no_grad():
            res = model(*args)
        if isinstance(res, torch.Tensor):
            res = (res,)
        for k, name in enumerate(graph_outputs):
            pname, ref = _load_pb(os.path.join(sd, "output_%d.pb" % k))
            got = res[k].numpy()
            if pname != name or ref.shape != got.shape:
                print("  %s/output_%d.pb: name %r shape %s; torch %r shape %s"
                      % (sd, k, pname, ref.shape, name, got.shape))
                ok = False
                continue
            diff = np.abs(ref.astype(np.float64) - got.astype(np.float64))
            mad = float(diff.max()) if diff.size else 0.0
            rel = float((diff / (np.abs(ref.astype(np.float64)) + 1e-12)).max()) if diff.size else 0.0
            close = np.allclose(got, ref, rtol=rtol, atol=atol)
            worst = max(worst, mad)
            print("  %-28s %s %-18s shape %-16s max|torch-ort| %.3e  max rel %.2e  max|ref| %.3g  %s"
                  % (os.path.basename(os.path.normpath(out_dir)), s, name, list(ref.shape), mad, rel,
                     float(np.abs(ref).max()) if ref.size else 0.0, "OK" if close else "MISMATCH"))
            ok = ok and close
    return ok


def accuracy(out_dir, got_dirs, rtol, atol):
    """ONNX Runtime's outputs of test_data_set_0 (output_K.pb) and those of each folder in
    got_dirs (NAME.pb, as `autofusion run --output-dir` writes them) against the model run in
    torch at float64: max and mean |error|, and for each folder the values beyond rtol/atol of
    ONNX Runtime's.  True when no folder has any."""
    with open(os.path.join(out_dir, "model.json")) as f:
        meta = json.load(f)
    model, spec = build(meta["arch"], meta["seed"])
    model = model.double()
    sd = os.path.join(out_dir, "test_data_set_0")
    args = []
    for k, inp in enumerate(spec["inputs"]):
        _, arr = _load_pb(os.path.join(sd, "input_%d.pb" % k))
        arr = arr.astype(np.float64) if arr.dtype == np.float32 else arr
        args.append(torch.from_numpy(np.array(arr, copy=True)))
    with torch.no_grad():
        res = model(*args)
    if isinstance(res, torch.Tensor):
        res = (res,)
    ok = True
    for k, name in enumerate(spec["outputs"]):
        truth = res[k].numpy()
        _, ort = _load_pb(os.path.join(sd, "output_%d.pb" % k))
        rows = [("onnxruntime", ort)]
        for d in got_dirs:
            path = os.path.join(d, name + ".pb")
            if not os.path.exists(path):
                print("  %s: missing" % path)
                ok = False
                continue
            rows.append((d, _load_pb(path)[1]))
        for label, got in rows:
            if got.shape != truth.shape:
                print("  %s %s: shape %s, torch %s" % (label, name, list(got.shape), list(truth.shape)))
                ok = False
                continue
            err = np.abs(got.astype(np.float64) - truth)
            line = "  %-40s %-10s vs float64: max %.3g mean %.3g" % (label, name, err.max(), err.mean())
            if label != "onnxruntime":
                d = np.abs(got.astype(np.float64) - ort.astype(np.float64))
                beyond = int(np.sum(~(d <= atol + rtol * np.abs(ort.astype(np.float64)))))
                line += "; vs onnxruntime: max %.3g, %d of %d beyond rtol %g atol %g" % (
                    d.max(), beyond, d.size, rtol, atol)
                ok = ok and beyond == 0
            print(line)
    return ok


# ---------------------------------------------------------------------------
# Summary: opset, op histogram, sizes
# ---------------------------------------------------------------------------

def _dims(vi):
    out = []
    for d in vi.type.tensor_type.shape.dim:
        out.append(d.dim_param if d.dim_param else d.dim_value)
    return out


def summary(out_dir):
    path = os.path.join(out_dir, "model.onnx")
    m = onnx.load(path, load_external_data=False)
    g = m.graph
    hist = collections.Counter(n.op_type for n in g.node)
    init_names = {i.name for i in g.initializer}
    n_params = sum(int(np.prod(i.dims)) for i in g.initializer)
    folder = 0
    for root, _, files in os.walk(out_dir):
        folder += sum(os.path.getsize(os.path.join(root, f)) for f in files)
    return {
        "name": os.path.basename(os.path.normpath(out_dir)),
        "opset": {(o.domain or "ai.onnx"): o.version for o in m.opset_import},
        "ir_version": m.ir_version,
        "producer": "%s %s" % (m.producer_name, m.producer_version),
        "model_bytes": os.path.getsize(path),
        "folder_bytes": folder,
        "nodes": len(g.node),
        "initializers": len(g.initializer),
        "parameters": n_params,
        "inputs": [(i.name, onnx.TensorProto.DataType.Name(i.type.tensor_type.elem_type), _dims(i))
                   for i in g.input if i.name not in init_names],
        "outputs": [(o.name, onnx.TensorProto.DataType.Name(o.type.tensor_type.elem_type), _dims(o))
                    for o in g.output],
        "ops": dict(sorted(hist.items(), key=lambda kv: (-kv[1], kv[0]))),
    }


def main():
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--list", action="store_true", help="list model names")
    ap.add_argument("--model", help="model to export (see --list)")
    ap.add_argument("--out", help="output folder for --model")
    ap.add_argument("--opset", type=int, default=DEFAULT_OPSET,
                    help="ONNX opset (default %d)" % DEFAULT_OPSET)
    ap.add_argument("--seed", type=int, default=0, help="torch.manual_seed (default 0)")
    ap.add_argument("--dynamic-batch", action="store_true",
                    help="symbolic batch dim (and sequence dim for BERT)")
    ap.add_argument("--dynamic-plane", action="store_true",
                    help="symbolic height and width of an image model's input")
    ap.add_argument("--data-dim", action="append", default=[], metavar="NAME=V",
                    help="size of a symbolic dim for the test data, recorded in "
                         "model.json for ort_run.js (e.g. sequence=16)")
    ap.add_argument("--keep-bn", action="store_true",
                    help="keep BatchNormalization nodes (torch's default export folds "
                         "them into Conv)")
    ap.add_argument("--check", nargs="+", metavar="DIR",
                    help="compare DIR/test_data_set_*/output_K.pb with torch")
    ap.add_argument("--accuracy", nargs="+", metavar="DIR",
                    help="DIR [GOT_DIR...]: ONNX Runtime's outputs in DIR/test_data_set_0 and each "
                         "GOT_DIR's NAME.pb against torch at float64")
    ap.add_argument("--rtol", type=float, default=1e-3)
    ap.add_argument("--atol", type=float, default=1e-4)
    ap.add_argument("--summary", nargs="+", metavar="DIR",
                    help="print opset, op histogram and sizes")
    ap.add_argument("--json", action="store_true", help="--summary as JSON")
    a = ap.parse_args()

    if a.list:
        for k, v in ARCHS.items():
            print("%-20s %s" % (k, v))
        return 0
    if a.model:
        if not a.out:
            ap.error("--model needs --out")
        if a.opset > _TORCH_MAX_OPSET:
            ap.error("torch %s exports at most opset %d" % (torch.__version__, _TORCH_MAX_OPSET))
        data_dims = {}
        for kv in a.data_dim:
            k, _, v = kv.partition("=")
            if not k or not v.isdigit():
                ap.error("--data-dim wants NAME=V")
            data_dims[k] = int(v)
        export(a.model, a.out, a.opset, a.seed, a.dynamic_batch, a.keep_bn, data_dims, a.dynamic_plane)
        return 0
    if a.check:
        ok = True
        for d in a.check:
            t0 = time.time()
            r = check(d, a.rtol, a.atol)
            print("%s: %s (rtol %g atol %g, %.1fs)" % (d, "PASS" if r else "FAIL", a.rtol, a.atol,
                                                       time.time() - t0))
            ok = ok and r
        return 0 if ok else 1
    if a.accuracy:
        return 0 if accuracy(a.accuracy[0], a.accuracy[1:], a.rtol, a.atol) else 1
    if a.summary:
        rows = [summary(d) for d in a.summary]
        if a.json:
            json.dump(rows, sys.stdout, indent=1)
            print()
        else:
            for r in rows:
                print("%s: opset %s, %d nodes, %d params, model %.2f MB, folder %.2f MB"
                      % (r["name"], r["opset"], r["nodes"], r["parameters"],
                         r["model_bytes"] / 1e6, r["folder_bytes"] / 1e6))
                print("  inputs  %s" % r["inputs"])
                print("  outputs %s" % r["outputs"])
                print("  ops     %s" % ", ".join("%s:%d" % kv for kv in r["ops"].items()))
        return 0
    ap.print_help()
    return 2


if __name__ == "__main__":
    sys.exit(main())
