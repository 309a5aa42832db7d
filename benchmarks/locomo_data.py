"""The LoCoMo data as the benchmark reads it: conversations, their sessions and turns, and the questions scored.

Any file of LoCoMo's format is read (``--data``); evidence ids are normalised (``D1:3``) and those the
conversation does not hold are set aside as dropped; an audit file (``--audit``) replaces a question's
citations by its ``correct_evidence``, so both can be scored side by side.
"""

from __future__ import annotations

import json
import os
import re
from collections import Counter, defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
DEFAULT_DATA = REPO.parent / "shared" / "data" / "locomo" / "locomo_dev.json"
CATEGORIES = {1: "multi-hop", 2: "temporal", 3: "open-domain", 4: "single-hop", 5: "adversarial"}
ADVERSARIAL = 5
TURN_SPACING_S = 30
DATE_FORMATS = ("%I:%M %p on %d %B, %Y", "%I:%M %p on %d %b, %Y", "%I:%M %p on %B %d, %Y", "%Y-%m-%d %H:%M")
_DIA = re.compile(r"D:?(\d+):(\d+)")
_AGENT_UNSAFE = re.compile(r"[^A-Za-z0-9_.\-]")


@dataclass(frozen=True)
class Turn:
    dia_id: str
    role: str
    text: str
    timestamp_ms: int


@dataclass(frozen=True)
class Session:
    number: int
    started: datetime
    turns: tuple[Turn, ...]


@dataclass
class Question:
    conversation: str
    index: int
    category: int
    text: str
    evidence: frozenset[str]
    audited: frozenset[str]
    dropped: tuple[str, ...] = ()


@dataclass
class Conversation:
    sample_id: str
    agent: str
    sessions: list[Session]
    questions: list[Question]
    skipped: Counter[str] = field(default_factory=Counter)

    @property
    def now_ms(self) -> int:
        last = max((t.timestamp_ms for s in self.sessions for t in s.turns), default=0)
        return last + 86_400_000

    @property
    def turns(self) -> int:
        return sum(len(s.turns) for s in self.sessions)


def normal_dia(value: str) -> str | None:
    match = _DIA.fullmatch(value.strip())
    return f"D{int(match[1])}:{int(match[2])}" if match else None


def parse_evidence(raw: Iterable[Any], known: set[str]) -> tuple[frozenset[str], tuple[str, ...]]:
    """Evidence ids as the conversation spells them; malformed or unknown ones are returned as dropped."""
    found: set[str] = set()
    dropped: list[str] = []
    for item in raw:
        for part in re.split(r"[;,\s]+", str(item)):
            if not part:
                continue
            ident = normal_dia(part)
            if ident is not None and ident in known:
                found.add(ident)
            else:
                dropped.append(part)
    return frozenset(found), tuple(dropped)


def parse_date(text: str) -> datetime | None:
    for fmt in DATE_FORMATS:
        try:
            return datetime.strptime(text.strip(), fmt).replace(tzinfo=UTC)
        except ValueError:
            continue
    return None


def turn_text(turn: dict[str, Any]) -> str:
    text = f"{turn.get('speaker') or 'Someone'}: {str(turn.get('text') or '').strip()}"
    caption = turn.get("blip_caption")
    return f"{text} [image: {caption}]" if caption else text


def load_conversations(path: Path) -> list[Conversation]:
    data = json.loads(path.read_text())
    if isinstance(data, dict):
        data = [data]
    conversations: list[Conversation] = []
    for sample in data:
        conv = sample["conversation"]
        speaker_a = conv.get("speaker_a")
        numbers = sorted(int(k.split("_")[1]) for k in conv if re.fullmatch(r"session_\d+", k))
        sessions: list[Session] = []
        previous = datetime(2023, 1, 1, tzinfo=UTC)
        for number in numbers:
            raw_turns = conv.get(f"session_{number}") or []
            started = parse_date(str(conv.get(f"session_{number}_date_time") or "")) or previous + timedelta(days=1)
            previous = started
            turns = tuple(
                Turn(
                    dia_id=normal_dia(str(t["dia_id"])) or str(t["dia_id"]),
                    role="user" if t.get("speaker") == speaker_a else "assistant",
                    text=turn_text(t),
                    timestamp_ms=int((started + timedelta(seconds=TURN_SPACING_S * i)).timestamp() * 1000),
                )
                for i, t in enumerate(raw_turns)
            )
            if turns:
                sessions.append(Session(number, started, turns))
        sample_id = str(sample.get("sample_id") or f"conv-{len(conversations)}")
        agent = _AGENT_UNSAFE.sub("-", sample_id)[:100] or "conv"
        known = {t.dia_id for s in sessions for t in s.turns}
        skipped: Counter[str] = Counter()
        questions = []
        for index, qa in enumerate(sample.get("qa") or []):
            category = int(qa.get("category") or 0)
            if category == ADVERSARIAL:
                skipped["adversarial"] += 1
                continue
            evidence, dropped = parse_evidence(qa.get("evidence") or [], known)
            if not evidence:
                skipped["no_known_evidence"] += 1
                continue
            questions.append(Question(sample_id, index, category, str(qa["question"]), evidence, evidence, dropped))
        conversations.append(Conversation(sample_id, agent, sessions, questions, skipped))
    return conversations


def apply_audit(conversations: list[Conversation], path: Path) -> dict[str, Any]:
    """Replace each audited question's evidence by the audit's ``correct_evidence`` (matched by text and position)."""
    entries = json.loads(path.read_text())
    by_text: dict[str, list[tuple[int, Question]]] = defaultdict(list)
    for position, conversation in enumerate(conversations):
        for question in conversation.questions:
            by_text[question.text.strip()].append((position, question))
    changed: Counter[str] = Counter()
    not_in_run = 0
    for entry in entries:
        found = by_text.get(str(entry.get("question") or "").strip(), [])
        if len(found) > 1:
            match = re.fullmatch(r"locomo_(\d+)_qa(\d+)", str(entry.get("question_id") or ""))
            found = [(p, q) for p, q in found if match and q.index == int(match[2])] or found[:1]
        if not found:
            not_in_run += 1
            continue
        question = found[0][1]
        known = {
            t.dia_id for c in conversations if c.sample_id == question.conversation for s in c.sessions for t in s.turns
        }
        corrected, _ = parse_evidence(entry.get("correct_evidence") or [], known)
        if corrected and corrected != question.evidence:
            question.audited = corrected
            changed[str(entry.get("error_type") or "unknown")] += 1
    return {
        "file": shown(path),
        "entries": len(entries),
        "notInRun": not_in_run,
        "changedQuestions": sum(changed.values()),
        "changedByType": dict(changed),
    }


def shown(path: Path) -> str:
    """A path as the results record it: relative to the repository, so they name no one's machine."""
    return os.path.relpath(path.resolve(), REPO)


def spread(items: Sequence[Question], limit: int | None) -> list[Question]:
    """At most ``limit`` questions, evenly spaced over the conversation (deterministic)."""
    if limit is None or limit >= len(items):
        return list(items)
    return [items[(i * len(items)) // limit] for i in range(limit)]


def evidence_session(conversation: Conversation, question: Question) -> Session | None:
    """The session of the question's latest evidence turn (``D<session>:<turn>``)."""
    numbers = [int(match[1]) for d in question.evidence if (match := _DIA.fullmatch(d))]
    return next((s for s in conversation.sessions if numbers and s.number == max(numbers)), None)
