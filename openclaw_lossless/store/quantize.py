"""Vector codes: int8 with a per-vector scale (what is stored and rescored) and sign bits (what is scanned).

Why int8 with a scale per vector: a unit vector's components span a different range in every vector, so one
global scale wastes most of the 256 levels; scaling each vector by its own largest component keeps the
rounding error under 0.4 % of that component, and a cosine computed from the codes moves by ~1e-4. That is a
quarter of float32's bytes on disk and in RAM, with the exact ranking kept (the scale benchmark measures the
overlap with the float32 top-k).

Why sign bits: scanning int8 codes in numpy has no BLAS to run on. One bit per dimension (48 bytes at 384-d)
is scanned with XOR and popcount many times faster; the Hamming distance only has to put the true neighbours
into a shortlist, which the int8 codes then rank exactly. Figures: docs/decisions/0008.
"""

from __future__ import annotations

import numpy as np
import numpy.typing as npt

Floats = npt.NDArray[np.float32]  # what an embedder makes (``embed/provider.Vectors``)
Codes = npt.NDArray[np.int8]
Bits = npt.NDArray[np.uint64]
Scales = npt.NDArray[np.float32]


def quantize(vectors: Floats) -> tuple[Codes, Scales]:
    """Rows of ``vectors`` as int8 codes and the float32 scale that turns each row back into floats."""
    floats = np.asarray(vectors, dtype=np.float32).reshape(len(vectors), -1)
    largest = np.abs(floats).max(axis=1) if floats.size else np.zeros(len(floats), dtype=np.float32)
    scales = np.where(largest > 0, largest / 127.0, 1.0).astype(np.float32)
    codes = np.clip(np.rint(floats / scales[:, None]), -127, 127).astype(np.int8)
    return codes, scales


def dequantize(codes: Codes, scales: Scales) -> Floats:
    floats: Floats = codes.astype(np.float32) * scales.reshape(-1, 1)
    return floats


def bit_words(dimension: int) -> int:
    """How many 64-bit words hold one sign bit per dimension."""
    return (dimension + 63) // 64


def sign_bits(codes: Codes) -> Bits:
    """One bit per dimension (set where the component is positive), packed into 64-bit words per row."""
    rows, dimension = codes.shape
    packed = np.packbits(codes > 0, axis=1)
    padded = np.zeros((rows, bit_words(dimension) * 8), dtype=np.uint8)
    padded[:, : packed.shape[1]] = packed
    return padded.view(np.uint64)
