"""The WAL is copied back into the database by a thread of its own, never inside a commit, and stays small."""

from __future__ import annotations

import os
import threading
import time
from pathlib import Path

from openclaw_lossless.store.sqlite.connection import Database

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


def test_the_readers_of_threads_that_ended_are_closed(tmp_path: Path) -> None:
    """The server's worker threads come and go; each one's read connection (and its page cache) used to stay
    open for the life of the process. 50 threads, one after another, leave one reader, not 50."""
    db = Database(tmp_path / "state" / "store.sqlite")
    try:
        db.write(lambda conn: conn.execute("CREATE TABLE notes (text TEXT)"))
        db.write(lambda conn: conn.execute("INSERT INTO notes VALUES ('hello')"))
        seen: list[str] = []
        for _ in range(50):
            worker = threading.Thread(
                target=lambda: seen.append(db.reader().execute("SELECT text FROM notes").fetchone()[0])
            )
            worker.start()
            worker.join()
        assert seen == ["hello"] * 50
        assert db.reader_count() == 1
        assert db.reader().execute("SELECT count(*) FROM notes").fetchone()[0] == 1
        assert db.reader_count() == 1  # this thread's own; the last worker's was closed when it was opened
    finally:
        db.close()
