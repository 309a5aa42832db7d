"""Forget leaves no byte behind, whatever came before it: a property test over the raw files.

Hypothesis draws interleavings of what a store lives through (turns committed new, replayed and out of
order, small and large enough to spill to overflow pages; the host's transcripts imported by catch-up and
then committed by the plugin, which claims the imported copies; redaction rescans; compactions, each with a
snapshot; archive moves under a size cap) and forgets by citation, session, agent, match and time range. Every
text carries a word of its own. After each step, no forgotten word is in any file of the state directory
(gzip archives decompressed), and none comes back; at the end, after a clean stop, every kept word is still
in the files and still found by the keyword index, and ``/stats`` agreed with the database all along.

Real parts: the app over HTTP, SQLite with FTS5 and sqlite-vec; the embedder is the tests' hash embedder
(its vectors are not what is checked).
"""

from __future__ import annotations

import gzip
import json
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st

from tests.helpers import HashEmbedder, LiveSidecar, live_sidecar, make_settings, store_rows
from tests.test_forget_black_box import state_bytes
from tests.test_history_import import Transcript
from tests.test_history_import import write_jsonl as write_transcript

pytestmark = [pytest.mark.sqlite_only, pytest.mark.slow]

T0 = 1_780_000_000_000
SESSIONS = (
    ("9a1f7c52-0000-4000-8000-000000000001", "agent:main:main", "main", "main"),
    ("9a1f7c52-0000-4000-8000-000000000002", "agent:main:side", "main", "side"),
    ("9a1f7c52-0000-4000-8000-000000000003", "agent:ops:main", "ops", "main"),
)
FILLER = "the garden plan needs more compost and a new fence along the north side "


@dataclass
class World:
    """What the test has done, and the words it expects gone."""

    server: LiveSidecar
    tmp: Path
    words: int = 0
    minute: int = 0
    turns: list[dict[str, Any]] = field(default_factory=list)
    transcripts: dict[int, tuple[Transcript, list[dict[str, Any]]]] = field(default_factory=dict)
    forgotten: set[str] = field(default_factory=set)
    compactions: int = 0

    def word(self) -> str:
        self.words += 1
        return f"pq{self.words:04d}zv"

    def text(self, large: bool) -> str:
        word = self.word()
        if not large:
            return f"Note {word} about the shed."
        half = FILLER * 45  # ~3.3 KB either side: the row spills to an overflow page
        return f"{half}{word} {half}"

    @property
    def state(self) -> Path:
        return self.server.settings.state_dir


WORD = st.integers(min_value=0, max_value=10_000)
STEP = st.one_of(
    st.tuples(st.just("commit"), st.integers(0, 2), st.booleans(), st.integers(-4, 3)),
    st.tuples(st.just("replay"), WORD),
    st.tuples(st.just("import_then_commit"), st.integers(0, 2)),
    st.tuples(st.just("catch_up")),
    st.tuples(st.just("rescan")),
    st.tuples(st.just("compact"), st.integers(0, 2)),
    st.tuples(st.just("archive")),
    st.tuples(st.just("forget"), st.sampled_from(["id", "session", "agent", "match", "time"]), WORD),
)


def _commit(world: World, session: int, large: bool, shift: int) -> None:
    world.minute += 1
    at = T0 + (world.minute + shift * 3) * 60_000  # a negative shift: older than turns already stored
    sid, key, _, _ = SESSIONS[session]
    body = {
        "advancementKey": f"turn-{len(world.turns)}",
        "sessionId": sid,
        "sessionKey": key,
        "messages": [
            {"role": "user", "content": world.text(large), "timestamp": at},
            {"role": "assistant", "content": world.text(False), "timestamp": at + 1},
        ],
    }
    _ok(world.server.post("commit-turn", body))
    world.turns.append(body)


def _replay(world: World, pick: int) -> None:
    if world.turns:
        _ok(world.server.post("commit-turn", world.turns[pick % len(world.turns)]))


def _import_then_commit(world: World, session: int) -> None:
    """The host wrote a turn to its transcript; catch-up imports it; then the plugin commits it undated."""
    sid, key, agent, name = SESSIONS[session]
    transcript, entries = world.transcripts.setdefault(session, (Transcript(sid, T0 + world.minute * 60_000), []))
    said = world.text(False)
    entries.append(transcript.user(said))
    folder = world.server.settings.openclaw_state / "agents" / agent / "sessions"
    write_transcript(folder / f"{sid}.jsonl", [transcript.header(), *entries])
    index = folder / "sessions.json"
    known = json.loads(index.read_text()) if index.exists() else {}
    known[name] = {"sessionId": sid, "updatedAt": T0}
    index.write_text(json.dumps(known))
    _catch_up(world)
    body = {
        "advancementKey": f"turn-{len(world.turns)}",
        "sessionId": sid,
        "sessionKey": key,
        "messages": [{"role": "user", "content": said}],
    }
    _ok(world.server.post("commit-turn", body))
    world.turns.append(body)


def _catch_up(world: World) -> None:
    from openclaw_lossless.transcripts import read_transcripts

    read_transcripts(world.server.sidecar.ingest, world.server.settings.openclaw_state)


def _compact(world: World, session: int) -> None:
    sid, key, _, _ = SESSIONS[session]
    if not store_rows(world.server.settings, "SELECT 1 FROM sessions WHERE session_id = ?", (sid,)):
        return
    summary = f"Summary: the user spoke of the shed, {world.word()}."
    body = {"sessionId": sid, "sessionKey": key, "compacted": True, "ok": True, "summary": summary}
    _ok(world.server.post("compact", body))


def _archive(world: World) -> None:
    """Move the oldest messages to a gzip archive, as the size cap does: to a limit below the store's size."""
    cap = world.server.sidecar.size_cap
    cap.max_db_size_mb = world.server.sidecar.db.file_bytes() * 0.8 / 1_000_000
    cap.check(force=True)


def _forget(world: World, how: str, pick: int) -> None:
    rows = store_rows(
        world.server.settings,
        "SELECT m.id, s.session_id, m.agent_id, m.created_at, m.text FROM messages m"
        " JOIN sessions s ON s.id = m.session_rowid ORDER BY m.id",
    )
    if not rows:
        return
    row = rows[pick % len(rows)]
    word = next((w for w in row[4].split() if w.startswith("pq") and w.rstrip(".").endswith("zv")), None)
    body: dict[str, Any] = {
        "id": {"ids": [f"msg:{row[0]}"]},
        "session": {"sessionId": row[1]},
        "agent": {"agentId": row[2]},
        "match": {"match": (word or "shed").rstrip(".")},
        "time": {"since": row[3] - 90, "until": row[3] + 90, "all": True},
    }[how]
    before = _words(world)
    answer = world.server.client.post("/v1/forget", json=body)
    assert answer.status_code == 200, answer.text
    after = _words(world)
    assert not after - before  # nothing came in
    gone = before - after
    assert answer.json()["forgotten"] == len({w for w in gone if not w.startswith("summary:")})
    world.forgotten |= {w.removeprefix("summary:") for w in gone}


def _words(world: World) -> set[str]:
    return _stored_words(world.server.settings)


def _stored_words(settings_: Any) -> set[str]:
    """Every word the store holds, by what it itself says: messages, compaction summaries, archive lines."""
    found: set[str] = set()
    for (text,) in store_rows(settings_, "SELECT text FROM messages"):
        found |= _own_words(text)
    for (text,) in store_rows(settings_, "SELECT coalesce(summary, '') FROM compactions"):
        found |= {"summary:" + w for w in _own_words(text)}
    for path in sorted(settings_.archive_dir.glob("*.jsonl.gz")):
        for line in gzip.decompress(path.read_bytes()).splitlines():
            record = json.loads(line)
            if "text" in record:
                found |= _own_words(str(record["text"]))
    return found


def _own_words(text: str) -> set[str]:
    return {w.strip(".,") for w in text.split() if w.startswith("pq") and w.strip(".,").endswith("zv")}


def _ok(answer: Any) -> None:
    assert answer.status_code == 200, answer.text


def _no_forgotten_bytes(world: World, when: str) -> None:
    _absent(world.forgotten, world.state, when)


def _absent(forgotten: set[str], state: Path, when: str) -> None:
    raw = state_bytes(state)
    left = sorted(w for w in forgotten if w.encode() in raw)
    assert not left, f"{when}: forgotten words still in the state dir's files: {left}"


def _counts_agree(world: World) -> None:
    world.server.wait_for_backlog()
    stats = world.server.client.get("/stats").json()
    settings_ = world.server.settings
    [(messages,)] = store_rows(settings_, "SELECT count(*) FROM messages")
    [(vectors,)] = store_rows(settings_, "SELECT count(*) FROM message_vectors")
    [(forgotten,)] = store_rows(settings_, "SELECT count(*) FROM forgotten")
    assert (stats["messages"], stats["vectors"], stats["forgotten"]) == (messages, vectors, forgotten)


@contextmanager
def _world(tmp: Path) -> Iterator[World]:
    with live_sidecar(make_settings(tmp / "state"), HashEmbedder()) as server:
        yield World(server, tmp)


STEPS: dict[str, Callable[..., None]] = {
    "commit": _commit,
    "replay": _replay,
    "import_then_commit": _import_then_commit,
    "catch_up": _catch_up,
    "rescan": lambda world: _ok(world.server.client.post("/v1/redact/rescan", json={})),
    "compact": _compact,
    "archive": _archive,
    "forget": _forget,
}


@settings(
    max_examples=25,
    deadline=None,
    phases=[Phase.explicit, Phase.reuse, Phase.generate],  # no shrinking: a failure prints its steps
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(steps=st.lists(STEP, min_size=6, max_size=16))
def test_forgotten_words_leave_every_file_and_kept_ones_stay(
    tmp_path_factory: pytest.TempPathFactory, steps: list[tuple[Any, ...]]
) -> None:
    tmp = tmp_path_factory.mktemp("forget-property")
    # a few turns first, so early forgets have something to take
    steps = [("commit", 0, False, 0), ("commit", 2, True, 0), ("import_then_commit", 1), *steps]
    with _world(tmp) as world:
        for step in steps:
            STEPS[step[0]](world, *step[1:])
            _no_forgotten_bytes(world, f"after {step}")
            assert not world.forgotten & {w.removeprefix("summary:") for w in _words(world)}, "a word came back"
        _counts_agree(world)
        state, settings_, forgotten = world.state, world.server.settings, world.forgotten
    _absent(forgotten, state, "after a clean stop")
    kept = _stored_words(settings_)
    raw = state_bytes(state)
    plain = {w.removeprefix("summary:") for w in kept}
    assert all(w.encode() in raw for w in plain), sorted(w for w in plain if w.encode() not in raw)
    hot = {w for (text,) in store_rows(settings_, "SELECT text FROM messages") for w in _own_words(text)}
    for w in hot:
        rows = store_rows(settings_, "SELECT rowid FROM messages_fts WHERE messages_fts MATCH ?", (f'"{w}"',))
        assert rows, f"kept word {w} is no longer found by the keyword index"
