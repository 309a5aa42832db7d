"""The store's own error for what a database driver raised and the project has no name for.

Callers catch this, never a driver's classes: each backend translates its driver's errors at its seam
(``Database.write`` and ``Database.translated``), into the project's tree (``errors.py``: a full disk, a
damaged or unreachable store) when it can name the cause, else into ``StoreError``.
"""

from __future__ import annotations


class StoreError(Exception):
    """A statement the database refused for a reason ``errors.py`` does not name; ``str()`` is the driver's
    message, and the driver's error is its ``__cause__``."""
