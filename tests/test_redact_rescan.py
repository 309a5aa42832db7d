"""``redact --rescan``: secrets stored under older, weaker rules are redacted everywhere the store keeps text.

The old store is made the way an older version made it: the sidecar's capture runs with no rules at all, so the
secrets land in message text, originals, the FTS index, the vectors, a compaction summary, a subagent's end
reason and an archive. Then the CLI rescans with the current rules, on the file and through a live sidecar.
"""

from __future__ import annotations

import dataclasses
import gc
import gzip
import hashlib
import stat
from pathlib import Path
from typing import Any

import httpx
import numpy as np
import pytest

from openclaw_lossless.capture.redact import Redactor
from openclaw_lossless.cli.main import main
from openclaw_lossless.config import Settings
from openclaw_lossless.rescan import CURSOR_KEY, Rescan
from openclaw_lossless.sidecar import Sidecar
from openclaw_lossless.store.model.snapshots import CompactionRecord
from openclaw_lossless.store.sqlite.connection import open_connection
from tests.helpers import (
    HashEmbedder,
    assert_error,
    keyword_rows,
    live_sidecar,
    make_settings,
    on_postgres,
    run_cli,
    run_cli_json,
    store_rows,
    stored_bytes,
)

GITHUB = "ghp_R7x2Kq9Lm4Np8Vt3Wz6Yb1Cd5Ef0Gh2Ij4Kl"
STRIPE = "sk_live_51Hq8ZpQ2rT7vX9yB3nM4kL6jH8gF"
DEPLOY = "Qm9vYmFyLWJhei1xdXV4LTQyLTk4Nzc2NTQz"
SECRETS = (GITHUB, STRIPE, DEPLOY)
TEXTS = (
    f"here is my github token {GITHUB} for the pelican deploy",
    f"STRIPE_SECRET={STRIPE} goes in the pelican env file",
    f"export DEPLOY_TOKEN={DEPLOY} then run the pelican script",
)


def _message(text: str, at: int) -> dict[str, object]:
    return {"role": "user", "content": [{"type": "text", "text": text}], "timestamp": at}


def _old_store(settings: Settings) -> None:
    """Messages, a compaction, a subagent's end and an archive, all stored with no redaction rules."""
    embedder = HashEmbedder()
    sidecar = Sidecar(settings, provider=embedder, start_worker=False)
    try:
        sidecar.ingest.capture_options = dataclasses.replace(sidecar.capture_options, redactor=Redactor(()))
        recall = sidecar.settings.recall
        for n, text in enumerate(TEXTS):
            sidecar.ingest.commit_turn(f"turn-{n}", "s1", "agent:main:main", [_message(text, 1_700_000_000_000 + n)],
                                heartbeat=False, recall=recall)  # fmt: skip
        plain = [_message("an ordinary pelican note", 1_700_000_100_000)]
        sidecar.ingest.commit_turn("turn-plain", "s1", "agent:main:main", plain, heartbeat=False, recall=recall)
        sidecar.ingest.compact(
            "s1", "agent:main:main", CompactionRecord(10, 5, True, f"user gave token {GITHUB}", None)
        )
        sidecar.ingest.subagent_spawn("agent:main:main", "agent:main:subagent:x", None)
        sidecar.ingest.subagent_ended("agent:main:subagent:x", f"failed with STRIPE_SECRET={STRIPE}")
        assert sidecar.worker is not None
        while sidecar.worker.drain_once():
            pass
        _archive_first_two(sidecar)
    finally:
        sidecar.close()


def _archive_first_two(sidecar: Sidecar) -> None:
    """An archive of messages 1 and 2 that stay stored too (a prune cut short after writing it)."""
    if sidecar.ops.name == "postgresql":
        from openclaw_lossless.store.postgres import archive as pg_archive

        pg_archive._write_archive(sidecar.db.reader(), sidecar.settings.archive_dir, [1, 2], 2, None)
    else:
        from openclaw_lossless.store.sqlite import archive

        archive._write_archive(sidecar.db.reader(), sidecar.settings.archive_dir, 2)


def _raw(settings: Settings) -> bytes:
    return stored_bytes(settings)


def _pages(settings: Settings) -> str:
    """A digest of everything the store holds: every row of every table (the full-text index's too), as SQL.

    Not the file's bytes: a checkpoint moves pages from the WAL into the file without changing anything, and
    whichever connection happens to close last in the process does one.
    """
    if on_postgres(settings):
        return hashlib.sha256(stored_bytes(settings)).hexdigest()
    conn = open_connection(settings.database_path)
    try:
        digest = hashlib.sha256()
        for (table,) in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table' ORDER BY name"):
            rows = sorted(repr(tuple(row)) for row in conn.execute(f'SELECT * FROM "{table}"'))
            digest.update(f"{table}\n{rows}".encode())
        return digest.hexdigest()
    finally:
        conn.close()


def _archives(settings: Settings) -> bytes:
    return b"".join(gzip.decompress(p.read_bytes()) for p in sorted(settings.archive_dir.glob("*.jsonl.gz")))


@pytest.fixture
def settings(tmp_path: Path) -> Settings:
    settings = make_settings(tmp_path / "state", embedding_provider="none")
    _old_store(settings)
    _settle(settings)
    return settings


def _settle(settings: Settings) -> None:
    """Close any connection the closed sidecar's threads left to the garbage collector, and checkpoint.

    Otherwise the first connection to close after them (the dry run's) would be the last one and checkpoint
    the WAL into the file: bytes moved, nothing changed, and the byte comparison would fail by chance.
    """
    gc.collect()
    if on_postgres(settings):
        return
    conn = open_connection(settings.database_path)
    try:
        conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    finally:
        conn.close()


def _cli(capsys: pytest.CaptureFixture[str], settings: Settings, *args: str) -> dict[str, object]:
    return dict(run_cli_json(capsys, settings.state_dir, "redact", "--rescan", *args))


def test_the_old_store_holds_the_secrets(settings: Settings) -> None:
    """The premise: without the rescan every secret is in the file, the FTS index and the archive."""
    raw, archived = _raw(settings), _archives(settings)
    assert all(s.encode() in raw for s in SECRETS)
    assert GITHUB.encode() in archived


def test_dry_run_reports_and_changes_nothing(capsys: pytest.CaptureFixture[str], settings: Settings) -> None:
    before = _pages(settings), _archives(settings)
    data = _cli(capsys, settings, "--dry-run")
    assert data["dryRun"] is True
    assert data["places"] == {"messages": 3, "originals": 3, "summaries": 1, "reasons": 1, "archives": 1,
                              "archivedMessages": 2}  # fmt: skip
    kinds = data["kinds"]
    assert isinstance(kinds, dict) and kinds["github_token"] >= 1 and kinds["stripe_key"] >= 1
    assert (_pages(settings), _archives(settings)) == before


def test_rescan_removes_every_copy(capsys: pytest.CaptureFixture[str], settings: Settings) -> None:
    data = _cli(capsys, settings)
    assert data["dryRun"] is False and data["requeued"] == 3 and data["identities"] == 3
    raw, archived = _raw(settings), _archives(settings)
    for secret in SECRETS:
        assert secret.encode() not in raw, secret
    assert GITHUB.encode() not in archived and STRIPE.encode() not in archived
    assert b"[REDACTED:github_token]" in archived
    for path in settings.archive_dir.glob("*"):
        assert stat.S_IMODE(path.stat().st_mode) == 0o600 and not path.name.endswith(".partial")
    if not on_postgres(settings):  # FTS5's own check of its index against the messages
        conn = open_connection(settings.database_path)
        try:
            conn.execute("INSERT INTO messages_fts(messages_fts) VALUES ('integrity-check')")
        finally:
            conn.close()
    assert keyword_rows(settings, GITHUB) == []
    assert len(keyword_rows(settings, "pelican")) == 4 and len(keyword_rows(settings, "github_token")) == 1
    backlog = {r[0] for r in store_rows(settings, "SELECT message_id FROM embedding_backlog")}
    vectors = {r[0] for r in store_rows(settings, "SELECT message_id FROM message_vectors")}
    assert store_rows(settings, "SELECT 1 FROM meta WHERE key = ?", (CURSOR_KEY,)) == []
    assert backlog == {1, 2, 3} and vectors == {4}
    # The backlog is embedded again from the redacted text.
    embedder = HashEmbedder()
    sidecar = Sidecar(
        settings.model_copy(update={"embedding_provider": "local"}), provider=embedder, start_worker=False
    )
    try:
        assert sidecar.worker is not None
        while sidecar.worker.drain_once():
            pass
        assert len(embedder.texts) == 3 and not any(s in t for t in embedder.texts for s in SECRETS)
        assert {h.citation for h in sidecar.queries.search("pelican deploy", "all", 10, "vector").hits} >= {"msg:1"}
    finally:
        sidecar.close()
    assert _cli(capsys, settings)["changed"] == 0  # a second run finds nothing more


def test_a_rescanned_message_delivered_again_is_not_stored_twice(
    capsys: pytest.CaptureFixture[str], settings: Settings
) -> None:
    _cli(capsys, settings)
    sidecar = Sidecar(settings, start_worker=False)
    try:
        recall = sidecar.settings.recall
        for n, text in enumerate(TEXTS):  # the host sends the same messages again in a new turn, current rules
            sidecar.ingest.commit_turn(f"again-{n}", "s1", "agent:main:main", [_message(text, 1_700_000_000_000 + n)],
                                heartbeat=False, recall=recall)  # fmt: skip
        assert sidecar.status.stats().messages == 4
    finally:
        sidecar.close()


def test_an_export_from_before_the_rescan_imports_nothing_twice(
    capsys: pytest.CaptureFixture[str], settings: Settings, tmp_path: Path
) -> None:
    exported = tmp_path / "before.jsonl"
    run_cli(capsys, settings.state_dir, "export", "-o", str(exported))
    _cli(capsys, settings)
    run_cli_json(capsys, settings.state_dir, "import", "--jsonl", str(exported))
    assert run_cli_json(capsys, settings.state_dir, "stats")["messages"] == 4
    assert not any(s.encode() in _raw(settings) for s in SECRETS)


def test_an_interrupted_rescan_continues_where_it_stopped(
    capsys: pytest.CaptureFixture[str], settings: Settings
) -> None:
    class Stop(Exception):
        pass

    def stop(place: str, done: int) -> None:
        raise Stop

    sidecar = Sidecar(settings, start_worker=False)
    try:
        with pytest.raises(Stop):
            Rescan(sidecar.store, sidecar.capture_options, settings.archive_dir, page=1, progress=stop).run()
        [row] = store_rows(settings, "SELECT value FROM meta WHERE key = ?", (CURSOR_KEY,))
        assert '"after": 1' in row[0]
        texts = [r[0] for r in store_rows(settings, "SELECT text FROM messages WHERE id <= 2 ORDER BY id")]
        assert GITHUB not in texts[0] and STRIPE in texts[1]  # the first page is done, the second not yet
    finally:
        sidecar.close()
    data = _cli(capsys, settings)
    assert data["resumed"] is True and data["places"]["messages"] == 3  # type: ignore[index]
    assert not any(s.encode() in _raw(settings) for s in SECRETS)


def test_originals_kept_verbatim_when_the_setting_says_so(
    capsys: pytest.CaptureFixture[str], settings: Settings, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("LOSSLESS_REDACT_ORIGINALS", "false")
    data = _cli(capsys, settings)
    assert "originals" not in data["places"]  # type: ignore[operator]
    texts = [r[0] for r in store_rows(settings, "SELECT text FROM messages WHERE id <= 3 ORDER BY id")]
    originals = [r[0] for r in store_rows(settings, "SELECT original FROM messages WHERE id <= 3 ORDER BY id")]
    assert not any(s in t for t in texts for s in SECRETS)
    assert all(s in o for o, s in zip(originals, SECRETS, strict=True))


def test_through_the_running_sidecar(capsys: pytest.CaptureFixture[str], settings: Settings) -> None:
    live_settings = settings.model_copy(update={"embedding_provider": "local"})
    with live_sidecar(live_settings, HashEmbedder()) as server:
        assert_error(server.client.post("/v1/redact/rescan", json={"dryRun": "yes"}), 422, "invalid_request")
        assert httpx.post(f"{server.url}/v1/redact/rescan", json={}).status_code == 401
        code = main(["redact", "--rescan", "--dry-run", "--json", "--state-dir", str(settings.state_dir),
                     "--port", str(settings.port)])  # fmt: skip
        out = capsys.readouterr().out
        assert code == 0 and '"dryRun": true' in out
        code = main(["redact", "--rescan", "--state-dir", str(settings.state_dir), "--port", str(settings.port)])
        out = capsys.readouterr().out
        assert code == 0 and "messages 3" in out and "github_token" in out
        server.wait_for_backlog()
        hits = server.client.get("/v1/search", params={"q": "pelican deploy", "mode": "vector"}).json()["hits"]
        assert hits and not any(s in h["text"] for h in hits for s in SECRETS)
        assert not server.client.get("/v1/search", params={"q": GITHUB, "mode": "keyword"}).json()["hits"]
    assert not any(s.encode() in _raw(settings) for s in SECRETS)


@pytest.mark.parametrize(
    ("args", "says"),
    [
        (["redact"], "redact needs --rescan"),
        (["redact", "--dry-run"], "redact needs --rescan"),
        (["redact", "--rescan", "--all"], "unrecognized arguments: --all"),
    ],
)
def test_bad_input_is_a_clear_message_and_exit_2(
    capsys: pytest.CaptureFixture[str], settings: Settings, args: list[str], says: str
) -> None:
    before = _pages(settings)
    try:
        code, _, err = run_cli(capsys, settings.state_dir, *args)
    except SystemExit as exited:
        code, err = int(str(exited.code)), capsys.readouterr().err
    assert code == 2 and says in err and "Traceback" not in err
    assert _pages(settings) == before


class _RedactedMidBatch(HashEmbedder):
    """Embeds a batch while the message's text is redacted in the store (what a rescan does to a queued message)."""

    def __init__(self) -> None:
        super().__init__()
        self.sidecar: Sidecar | None = None

    def embed(self, texts: list[str]) -> Any:
        if self.sidecar is not None and any(GITHUB in text for text in texts):
            mark = "%s" if self.sidecar.ops.name == "postgresql" else "?"
            redact = f"UPDATE messages SET text = replace(text, {mark}, '[REDACTED:github_token]')"
            self.sidecar.db.write(lambda c: c.execute(redact, (GITHUB,)))
        return super().embed(texts)


def test_a_message_redacted_while_its_batch_is_embedded_keeps_no_vector_of_its_old_text(tmp_path: Path) -> None:
    settings = make_settings(tmp_path / "state")
    embedder = _RedactedMidBatch()
    sidecar = Sidecar(settings, provider=embedder, start_worker=False)
    embedder.sidecar = sidecar
    try:
        sidecar.ingest.capture_options = dataclasses.replace(sidecar.capture_options, redactor=Redactor(()))
        text = f"deploy with token {GITHUB} tonight"
        recall = sidecar.settings.recall
        sidecar.ingest.commit_turn("t", "s1", "agent:main:main", [_message(text, 1_700_000_000_000)], heartbeat=False,
                            recall=recall)  # fmt: skip
        assert sidecar.worker is not None
        while sidecar.worker.drain_once():
            pass
        conn = sidecar.db.reader()
        ((stored,),) = conn.execute("SELECT text FROM messages").fetchall()
        assert GITHUB not in stored and conn.execute("SELECT count(*) FROM embedding_backlog").fetchone()[0] == 0
        [block] = sidecar.ops.vectors.read_all(conn, embedder.identity.dimension)
        vector = block.codes[0].astype(np.float32) * block.scales[0]
        new, old = HashEmbedder().embed([stored, text])
        assert float(vector @ new) > float(vector @ old)  # the vector is of the redacted text
        assert embedder.texts[-1] == stored  # embedded again, from the redacted text
    finally:
        sidecar.close()


@pytest.mark.sqlite_only
def test_a_rescan_of_an_older_store_leaves_no_old_copy_in_free_space(
    capsys: pytest.CaptureFixture[str], settings: Settings
) -> None:
    """A store written before every write zeroed what it freed may hold a secret's old bytes in free space
    (a row an UPDATE moved, a deleted row). Its first rescan that changes something rebuilds the file once."""
    conn = open_connection(settings.database_path)
    try:  # what an older version left: bytes freed but not zeroed, and no mark that the file was rebuilt
        conn.execute("PRAGMA secure_delete = OFF")
        conn.execute("INSERT INTO meta (key, value) VALUES ('old-copy', ?)", (f"an old copy of {GITHUB}",))
        conn.execute("DELETE FROM meta WHERE key IN ('old-copy', 'free_space_zeroed')")
        conn.commit()
        conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    finally:
        conn.close()
    assert f"an old copy of {GITHUB}".encode() in _raw(settings)  # the premise: the freed copy is on disk
    _cli(capsys, settings)
    assert GITHUB.encode() not in _raw(settings)
    assert store_rows(settings, "SELECT value FROM meta WHERE key = 'free_space_zeroed'") == [("1",)]
