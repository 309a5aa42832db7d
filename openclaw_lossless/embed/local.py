"""The embedded embedding provider: all-MiniLM-L6-v2 (default) or multilingual-e5-small, on onnxruntime +
tokenizers, no torch (the model is chosen with ``local_model``; ``model_files`` describes both).

It owns tokenization and batching; the graph (built by ``model_files``) does the encoder, the mean
pooling and the L2 normalisation. Two details keep its vectors equal to sentence-transformers':

* the shipped ``tokenizer.json`` truncates and pads to a fixed 128 tokens; sentence-transformers
  truncates at 256 (``max_seq_length``) and pads to the longest text of the batch. We truncate at
  ``max_length`` and pad each batch ourselves;
* texts are sorted by token count before batching, so a batch holds similar lengths and wastes few
  pad tokens (a batch is also capped in padded tokens), and the rows are put back in the caller's order.

The int8 graph quantizes activations dynamically, with one scale per tensor, i.e. per batch: a text's
int8 vector would depend on its batch-mates (cosine down to 0.96 between a text alone and the same text
in a batch). So the int8 variant runs each text on its own, which costs nothing measurable for
message-length texts on CPU, and a text always gets the same vector, as a query or as a stored message.

e5 wants ``query: `` before a question and ``passage: `` before a stored text: ``embed`` is what the
backlog calls for messages (passages), ``embed_queries`` what recall calls for prompts. Its tokenizer is
preceded by the model's per-code-point normalisation (``normalisation.json``, NFKC-like folding).

Loading is a tokenizer file and one ONNX session, a few tenths of a second (about a second for e5, whose
250k-piece vocabulary is most of its size), so the sidecar can build the provider at start-up.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt
import onnxruntime as ort
from tokenizers import Encoding, Tokenizer

from openclaw_lossless.embed.model_files import DIMENSION, MODEL_NAME, VARIANTS, require_model, spec_of
from openclaw_lossless.embed.provider import ProviderIdentity, Vectors
from openclaw_lossless.errors import EmbeddingUnavailable

Int64Array = npt.NDArray[np.int64]
TOKEN_BUDGET = 4096  # padded tokens per batch: 32 texts of 128 tokens, or 16 of the 256 maximum
_SPACE_RUN = re.compile(" {2,}")


def _load_normalisation(path: Path | None) -> dict[int, str] | None:
    """``str.translate`` table of a model whose tokenizer folds characters first (e5), else None."""
    if path is None:
        return None
    return {int(cp): text for cp, text in json.loads(path.read_text(encoding="utf-8")).items()}


def _load_tokenizer(path: Path, max_length: int) -> Tokenizer:
    """The model's tokenizer with the fixed-128 padding/truncation of its file replaced (see module doc)."""
    tokenizer = Tokenizer.from_file(str(path))
    tokenizer.no_padding()
    tokenizer.enable_truncation(max_length=max_length)
    return tokenizer


def _load_session(path: Path, threads: int) -> Any:
    """One CPU session; threads bound so the sidecar never takes more cores than it was given."""
    options = ort.SessionOptions()
    options.intra_op_num_threads = threads
    options.inter_op_num_threads = 1
    options.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
    options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
    # Do not busy-wait between ops: the host (the OpenClaw gateway) shares these cores.
    options.add_session_config_entry("session.intra_op.allow_spinning", "0")
    options.log_severity_level = 3
    try:
        return ort.InferenceSession(str(path), options, providers=["CPUExecutionProvider"])
    except Exception as exc:  # onnxruntime raises its own exception types for unreadable graphs
        raise EmbeddingUnavailable(f"cannot load the local embedding model {path}: {exc}") from exc


def _pad(encodings: list[Encoding]) -> tuple[Int64Array, Int64Array]:
    """Token ids and attention mask, right-padded with id 0 to the longest encoding of the batch."""
    width = max(len(e.ids) for e in encodings)
    ids = np.zeros((len(encodings), width), dtype=np.int64)
    mask = np.zeros((len(encodings), width), dtype=np.int64)
    for row, encoding in enumerate(encodings):
        ids[row, : len(encoding.ids)] = encoding.ids
        mask[row, : len(encoding.ids)] = 1
    return ids, mask


def _printable(text: str) -> str:
    """Lone surrogates (possible in JSON-decoded text) cannot cross into the Rust tokenizer."""
    return text.encode("utf-8", "replace").decode("utf-8")


class LocalEmbedder:
    """all-MiniLM-L6-v2 or multilingual-e5-small (both 384-d), fp32 or int8, implementing ``EmbeddingProvider``.

    Raises ``EmbeddingUnavailable`` at construction when the model files are missing (the message names
    the fetch command). ``embed`` may be called from several threads: the session and tokenizer are
    only read.
    """

    def __init__(
        self,
        model_dir: Path,
        variant: str = "fp32",
        threads: int = 1,
        max_length: int | None = None,
        batch_size: int = 32,
        model: str = MODEL_NAME,
    ) -> None:
        if variant not in VARIANTS:
            raise ValueError(f"unknown variant {variant!r}; expected one of {VARIANTS}")
        spec = spec_of(model)
        max_length = spec.max_length if max_length is None else max_length
        if threads < 1 or max_length < 2 or batch_size < 1:
            raise ValueError("threads and batch_size must be >= 1, max_length >= 2")
        paths = require_model(model_dir, spec)
        self._tokenizer = _load_tokenizer(paths.tokenizer, max_length)
        self._normalisation = _load_normalisation(paths.normalisation)
        self._query_prefix, self._passage_prefix = spec.query_prefix, spec.passage_prefix
        self._session: Any = _load_session(paths.onnx(variant), threads)
        self._batch_size = 1 if variant == "int8" else batch_size  # see the module doc
        self._identity = ProviderIdentity(provider="local", model=spec.name, variant=variant, dimension=DIMENSION)

    @property
    def identity(self) -> ProviderIdentity:
        return self._identity

    def embed(self, texts: list[str]) -> Vectors:
        """L2-normalised float32 rows in the order of ``texts`` (as passages); ``[]`` gives shape (0, 384)."""
        return self._embed([self._passage_prefix + text for text in texts])

    def embed_queries(self, texts: list[str]) -> Vectors:
        """The same for questions: e5 marks them ``query: ``; for all-MiniLM-L6-v2 this is ``embed``."""
        return self._embed([self._query_prefix + text for text in texts])

    def _embed(self, texts: list[str]) -> Vectors:
        if self._session is None:
            raise EmbeddingUnavailable("the local embedding model was closed")
        out = np.zeros((len(texts), DIMENSION), dtype=np.float32)
        if not texts:
            return out
        encodings = self._tokenize(texts)
        for rows in self._batches(encodings):
            out[rows] = self._run([encodings[i] for i in rows])
        return out

    def close(self) -> None:
        """Drop the session (its memory goes with it); later ``embed`` calls raise ``EmbeddingUnavailable``."""
        self._session = None

    def _batches(self, encodings: list[Encoding]) -> Iterator[list[int]]:
        """Row indices by ascending token count, cut at ``batch_size`` rows or ``TOKEN_BUDGET`` padded tokens.

        The budget keeps one long text from padding 31 short ones to 256 tokens.
        """
        order = sorted(range(len(encodings)), key=lambda i: len(encodings[i].ids))
        batch: list[int] = []
        for index in order:
            padded = (len(batch) + 1) * len(encodings[index].ids)
            if batch and (len(batch) == self._batch_size or padded > TOKEN_BUDGET):
                yield batch
                batch = []
            batch.append(index)
        yield batch

    def _tokenize(self, texts: list[str]) -> list[Encoding]:
        """One ``encode`` per text: on 2 cores it beats ``encode_batch``, whose Rust thread pool competes with
        ONNX Runtime for the cores and warns when the process later forks."""
        return [self._encode(text) for text in texts]

    def _encode(self, text: str) -> Encoding:
        if self._normalisation is not None:
            text = _SPACE_RUN.sub(" ", text.translate(self._normalisation)).strip()
        try:
            return self._tokenizer.encode(text)
        except TypeError:  # a lone surrogate; rare, so only then pay for the cleanup
            return self._tokenizer.encode(_printable(text))

    def _run(self, encodings: list[Encoding]) -> Vectors:
        ids, mask = _pad(encodings)
        feed = {"input_ids": ids, "attention_mask": mask, "token_type_ids": np.zeros_like(ids)}
        session = self._session
        if session is None:
            raise EmbeddingUnavailable("the local embedding model was closed")
        try:
            (vectors,) = session.run(None, feed)  # the graph has one output
        except Exception as exc:  # onnxruntime's own error types; the caller keeps the work queued
            raise EmbeddingUnavailable(f"local embedding model failed: {exc}") from exc
        return np.asarray(vectors, dtype=np.float32)
