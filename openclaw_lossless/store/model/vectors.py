"""Stored vectors as a backend hands them to the in-memory index (``embed/index.py``)."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import numpy.typing as npt


@dataclass(frozen=True)
class StoredVectors:
    """A block of stored vectors, as arrays: what the in-memory index appends in one step."""

    ids: npt.NDArray[np.int64]
    codes: npt.NDArray[np.int8]
    scales: npt.NDArray[np.float32]
    sessions: npt.NDArray[np.int64]
