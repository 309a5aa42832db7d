"""The WAL is copied back into the database by a thread of its own, never inside a commit, and stays small."""

from __future__ import annotations

import os
import time
from pathlib import Path

from openclaw_lossless.store.connection import Database

CHUNK = 100_000


def test_the_wal_is_checkpointed_in_the_background_and_stays_bounded(tmp_path: Path) -> None:
    """SQLite's own checkpoints ran inside whichever commit filled the WAL; with those off, a WAL that nothing
    checkpointed would grow by every byte written. 4 MB written as 40 commits keep it under 2.5 MB."""
    path = tmp_path / "state" / "store.sqlite"
    db = Database(path, checkpoint_bytes=256 * 1024)
    try:
        db.write(lambda conn: conn.execute("CREATE TABLE blobs (data BLOB)"))
        largest = 0
        for _ in range(40):
            db.write(lambda conn: conn.execute("INSERT INTO blobs VALUES (?)", (os.urandom(CHUNK),)))
            largest = max(largest, Path(f"{path}-wal").stat().st_size)
            time.sleep(0.1)
        assert largest < 2_500_000, f"the WAL reached {largest:,} bytes"
        assert db.reader().execute("SELECT count(*), sum(length(data)) FROM blobs").fetchone() == (40, 40 * CHUNK)
        assert db.write(lambda conn: conn.execute("PRAGMA wal_autocheckpoint").fetchone()[0]) == 0
    finally:
        db.close()
    reopened = Database(path)
    try:
        assert reopened.reader().execute("SELECT count(*) FROM blobs").fetchone()[0] == 40
    finally:
        reopened.close()
