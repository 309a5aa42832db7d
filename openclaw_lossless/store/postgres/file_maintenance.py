"""File maintenance (``api.FileMaintenance``) on PostgreSQL: nothing to do, and why.

SQLite keeps its store in one file the sidecar looks after itself: the write-ahead log is checkpointed back
into it, and ``secure_delete`` zeroes freed pages as they are freed. A PostgreSQL server looks after its own
files: its checkpointer writes the WAL back to the data files on its schedule, and a client can neither
force its WAL out of existence (archiving and replicas may still need it) nor ask it to zero freed space.
What PostgreSQL offers instead for removed text is ``VACUUM``, run where text is removed on purpose
(``rewrite.optimize_fts`` after ``redact --rescan``, and forgetting). The two calls are therefore answered
as no-ops here, so callers written for both backends need no test of which one they hold.

The functions are ``connection.py``'s (defined beside the ``Database`` they take), named here so that the
module a caller swaps for ``store/sqlite/connection.py``'s maintenance is a module of its own.
"""

from __future__ import annotations

from openclaw_lossless.store.postgres.connection import checkpoint_fully, set_secure_delete

__all__ = ["checkpoint_fully", "set_secure_delete"]
