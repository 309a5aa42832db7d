"""A sidecar starting on a PostgreSQL store learns the words of the store's recent prompts in the background
(``recall/learn.py``), so that its first turns do not count them and probe where their newest matches start."""

from __future__ import annotations

import threading
from pathlib import Path

from openclaw_lossless.capture.records import MessageRecord
from openclaw_lossless.recall.assemble import Descriptor
from openclaw_lossless.sidecar import Sidecar
from openclaw_lossless.store.backend import SQLITE, postgres
from openclaw_lossless.store.postgres import migrations
from openclaw_lossless.store.postgres.connection import Database
from openclaw_lossless.store.sqlite import messages as sqlite_messages
from openclaw_lossless.store.sqlite import migrations as sqlite_migrations
from openclaw_lossless.store.sqlite import sessions as sqlite_sessions
from openclaw_lossless.store.sqlite.connection import Connection as SqliteConnection
from openclaw_lossless.store.sqlite.connection import Database as SqliteDatabase
from tests.helpers import make_settings
from tests.postgres.backend.conftest import Place
from tests.postgres.backend.test_messages import commit, said

LEARNING = "lossless-word-learning"


def turns() -> list[tuple[str, list[str]]]:
    """Twelve turns about one ferry (every word of the question in more than five messages), and one
    injected-only prompt (no text of its own)."""
    made = [
        (f"k{n}", [f"When does the ferry to Lisbon leave on day {n}?", "The ferry to Lisbon leaves at nine."])
        for n in range(12)
    ]
    return [*made, ("k12", ["", "Nothing to answer."])]


def fill(db: Database) -> None:
    for key, (prompt, answer) in turns():
        commit(db, key, [said(prompt), said(answer, role="assistant")])


def learning_threads() -> list[threading.Thread]:
    return [thread for thread in threading.enumerate() if thread.name == LEARNING]


def test_a_sidecar_learns_the_words_of_the_recent_prompts_before_its_first_turn_asks(
    place: Place, tmp_path: Path
) -> None:
    db = Database(place.url, schema=place.schema, write_pool_size=1, read_pool_size=1)
    try:
        migrations.migrate(db)
        fill(db)
    finally:
        db.close()
    settings = make_settings(
        tmp_path / "state",
        database_url=place.url,
        database_schema=place.schema,
        embedding_provider="none",
        keyword_term_limit=5,  # every word of the question is common: the turn would probe where its matches start
    )
    sidecar = Sidecar(settings, start_worker=False, background_load=True)  # as ``serve`` starts it
    try:
        for thread in learning_threads():
            thread.join(30)
        terms = sidecar.assembler.terms
        assert terms is not None
        counts, starts = terms.learnt()
        assert counts >= 4 and starts >= 1, (counts, starts)  # when, ferry, lisbon, leave, day...; a start

        result = sidecar.queries.assemble(
            "live", "agent:main:live", [Descriptor("user", "w1", 5, None, "hello")],
            "When does the ferry to Lisbon leave?", None, sidecar.settings.recall,
        )  # fmt: skip

        assert terms.learnt() == (counts, starts)  # the turn learnt nothing: it was all known
        assert "keyword" in result.lanes_ran and result.recalled, result
        assert "ferry to Lisbon" in result.system_prompt_addition  # the recalled block quotes them
    finally:
        sidecar.close()
    assert not learning_threads()  # close waits for it


def test_the_recent_prompts_are_the_newest_user_texts_on_both_backends(place: Place, tmp_path: Path) -> None:
    """Newest first, the user's only, none without text, at most the limit: the same on SQLite."""
    db = Database(place.url, schema=place.schema, write_pool_size=1, read_pool_size=1)
    local = SqliteDatabase(tmp_path / "lossless.sqlite")
    try:
        migrations.migrate(db)
        sqlite_migrations.migrate(local)
        fill(db)
        for key, (prompt, answer) in turns():
            records = [said(prompt), said(answer, role="assistant")]

            def work(conn: SqliteConnection, key: str = key, records: list[MessageRecord] = records) -> object:
                session = sqlite_sessions.ensure_session(conn, "s1", "agent:main:s1")
                identities = sqlite_messages.turn_identities(records, key)
                return sqlite_messages.commit_turn(conn, session, key, identities, heartbeat=False)

            local.write(work)

        found = postgres().messages.recent_prompts(db.reader(), 3)
        assert found == [f"When does the ferry to Lisbon leave on day {n}?" for n in (11, 10, 9)]
        assert SQLITE.messages.recent_prompts(local.reader(), 3) == found
        assert len(postgres().messages.recent_prompts(db.reader(), 100)) == 12
    finally:
        db.close()
        local.close()
