"""Time as people say it, through the real hooks: "last Saturday" said on 8 May 2023 is found by a question
about 6 May, and a "when did ..." question prefers the message that says when.

Both messages of each case share the question's words about equally, so only their time tells them apart; the
block holds one match (no neighbours), so what the block holds is what ranked first. The same store with
``recall_time_boost`` 0 recalls the other message: the time is what decides.
"""

from __future__ import annotations

import functools
import time
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from openclaw_lossless.salvage import salvage
from openclaw_lossless.sidecar import Sidecar, place_of
from openclaw_lossless.store.backend import connect
from openclaw_lossless.store.sqlite import message_days, migrations
from openclaw_lossless.store.sqlite.connection import Database
from openclaw_lossless.store.sqlite.migrations import MIGRATIONS, migrate
from tests.helpers import HashEmbedder, LiveSidecar, live_sidecar, make_settings, run_cli_json

SAID = datetime(2023, 5, 8, 13, 0, tzinfo=UTC)  # a Monday
ASKED = datetime(2023, 6, 1, 9, 0, tzinfo=UTC)


def ms(when: datetime, minutes: int = 0) -> int:
    return int(when.timestamp() * 1000) + minutes * 60_000


def commit(server: LiveSidecar, texts: list[str], session: str = "climbing") -> None:
    messages = [{"role": "user", "content": text, "timestamp": ms(SAID, n)} for n, text in enumerate(texts)]
    body = {"sessionId": session, "sessionKey": "agent:main:main", "advancementKey": f"{session}-1"}
    response = server.post("commit-turn", body | {"messages": messages})
    assert response.status_code == 200, response.text
    server.wait_for_backlog()


def ask(server: LiveSidecar, question: str) -> dict[str, Any]:
    body = {"sessionId": "later", "sessionKey": "agent:main:main", "prompt": question, "descriptors": []}
    response = server.post("assemble", body | {"now": ms(ASKED), "tokenBudget": 4000, "trace": True})
    assert response.status_code == 200, response.text
    answer: dict[str, Any] = response.json()
    return answer


@pytest.fixture(params=[0.2, 0.0], ids=["time", "no-time"])
def server(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[LiveSidecar]:
    settings = make_settings(tmp_path, retrieval_count=1, neighbour_radius=0, recall_time_boost=request.param)
    with live_sidecar(settings, HashEmbedder()) as live:
        yield live


PAST = "Last Saturday I went climbing at Castle Rock with Dana."
COMING = "Next Saturday I am going climbing at Mission Gorge with Dana."


def test_last_saturday_is_found_by_a_question_naming_that_day(server: LiveSidecar) -> None:
    commit(server, [PAST, COMING])
    answer = ask(server, "Where did I go climbing on 6 May 2023?")
    block = answer["systemPromptAddition"]
    if server.settings.recall_time_boost > 0:
        assert PAST in block and COMING not in block
        kept = [c for c in answer["trace"]["candidates"] if c["decision"] == "kept"]
        assert kept[0]["time_match"] == "refers"
    else:  # without the time, the message sharing more of the question's words wins
        assert COMING in block and PAST not in block


def test_a_when_question_prefers_the_message_that_says_when(server: LiveSidecar) -> None:
    dated = "Yesterday I went to the pottery workshop with my sister."
    undated = "I went to the pottery workshop with my sister."
    commit(server, [undated, dated])
    block = ask(server, "When did I go to the pottery workshop with my sister?")["systemPromptAddition"]
    dated_line, undated_line = f"]: {dated} [msg:", f"]: {undated} [msg:"  # one is inside the other
    if server.settings.recall_time_boost > 0:
        assert dated_line in block and undated_line not in block
    else:
        assert undated_line in block and dated_line not in block


def test_a_chinese_question_about_last_saturday_recalls_what_was_said_that_saturday(server: LiveSidecar) -> None:
    """ "上周六我们说了什么" asked on Thursday 1 June is about Saturday 27 May: the message written that day wins
    over the same kind of message written on the Tuesday after, which wins without the time (it is newer).

    The test embedder shares no word with an unspaced question, so both messages are equally (barely) similar
    to it; ``minSimilarity`` 0 lets both be weighed, as a multilingual model or a bigram keyword index would."""
    saturday = "我们讨论了搬家的预算。"
    tuesday = "我们讨论了搬家的日期。"
    said = {saturday: datetime(2023, 5, 27, 15, 0, tzinfo=UTC), tuesday: datetime(2023, 5, 30, 15, 0, tzinfo=UTC)}
    messages = [{"role": "user", "content": text, "timestamp": ms(when)} for text, when in said.items()]
    body = {"sessionId": "moving", "sessionKey": "agent:main:main", "advancementKey": "moving-1"}
    assert server.post("commit-turn", body | {"messages": messages}).status_code == 200
    server.wait_for_backlog()
    question = {"sessionId": "later", "sessionKey": "agent:main:main", "prompt": "上周六我们说了什么？"}
    extra = {"now": ms(ASKED), "tokenBudget": 4000, "trace": True, "config": {"minSimilarity": 0.0}}
    answer = server.post("assemble", question | extra).json()
    block = answer["systemPromptAddition"]
    if server.settings.recall_time_boost > 0:
        assert saturday in block and tuesday not in block
        kept = [c for c in answer["trace"]["candidates"] if c["decision"] == "kept"]
        assert kept[0]["time_match"] == "written"
    else:
        assert tuesday in block and saturday not in block


def test_a_store_read_in_english_only_reads_its_messages_days_again_in_every_language(tmp_path: Path) -> None:
    """A store whose days a release reading only English kept: "上周六" and "letzten Samstag" stored then refer
    to nothing, until the server, started on it, reads every message again in the background."""
    settings = make_settings(tmp_path)
    texts = ["上周六我们去爬山了。", "Letzten Samstag waren wir klettern.", PAST]
    with live_sidecar(settings, HashEmbedder()) as server:
        commit(server, texts)
        db, days = server.sidecar.db, server.sidecar.ops.message_days
        assert set(days.of(db.reader(), [1, 2, 3])) == {1, 2, 3}

    store = connect(place_of(settings))  # as the English-only release left it: only English days, marked so
    try:
        _as_read_in_english_only(store.db, store.ops.message_days)
        assert set(store.ops.message_days.of(store.db.reader(), [1, 2, 3])) == {3}
    finally:
        store.db.close()
    sidecar = Sidecar(settings, provider=HashEmbedder(), background_load=True)
    try:
        deadline = time.monotonic() + 30
        while len(found := sidecar.ops.message_days.of(sidecar.db.reader(), [1, 2, 3])) < 3:
            assert time.monotonic() < deadline, "the messages were not read again"
            time.sleep(0.05)
        assert not sidecar.db.write(sidecar.ops.message_days.read_again_in_new_languages)  # once only
    finally:
        sidecar.close()
    saturday = [("2023-05-06", "2023-05-06")]
    assert [[(r.first.isoformat(), r.last.isoformat()) for r in found[i]] for i in (1, 2, 3)] == [saturday] * 3


def _as_read_in_english_only(db: Any, days: Any) -> None:
    def rewind(conn: Any) -> None:
        conn.execute("DELETE FROM message_days WHERE message_id IN (1, 2)")
        conn.execute("UPDATE meta SET value = 'en' WHERE key = 'message_days_languages'")

    db.write(rewind)


def _migrated_before_days(path: Path, texts: list[str]) -> None:
    """A store as a release before m008 left it: its messages' days were never read."""
    db = Database(path)
    try:
        db.write(migrations._applied_names)
        for fn in MIGRATIONS[: MIGRATIONS.index(migrations.m008_message_days)]:
            db.write(functools.partial(migrations._apply, fn=fn))

        def fill(conn: Any) -> None:
            conn.execute("INSERT INTO sessions VALUES (1, 's', NULL, 'main', 1, 1)")
            for number, text in enumerate(texts, 1):
                conn.execute(
                    "INSERT INTO messages (session_rowid, agent_id, role, created_at, stored_at, text, original,"
                    " content_hash, window_key, tokens) VALUES (1, 'main', 'user', ?, ?, ?, '{}', ?, ?, 3)",
                    (SAID.timestamp(), SAID.timestamp(), text, f"h{number}".encode(), f"k{number}"),
                )

        db.write(fill)
    finally:
        db.close()


def _days(path: Path) -> list[tuple[int, str, str]]:
    db = Database(path)
    try:
        found = message_days.of(db.reader(), [1, 2, 3])
        return sorted((i, r.first.isoformat(), r.last.isoformat()) for i, spans in found.items() for r in spans)
    finally:
        db.close()


@pytest.mark.sqlite_only  # a SQLite file as a release before its migration m008 left it
def test_an_older_store_learns_its_messages_days_in_the_background(tmp_path: Path) -> None:
    settings = make_settings(tmp_path)
    _migrated_before_days(settings.database_path, [PAST, "no time here", "we met yesterday"])
    db = Database(settings.database_path)
    try:
        assert migrate(db) == ["m008_message_days", *[f.__name__ for f in MIGRATIONS[8:]]]
        assert message_days.backfill_pending(db.reader())  # start-up did not read them...
    finally:
        db.close()
    assert _days(settings.database_path) == []
    sidecar = Sidecar(settings, provider=HashEmbedder(), background_load=True)
    try:
        _wait_for_backfill(sidecar)  # ...the server does, in the background
    finally:
        sidecar.close()
    assert _days(settings.database_path) == [(1, "2023-05-06", "2023-05-06"), (3, "2023-05-07", "2023-05-07")]


def _wait_for_backfill(sidecar: Sidecar) -> None:
    deadline = time.monotonic() + 30
    while message_days.backfill_pending(sidecar.db.reader()):
        assert time.monotonic() < deadline, "the backfill did not finish"
        time.sleep(0.05)


@pytest.mark.sqlite_only  # salvage reads a damaged SQLite file's pages
def test_a_salvaged_store_reads_its_messages_days_again(tmp_path: Path) -> None:
    settings = make_settings(tmp_path / "first")
    with live_sidecar(settings, HashEmbedder()) as server:
        commit(server, [PAST])
    out = tmp_path / "salvaged.sqlite"
    assert salvage(settings.database_path, out)["complete"] is True
    sidecar = Sidecar(make_settings(tmp_path / "second", db_path=out), provider=HashEmbedder(), background_load=True)
    try:
        _wait_for_backfill(sidecar)
        found = message_days.of(sidecar.db.reader(), [1])
    finally:
        sidecar.close()
    assert [(r.first.isoformat(), r.last.isoformat()) for r in found[1]] == [("2023-05-06", "2023-05-06")]


def test_a_date_redacted_by_a_rescan_is_no_longer_a_day_the_message_refers_to(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    settings = make_settings(tmp_path)
    with live_sidecar(settings, HashEmbedder()) as server:
        commit(server, ["I was born on 5 May 1990 in Leeds, and we met yesterday."])
    monkeypatch.setenv("LOSSLESS_REDACT_PATTERNS", '["\\\\d+ May 1990"]')  # the operator now keeps birthdays out
    assert run_cli_json(capsys, settings.state_dir, "redact", "--rescan")["changed"] >= 1
    store = connect(place_of(settings))
    try:
        days = store.ops.message_days.of(store.db.reader(), [1])[1]
    finally:
        store.db.close()
    assert [(r.first.isoformat(), r.last.isoformat()) for r in days] == [("2023-05-07", "2023-05-07")]


def test_a_deleted_message_takes_its_days_with_it(tmp_path: Path) -> None:
    settings = make_settings(tmp_path)
    with live_sidecar(settings, HashEmbedder()) as server:
        commit(server, [PAST, "we met yesterday"])
        db, days_of = server.sidecar.db, server.sidecar.ops.message_days.of
        assert len(days_of(db.reader(), [1, 2])) == 2
        db.write(lambda conn: conn.execute("DELETE FROM messages WHERE id = 1"))
        assert list(days_of(db.reader(), [1, 2])) == [2]


def test_tool_output_dates_are_not_what_a_message_refers_to(tmp_path: Path) -> None:
    settings = make_settings(tmp_path)
    with live_sidecar(settings, HashEmbedder()) as server:
        log = {"role": "toolResult", "toolCallId": "t1", "toolName": "bash", "timestamp": ms(SAID),
               "content": [{"type": "text", "text": "2023-01-02 build ok\n2023-01-03 build ok"}]}  # fmt: skip
        body = {"sessionId": "tools", "sessionKey": "agent:main:main", "advancementKey": "tools-1"}
        assert server.post("commit-turn", body | {"messages": [log]}).status_code == 200
        assert server.sidecar.ops.message_days.of(server.sidecar.db.reader(), [1]) == {}
