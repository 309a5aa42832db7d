"""Which of the host's sessions the store is responsible for keeping up with.

Live capture sees every session of an agent from the moment the plugin first spoke for it. Catch-up (and the
gap report) keep to exactly that: a session the store already holds, or one OpenClaw created after the store
first heard of its agent (a subagent or a ``/new`` session begun while the sidecar was down). History from
before that, and agents the store has never heard of, stay the explicit ``import`` command's (or the bootstrap
of an unseen session's): a new install imports nothing behind the user's back.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from openclaw_lossless.store.backend import Backend


@dataclass(frozen=True)
class StoreCoverage:
    sessions: frozenset[str]
    first_contact: dict[str, float]  # agent id → when the store first registered one of its sessions (epoch s)

    @staticmethod
    def load(ops: Backend, conn: Any) -> StoreCoverage:
        return StoreCoverage(ops.transcript_ledger.held_session_ids(conn), ops.transcript_ledger.first_contact(conn))

    @property
    def agents(self) -> list[str]:
        return sorted(self.first_contact)

    def follows(self, agent_id: str, session_id: str, recorded_key: str | None, born_ms: int | None) -> bool:
        """Whether live capture would have seen this session (the signature of ``readers.Follow``)."""
        if session_id in self.sessions:
            return True
        first = self.first_contact.get(agent_id)
        return first is not None and born_ms is not None and born_ms / 1000 >= first
