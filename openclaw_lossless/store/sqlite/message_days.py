"""The days each message talks about: "last Saturday" said on 8 May 2023 is kept as 6 May 2023.

Why: messages and questions name time relatively, so the words of "last Saturday I climbed Castle Rock" and
"where did I climb on 6 May?" share no date; read against the moment each was said, they share a day. The
ranges come from ``timeexpr`` at capture, in the commit's own transaction (a regular-expression pass over
the message; a message without time words costs one tokenising pass), and recall reads them for the few
hundred candidates of a question that names a time (``recall/when.py``).

Only what people say is read (user and assistant messages, their first ``MAX_CHARS``): a tool's output full
of log timestamps would otherwise refer to every day it printed. Deleting a message (forget, archive)
deletes its days through the trigger of migration m008. Stores written before m008 are read in the
background, newest first, a batch per write transaction (``backfill_step``), so start-up never waits on a
big history.
"""

from __future__ import annotations

from collections.abc import Sequence

from openclaw_lossless import timeexpr
from openclaw_lossless.store.model.message_days import (
    BACKFILL_BATCH,
    BACKFILL_KEY,
    LANGUAGES_KEY,
    MAX_CHARS,
    ROLES,
    languages,
)
from openclaw_lossless.store.sqlite.connection import Connection
from openclaw_lossless.timeexpr import DayRange


def index(conn: Connection, message_id: int, role: str, text: str, created_at: float) -> None:
    """Record the days ``text`` refers to, read as said at ``created_at``."""
    if role not in ROLES or not text:
        return
    days = timeexpr.referenced(text[:MAX_CHARS], created_at)
    if days:
        conn.executemany(
            "INSERT OR IGNORE INTO message_days (message_id, first_day, last_day) VALUES (?, ?, ?)",
            [(message_id, *span.epoch_days) for span in days],
        )


def read_anew(conn: Connection, message_id: int) -> None:
    """Read a message's days from its text as it is now (``redact --rescan`` changed it): a date the rules
    now redact must not stay findable here."""
    conn.execute("DELETE FROM message_days WHERE message_id = ?", (message_id,))
    row = conn.execute("SELECT role, text, created_at FROM messages WHERE id = ?", (message_id,)).fetchone()
    if row is not None:
        index(conn, message_id, str(row[0]), str(row[1]), float(row[2]))


def of(conn: Connection, ids: Sequence[int]) -> dict[int, list[DayRange]]:
    """The day ranges each message refers to (messages that name none are absent)."""
    found: dict[int, list[DayRange]] = {}
    for start in range(0, len(ids), 500):
        chunk = list(ids[start : start + 500])
        marks = ",".join("?" * len(chunk))
        rows = conn.execute(
            f"SELECT message_id, first_day, last_day FROM message_days WHERE message_id IN ({marks})", chunk
        )
        for message_id, first, last in rows:
            found.setdefault(int(message_id), []).append(DayRange.from_epoch_days(int(first), int(last)))
    return found


def read_again(conn: Connection) -> None:
    """Have the server read every stored message's days again in the background (after a salvage, whose
    new file gets its rows copied in after the migrations ran)."""
    last = conn.execute("SELECT max(id) FROM messages").fetchone()[0]
    if last is not None:
        conn.execute("INSERT OR REPLACE INTO meta (key, value) VALUES (?, ?)", (BACKFILL_KEY, str(int(last) + 1)))


def read_again_in_new_languages(conn: Connection) -> bool:
    """Queue every message to be read again when the stored days were read in fewer languages than
    ``timeexpr`` reads now (a store from before "上周六" or "letzten Samstag" were read); whether it did."""
    row = conn.execute("SELECT value FROM meta WHERE key = ?", (LANGUAGES_KEY,)).fetchone()
    if row is not None and str(row[0]) == languages():
        return False
    read_again(conn)
    conn.execute("INSERT OR REPLACE INTO meta (key, value) VALUES (?, ?)", (LANGUAGES_KEY, languages()))
    return True


def backfill_pending(conn: Connection) -> bool:
    return conn.execute("SELECT 1 FROM meta WHERE key = ?", (BACKFILL_KEY,)).fetchone() is not None


def backfill_step(conn: Connection, batch: int = BACKFILL_BATCH) -> bool:
    """Read the next ``batch`` messages stored before m008 (newest first); whether any are left."""
    row = conn.execute("SELECT value FROM meta WHERE key = ?", (BACKFILL_KEY,)).fetchone()
    if row is None:
        return False
    rows = conn.execute(
        "SELECT id, role, text, created_at FROM messages WHERE id < ? ORDER BY id DESC LIMIT ?", (int(row[0]), batch)
    ).fetchall()
    for message_id, role, text, created_at in rows:
        index(conn, int(message_id), str(role), str(text), float(created_at))
    if len(rows) < batch:
        conn.execute("DELETE FROM meta WHERE key = ?", (BACKFILL_KEY,))
        return False
    conn.execute("UPDATE meta SET value = ? WHERE key = ?", (str(rows[-1][0]), BACKFILL_KEY))
    return True
