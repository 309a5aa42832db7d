"""A subagent's outcome as its parent recalls it: which answer is copied, and how the copy is named.

Both backends copy outcomes by these rules (``sqlite/subagents.py``, ``postgres/subagents.py``), so a child's
answer reaches its parent the same on either store.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from openclaw_lossless.capture.text import descriptor_text
from openclaw_lossless.store.model.sessions import SessionRef


def inherited_ids(must_remember: Iterable[int], answer: int | None) -> list[int]:
    """The ids a parent inherits, in order: the must-remember messages and the final answer (both backends)."""
    return sorted({*must_remember, *(() if answer is None else (answer,))})


def final_answer(sessions: Iterable[int], answer_in: Callable[[int], int | None]) -> int | None:
    """The child's last assistant message with text of its own (tool calls alone are not an answer): the
    newest of each session's answer, which ``answer_in`` finds (both backends walk the child's sessions so)."""
    return max((a for a in map(answer_in, sessions) if a is not None), default=None)


def first_answer(rows: Iterable[Sequence[Any]]) -> int | None:
    """The first ``(id, original)`` row that is an answer, reading no further: a session's assistant messages
    newest first, so both backends stop at the last answer without reading the rest of the history."""
    return next((int(msg_id) for msg_id, original in rows if _is_answer(json.loads(original))), None)


def outcome_identity(child_key: str, cites: int) -> tuple[str, bytes]:
    """An outcome record's original and content hash, from the child and the message it cites.

    Derived, never stored apart: the import rebuilds it the same way, so an outcome whose cited message got a
    new id on import names the new one, and the child ending again later finds it already copied.
    """
    original = json.dumps({"kind": "subagentOutcome", "childSessionKey": child_key, "cites": f"msg:{cites}"})
    return original, hashlib.sha256(f"outcome:{cites}".encode()).digest()


OUTCOME_TEXT = 5  # where ``Outcome.values`` puts the stored text


OUTCOME_SOURCE = "id, role, created_at, text, window_key, tokens, importance, importance_label"


@dataclass(frozen=True)
class Outcome:
    """A child's message its parent inherits, as the outcome record that cites it (``OUTCOME_SOURCE`` row)."""

    cites: int
    role: str
    created_at: float
    text: str  # the child's text; the parent stores it marked as the subagent's result
    window_key: str
    tokens: int | None
    importance: float | None
    importance_label: str | None
    original: str
    content_hash: bytes

    def values(self, parent: SessionRef, stored_at: float) -> tuple[object, ...]:
        """The record's values in the column order both backends' inserts name, ``session_rowid`` to ``cites``
        (``kind`` is the literal ``'outcome'``)."""
        return (
            parent.rowid,
            parent.agent_id,
            self.role,
            self.created_at,
            stored_at,
            f"[subagent result] {self.text}",
            self.original,
            self.content_hash,
            self.window_key,
            self.tokens,
            self.importance,
            self.importance_label,
            self.cites,
        )


def outcomes(child_key: str, rows: Iterable[Sequence[Any]]) -> list[Outcome]:
    """``OUTCOME_SOURCE`` rows as the outcome records both backends copy, each with its derived identity."""
    found: list[Outcome] = []
    for msg_id, role, created_at, text, key, tokens, importance, label in rows:
        original, digest = outcome_identity(child_key, int(msg_id))
        found.append(Outcome(int(msg_id), role, created_at, text, key, tokens, importance, label, original, digest))
    return found


def copy_outcomes(
    found: Iterable[Outcome],
    parent: SessionRef,
    forgotten: Callable[[str, bytes, str], bool],
    insert: Callable[[Outcome], int | None],
) -> list[int]:
    """The ids of the outcomes ``insert`` stored in ``parent`` (it answers None for one the parent already
    holds); one ``forgotten(session_id, content_hash, window_key)`` names is never copied again. Both backends
    copy through this, each with its own statements."""
    return [
        new_id
        for outcome in found
        if not forgotten(parent.session_id, outcome.content_hash, outcome.window_key)
        and (new_id := insert(outcome)) is not None
    ]


def _is_answer(message: Any) -> bool:
    """Text the child said, in a message that asks for no tool: what a person would call its answer."""
    if not isinstance(message, dict) or not descriptor_text(message).strip():
        return False
    content = message.get("content")
    blocks = content if isinstance(content, list) else []
    return not any(isinstance(block, dict) and block.get("type") == "toolCall" for block in blocks)
