"""A BERT sentence encoder in NumPy: the bundled MiniLM without torch.

``import torch`` plus sentence-transformers costs 6–19 s on our machines, more
than everything else a CLI question does.  MiniLM is a six-layer BERT with
mean pooling; its forward pass is a few matrix products, so NumPy runs it from
the same ``model.safetensors`` the sentence-transformers backend reads.  The
vectors are the same model's vectors (same weights, same tokenizer, same
pooling; they agree with sentence-transformers to float32 rounding, which
``tests/unit/test_embedders.py`` checks), so a collection embedded by either
backend is queried by the other.

Only what all-MiniLM-style folders need is implemented: ``model_type`` bert,
absolute positions, GELU, mean pooling, normalised output; every other model
goes to sentence-transformers.
"""

from __future__ import annotations

import json
import math
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

_DTYPES = {"F32": np.float32, "F16": np.float16, "BF16": None, "I64": np.int64}


def read_safetensors(path: Path) -> dict[str, np.ndarray]:
    """The tensors of a ``.safetensors`` file, memory-mapped (the format is a JSON header and raw arrays)."""
    with path.open("rb") as handle:
        header_size = int.from_bytes(handle.read(8), "little")
        header = json.loads(handle.read(header_size))
    data = np.memmap(path, dtype=np.uint8, mode="r", offset=8 + header_size)
    tensors: dict[str, np.ndarray] = {}
    for name, info in header.items():
        if name == "__metadata__":
            continue
        dtype = _DTYPES.get(info["dtype"])
        if dtype is None:
            raise ValueError(f"{path}: tensor {name} has dtype {info['dtype']}, which this reader does not support")
        start, end = info["data_offsets"]
        tensors[name] = np.frombuffer(data[start:end], dtype=dtype).reshape(info["shape"])
    return tensors


def _read_json(path: Path) -> dict[str, Any]:
    return json.loads(path.read_text(encoding="utf-8")) if path.is_file() else {}


def _erf(x: np.ndarray) -> np.ndarray:
    # Abramowitz & Stegun 7.1.26: |error| < 1.5e-7, below float32's resolution at GELU's scale.
    sign = np.sign(x)
    a = np.abs(x)
    t = 1.0 / (1.0 + 0.3275911 * a)
    poly = t * (0.254829592 + t * (-0.284496736 + t * (1.421413741 + t * (-1.453152027 + t * 1.061405429))))
    result: np.ndarray = sign * (1.0 - poly * np.exp(-a * a))
    return result


def _layer_norm(x: np.ndarray, weight: np.ndarray, bias: np.ndarray, eps: float) -> np.ndarray:
    mean = x.mean(axis=-1, keepdims=True)
    var = ((x - mean) ** 2).mean(axis=-1, keepdims=True)
    normed: np.ndarray = (x - mean) / np.sqrt(var + eps) * weight + bias
    return normed


class BertEncoder:
    """Mean-pooled, normalised BERT sentence vectors computed with NumPy."""

    def __init__(self, folder: Path) -> None:
        from tokenizers import Tokenizer

        config = _read_json(folder / "config.json")
        self.max_length = int(_read_json(folder / "sentence_bert_config.json").get("max_seq_length", 512))
        self.max_length = min(self.max_length, int(config["max_position_embeddings"]))
        self.heads = int(config["num_attention_heads"])
        self.layers = int(config["num_hidden_layers"])
        self.eps = float(config.get("layer_norm_eps", 1e-12))
        self.dim = int(config["hidden_size"])
        weights = read_safetensors(folder / "model.safetensors")
        prefix = "bert." if "bert.embeddings.word_embeddings.weight" in weights else ""
        self.w = {name[len(prefix):]: np.asarray(value, dtype=np.float32)
                  for name, value in weights.items() if name.startswith(prefix) and value.dtype != np.int64}
        # Transposed once: x @ W.T for every dense layer.
        for name in list(self.w):
            if name.endswith(".weight") and self.w[name].ndim == 2 and "embeddings" not in name:
                self.w[name] = np.ascontiguousarray(self.w[name].T)
        self.tokenizer = Tokenizer.from_file(str(folder / "tokenizer.json"))
        self.tokenizer.enable_truncation(self.max_length)
        self.tokenizer.no_padding()

    def encode(self, texts: Sequence[str], batch_size: int = 32) -> np.ndarray:
        """One unit vector per text.  Texts are batched by length so padding costs little."""
        encodings = self.tokenizer.encode_batch(list(texts))
        ids = [np.asarray(e.ids, dtype=np.int64) for e in encodings]
        order = sorted(range(len(ids)), key=lambda i: len(ids[i]))
        out = np.empty((len(ids), self.dim), dtype=np.float32)
        for start in range(0, len(order), batch_size):
            chunk = order[start:start + batch_size]
            out[chunk] = self._forward([ids[i] for i in chunk])
        return out

    def _forward(self, sequences: list[np.ndarray]) -> np.ndarray:
        w = self.w
        batch, length = len(sequences), max(len(s) for s in sequences)
        ids = np.zeros((batch, length), dtype=np.int64)
        mask = np.zeros((batch, length), dtype=np.float32)
        for row, seq in enumerate(sequences):
            ids[row, :len(seq)] = seq
            mask[row, :len(seq)] = 1.0
        x = (w["embeddings.word_embeddings.weight"][ids]
             + w["embeddings.position_embeddings.weight"][:length][None, :, :]
             + w["embeddings.token_type_embeddings.weight"][0][None, None, :])
        x = _layer_norm(x, w["embeddings.LayerNorm.weight"], w["embeddings.LayerNorm.bias"], self.eps)
        head_dim = self.dim // self.heads
        scale = 1.0 / math.sqrt(head_dim)
        attention_bias = ((1.0 - mask) * np.finfo(np.float32).min)[:, None, None, :]

        def split(t: np.ndarray) -> np.ndarray:
            heads: np.ndarray = t.reshape(batch, length, self.heads, head_dim).transpose(0, 2, 1, 3)
            return heads

        for layer in range(self.layers):
            p = f"encoder.layer.{layer}."

            def dense(t: np.ndarray, name: str, p: str = p) -> np.ndarray:
                # one 2-D product (a single BLAS call), not a broadcast over the batch
                flat = t.reshape(-1, t.shape[-1]) @ w[f"{p}{name}.weight"] + w[f"{p}{name}.bias"]
                result: np.ndarray = flat.reshape(*t.shape[:-1], -1)
                return result

            q = split(dense(x, "attention.self.query"))
            k = split(dense(x, "attention.self.key"))
            v = split(dense(x, "attention.self.value"))
            scores = (q @ k.transpose(0, 1, 3, 2)) * scale + attention_bias
            scores = np.exp(scores - scores.max(axis=-1, keepdims=True))
            scores /= scores.sum(axis=-1, keepdims=True)
            context = (scores @ v).transpose(0, 2, 1, 3).reshape(batch, length, self.dim)
            x = _layer_norm(dense(context, "attention.output.dense") + x,
                            w[f"{p}attention.output.LayerNorm.weight"], w[f"{p}attention.output.LayerNorm.bias"],
                            self.eps)
            hidden = dense(x, "intermediate.dense")
            hidden = 0.5 * hidden * (1.0 + _erf(hidden * np.float32(1 / math.sqrt(2))))
            x = _layer_norm(dense(hidden, "output.dense") + x,
                            w[f"{p}output.LayerNorm.weight"], w[f"{p}output.LayerNorm.bias"], self.eps)
        pooled = (x * mask[:, :, None]).sum(axis=1) / np.maximum(mask.sum(axis=1, keepdims=True), 1e-9)
        vectors: np.ndarray = (pooled / np.linalg.norm(pooled, axis=1, keepdims=True)).astype(np.float32)
        return vectors
