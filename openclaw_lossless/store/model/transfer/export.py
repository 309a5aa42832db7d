"""Export lines: the scope an operator names and the line each message becomes, the same from either backend."""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import IO, Any

from openclaw_lossless.errors import BadRequest

FORMAT = "openclaw-lossless/v1"


_MESSAGE_FIELDS = ("id", "sessionId", "sessionKey", "agentId", "role", "kind", "createdAt", "storedAt", "message",
                   "text", "contentHash", "windowKey", "tokens", "importance", "importanceLabel", "cites",
                   "advancementKey")  # fmt: skip


def message_line(row: Sequence[Any]) -> dict[str, Any]:
    """A row of ``MESSAGES`` as its export line. Both backends build message lines here, so an export from
    either gives the same bytes (the parity tests compare them)."""
    values = dict(zip(_MESSAGE_FIELDS, row, strict=True))
    values["message"] = json.loads(values["message"])
    values["contentHash"] = bytes(values["contentHash"]).hex()
    return {"format": FORMAT, **values}


@dataclass(frozen=True)
class ExportScope:
    """What an export covers: the whole store, one agent's sessions, or one session."""

    agent: str | None = None
    session: str | None = None

    def messages(self, mark: str = "?", always: str = "1") -> tuple[str, tuple[Any, ...]]:
        """A WHERE fragment over ``m`` (messages) and ``s`` (sessions); ``mark`` is the driver's placeholder and
        ``always`` its true, so both backends select a scope's rows by this one rule."""
        clauses, params = [always], []
        if self.agent:
            clauses.append(f"m.agent_id = {mark}")
            params.append(self.agent)
        if self.session:
            clauses.append(f"s.session_id = {mark}")
            params.append(self.session)
        return " AND ".join(clauses), tuple(params)

    def sessions(self, mark: str = "?", always: str = "1") -> tuple[str, tuple[Any, ...]]:
        """A WHERE fragment over ``s``: a session is the agent's if it is now, or if it has the agent's messages
        (``mark`` and ``always`` as in ``messages``)."""
        clauses, params = [always], []
        if self.agent:
            clauses.append(
                f"(s.agent_id = {mark} OR s.id IN (SELECT session_rowid FROM messages WHERE agent_id = {mark}))"
            )
            params += [self.agent, self.agent]
        if self.session:
            clauses.append(f"s.session_id = {mark}")
            params.append(self.session)
        return " AND ".join(clauses), tuple(params)


def refuse_unstored(scope: ExportScope, first_session: Callable[[], object]) -> None:
    """Refuse a scope naming an agent or a session when ``first_session`` (its backend's look-up of one of the
    scope's sessions, asked only then) finds none; both backends refuse with these words."""
    if not scope.agent and not scope.session:
        return
    if first_session() is not None:
        return
    session, agent = repr((scope.session or "")[:80]), repr((scope.agent or "")[:80])
    if scope.agent and scope.session:
        raise BadRequest(f"no session {session} of agent {agent} is stored: nothing to export")
    if scope.session:
        raise BadRequest(f"no session {session} is stored: nothing to export")
    raise BadRequest(f"no session of agent {agent} is stored: nothing to export")


LINK_FIELDS = {"id": "id", "parentSessionKey": "parent_session_key", "childSessionKey": "child_session_key",
                "contextMode": "context_mode", "spawnedAt": "spawned_at", "endedAt": "ended_at",
                "endedReason": "ended_reason"}  # fmt: skip


FLAG_FIELDS = frozenset({"heartbeat", "compacted", "automatic"})  # 0/1 columns, true/false in the file


def write_jsonl(records: Iterable[dict[str, Any]], out: IO[str]) -> Counter[str]:
    """Write the records; returns how many of each type (``message`` for message lines)."""
    counts: Counter[str] = Counter()
    for record in records:
        out.write(json.dumps(record, ensure_ascii=False, sort_keys=True) + "\n")
        counts[str(record.get("type", "message"))] += 1
    return counts
