"""Export and restore as JSONL on PostgreSQL: the same lines as the SQLite store's (``store/sqlite/transfer/``).

The file format, its layout and the import's rules are the SQLite package's, described in its docstring;
the line parser, ``write_jsonl`` and the report are shared with it (``store/model/transfer/``). This package holds
only what reads and writes PostgreSQL: ``export.py`` (one snapshot, streamed) and ``restore.py`` (ids
kept when free, with the sequences moved past them; batches safe to run again).
"""

from openclaw_lossless.store.model.transfer.export import write_jsonl
from openclaw_lossless.store.postgres.messages import give_ids_above, highest_id_given
from openclaw_lossless.store.postgres.transfer.export import check_scope, export_store
from openclaw_lossless.store.postgres.transfer.restore import restore_jsonl

__all__ = [
    "check_scope",
    "export_store",
    "give_ids_above",
    "highest_id_given",
    "restore_jsonl",
    "write_jsonl",
]
