"""Export and restore (``import --jsonl``) of the store as JSONL: one message per line, then the records that
point into them.

Message lines come first, one per line with the full original object and metadata, in id order; archives
(``archive.py``) write only those, so an archived slice comes back with ``import --jsonl``. After them come
lines with a ``type``: ``session``, ``turn``, ``compaction``, ``snapshot`` and ``subagentLink``, which
``recover --before-compaction``, ``snapshot show`` and a subagent's recall scope need. They follow the
messages so that a file cut short still holds every message it got to, and an importer that knows only
message lines counts them as malformed and goes on.

Import reads a file as untrusted input: each line is checked and its message captured as if committed over
HTTP (``store/model/transfer/lines.py``) before any write. A malformed line is counted and skipped; only a
file that cannot be read stops the import.

Ids are kept when free, so exporting a store, importing the file into an empty store and exporting again
gives the same bytes. A record already present (a message with the same session and content, a session or
turn with the same name, a compaction of the same session at the same time, an identical snapshot or link)
is skipped, so importing twice changes nothing. When an id is taken, the record gets a new one and whatever
later in the file points at the old id (a compaction's or snapshot's last message, an outcome's citation, a
snapshot's compaction) is pointed at the new one.

The package splits the job by direction: ``model/transfer/lines.py`` checks and captures one line, ``export.py``
reads the store out as lines, and ``restore.py`` writes checked lines back into a store.
"""

from openclaw_lossless.store.model.transfer.export import write_jsonl
from openclaw_lossless.store.sqlite.messages import give_ids_above, highest_id_given
from openclaw_lossless.store.sqlite.transfer.export import check_scope, export_store
from openclaw_lossless.store.sqlite.transfer.restore import restore_jsonl

__all__ = [
    "check_scope",
    "export_store",
    "give_ids_above",
    "highest_id_given",
    "restore_jsonl",
    "write_jsonl",
]
