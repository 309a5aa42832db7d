"""The exactly-once audit: every message in the host's own transcripts against the sidecar's store.

The host's transcript store (``agents/<id>/agent/openclaw-agent.sqlite``, table ``transcript_events``) is the
ground truth of what was said. Both it and the sidecar's store (``store_reader.py``: its ``lossless.sqlite``,
or its PostgreSQL schema) are read read-only. A message is identified on both sides the same way, by this
module and not by the product's code: its session id, role, the message's own ``timestamp`` (ms) and its
plain text (string content or text blocks, with tool calls as their names; what the store redacted matches
any text). A host message is then found in the store 0 times (missing), once (good) or more (duplicated); a
stored message no host transcript holds is reported too (``storeOnly``).

One exception, by design: the messages of a turn the host committed as a heartbeat (``isHeartbeat``; the
store keeps such a turn's row, flagged, and none of its messages while ``skipHeartbeats`` is on) may be stored
once or not at all, never twice. The host's transcript ties a turn's messages to its advancement key: the
user message's ``idempotencyKey`` is ``<key>:user``, and the messages after it up to the next user message
are that turn's.

And the rows the host writes to a transcript that no model turn produced (the store leaves them out, by
design): the user's ``/lossless`` chat commands and the answers the host records for them (assistant rows of
``provider: "openclaw"``, ``model: "gateway-injected"``; ``"delivery-mirror"`` copies too). They must not be
stored at all (``transcriptOnlyStored``): a ``/lossless search`` answer quotes stored history, and storing it
would feed recall its own output.
"""

from __future__ import annotations

import contextlib
import importlib
import json
import re
import sqlite3
from collections import Counter, defaultdict
from collections.abc import Callable
from pathlib import Path
from typing import Any

from tests.e2e.store_reader import StoreReader

JsonObj = dict[str, Any]
Key = tuple[str, str, int, str]
COMMAND = "/lossless"
HOST_WRITTEN_MODELS = ("gateway-injected", "delivery-mirror")
_REDACTED = re.compile(r"\[REDACTED:[\w.-]+\]")


def _zstd() -> Callable[[bytes], bytes] | None:
    for name in ("compression.zstd", "backports.zstd"):
        with contextlib.suppress(ImportError):
            return importlib.import_module(name).decompress  # type: ignore[no-any-return]
    return None


def plain_text(message: JsonObj) -> str:
    """The words of a message: its string content, or its text blocks and tool calls (by name), in order."""
    content = message.get("content")
    if isinstance(content, str):
        return content.strip()
    parts: list[str] = []
    for block in content if isinstance(content, list) else []:
        if not isinstance(block, dict):
            continue
        if block.get("type") == "text":
            parts.append(str(block.get("text") or ""))
        elif block.get("type") == "toolCall":
            parts.append(f"[call {block.get('name')}]")
    if message.get("role") in ("compactionSummary", "branchSummary"):
        parts.append(str(message.get("summary") or ""))
    return "\n".join(parts).strip()


def transcript_only(message: JsonObj) -> bool:
    """A ``/lossless`` command, or an assistant row the host wrote itself (not a model's reply)."""
    if message.get("role") == "user":
        text = plain_text(message)
        return text == COMMAND or text.startswith(f"{COMMAND} ")
    host_written = message.get("provider") == "openclaw" and message.get("model") in HOST_WRITTEN_MODELS
    return message.get("role") == "assistant" and (host_written or "openclawDeliveryMirror" in message)


def message_key(session_id: str, message: JsonObj) -> Key:
    stamp = message.get("timestamp")
    ms = int(stamp) if isinstance(stamp, int | float) and not isinstance(stamp, bool) else -1
    return (session_id, str(message.get("role")), ms, plain_text(message))


def _open_ro(path: Path) -> sqlite3.Connection:
    return sqlite3.connect(f"{path.as_uri()}?mode=ro", uri=True, timeout=10)


def host_databases(openclaw_state: Path) -> list[Path]:
    return sorted(openclaw_state.glob("agents/*/agent/openclaw-agent.sqlite"))


def host_messages(openclaw_state: Path) -> tuple[list[JsonObj], int]:
    """Every ``message`` entry of every session of every agent, and how many rows could not be decoded."""
    decompress = _zstd()
    found: list[JsonObj] = []
    unread = 0
    for path in host_databases(openclaw_state):
        agent = path.parents[1].name
        with contextlib.closing(_open_ro(path)) as conn:
            keys = dict(conn.execute("SELECT session_id, session_key FROM session_windows").fetchall())
            # event_zstd came after 2026.8.2: an older store has only event_json.
            columns = {row[1] for row in conn.execute("PRAGMA table_info(transcript_events)")}
            packed = "event_zstd" if "event_zstd" in columns else "NULL"
            rows = conn.execute(
                f"SELECT session_id, seq, event_json, {packed} FROM transcript_events ORDER BY session_id, seq"
            ).fetchall()
        turn_key, current = None, None
        for session_id, seq, text, packed in rows:
            if session_id != current:
                turn_key, current = None, session_id
            raw = text
            if raw is None and packed is not None and decompress is not None:
                raw = decompress(bytes(packed)).decode()
            if raw is None:
                unread += 1
                continue
            entry = json.loads(raw)
            message = entry.get("message") if entry.get("type") == "message" else None
            if isinstance(message, dict):
                if message.get("role") == "user":
                    turn_key = str(message.get("idempotencyKey") or "").rsplit(":", 1)[0] or None
                key = message_key(session_id, message)
                found.append(
                    {
                        "agent": agent,
                        "sessionKey": keys.get(session_id),
                        "seq": seq,
                        "key": key,
                        "turn": turn_key,
                        "transcriptOnly": transcript_only(message),
                    }
                )
    return found + jsonl_messages(openclaw_state), unread


def jsonl_messages(openclaw_state: Path) -> list[JsonObj]:
    """The ``message`` entries of the JSONL transcripts (``agents/<id>/sessions/<sessionId>.jsonl`` and their
    ``.reset.``/``.deleted.`` archives), which the 2026.7.33+ maintenance line keeps instead of the SQLite store."""
    found: list[JsonObj] = []
    for path in sorted(openclaw_state.glob("agents/*/sessions/*.jsonl*")):
        if ".trajectory" in path.name or not re.search(r"\.jsonl($|\.(reset|deleted)\.)", path.name):
            continue
        session_id, keys = path.name.split(".jsonl", 1)[0], _jsonl_keys(path.parent)
        for seq, line in enumerate(path.read_text(errors="replace").splitlines()):
            with contextlib.suppress(ValueError):
                entry = json.loads(line)
                message = entry.get("message") if isinstance(entry, dict) and entry.get("type") == "message" else None
                if isinstance(message, dict):
                    key = message_key(session_id, message)
                    found.append(
                        {
                            "agent": path.parents[1].name,
                            "sessionKey": keys.get(session_id),
                            "seq": seq,
                            "key": key,
                            "turn": None,
                            "transcriptOnly": transcript_only(message),
                        }
                    )
    return found


def _jsonl_keys(sessions_dir: Path) -> dict[str, str]:
    """Session id -> key, from the sessions dir's ``sessions.json``."""
    with contextlib.suppress(OSError, ValueError):
        store = json.loads((sessions_dir / "sessions.json").read_text())
        return {str(v["sessionId"]): str(k) for k, v in store.items() if isinstance(v, dict) and v.get("sessionId")}
    return {}


def session_texts(openclaw_state: Path, session_key: str) -> list[str]:
    """The plain texts of every message the host recorded under ``session_key`` (every session id it had)."""
    return [m["key"][3] for m in host_messages(openclaw_state)[0] if m["sessionKey"] == session_key]


def heartbeat_turns(store: StoreReader) -> set[str]:
    """The advancement keys of the turns the store recorded as heartbeats (their messages are not kept)."""
    return {str(row["advancement_key"]) for row in store.rows("SELECT advancement_key FROM turns WHERE heartbeat")}


def store_messages(store: StoreReader) -> list[JsonObj]:
    """The store's own messages (kind 'message': not the outcome copies it derives), keyed as the host's."""
    rows = store.rows(
        "SELECT m.id, s.session_id, s.session_key, m.original FROM messages m"
        " JOIN sessions s ON s.id = m.session_rowid WHERE m.kind = 'message' ORDER BY m.id"
    )
    return [
        {"id": r["id"], "sessionKey": r["session_key"], "key": message_key(r["session_id"], json.loads(r["original"]))}
        for r in rows
    ]


def _view(key: Key) -> JsonObj:
    return {"sessionId": key[0], "role": key[1], "timestamp": key[2], "text": key[3][:120]}


def same_text(host: str, stored: str) -> bool:
    """Equal, or equal but for what the store redacted (each ``[REDACTED:kind]`` stands for some text)."""
    if host == stored:
        return True
    if "[REDACTED:" not in stored:
        return False
    pattern = ".+?".join(re.escape(part) for part in _REDACTED.split(stored))
    return re.fullmatch(pattern, host, re.DOTALL) is not None


def audit(openclaw_state: Path, store: StoreReader) -> JsonObj:
    """How often each host message is in the store: the lists of missing, duplicated and store-only messages."""
    host, unread = host_messages(openclaw_state)
    there = store.exists()
    stored = store_messages(store) if there else []
    heartbeats = heartbeat_turns(store) if there else set()
    slots: dict[tuple[str, str, int], list[JsonObj]] = defaultdict(list)
    for row in stored:
        slots[row["key"][:3]].append(row)
    alike = Counter(m["key"] for m in host)  # identical host messages (same session, role, time, text)
    missing, duplicated, left_out_but_stored, matched = [], [], [], set()
    for message in host:
        key = message["key"]
        ids = [r["id"] for r in slots[key[:3]] if same_text(key[3], r["key"][3])]
        matched.update(ids)
        if message["transcriptOnly"]:
            if ids:
                left_out_but_stored.append({**_view(key), "sessionKey": message["sessionKey"], "storeIds": ids})
            continue
        if not ids and message["turn"] not in heartbeats:
            missing.append({**_view(key), "sessionKey": message["sessionKey"], "seq": message["seq"]})
        if len(ids) > alike[key]:
            duplicated.append({**_view(key), "sessionKey": message["sessionKey"], "storeIds": ids})
    return {
        "hostMessages": len(host),
        "hostSessions": {m["key"][0]: m["sessionKey"] for m in host},
        "hostRowsUnread": unread,
        "hostHeartbeatMessages": sum(1 for m in host if m["turn"] in heartbeats),
        "hostTranscriptOnly": sum(1 for m in host if m["transcriptOnly"]),
        "transcriptOnlyStored": left_out_but_stored,
        "storeMessages": len(stored),
        "missing": missing,
        "duplicated": duplicated,
        "storeOnly": [{**_view(r["key"]), "id": r["id"]} for r in stored if r["id"] not in matched],
    }


def converged(result: JsonObj) -> bool:
    """Every host message stored exactly once, none the store leaves out stored (and some host message read)."""
    checks = ("missing", "duplicated", "transcriptOnlyStored")
    return bool(result["hostMessages"]) and not any(result[name] for name in checks)
