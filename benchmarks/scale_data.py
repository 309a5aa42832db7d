"""Synthetic chat for the scale benchmark, and the bulk fill that puts it in a store fast.

The text: one agent, many sessions, turns of user / assistant (sometimes a tool result), each session about a
topic or two; a message's length is drawn from a log-normal spread, from three words to a few thousand
characters, words drawn from the session's topics and a Zipf-weighted common vocabulary with English stop
words in between (so FTS5 sees realistic posting lists: a few very common words, a long tail).

The fill goes through the store layer of either backend (``ops.messages.commit_turn`` per turn, one big
transaction per chunk), so every row, index and trigger is the product's own; each message's record is made
as ``capture`` makes it, minus redaction and importance grading (``bulk_record`` says why). Vectors: the
first ``sample`` messages get the real local model's vectors; the rest get stand-ins of the same shape (384-d,
unit length), each a random mix of two real vectors plus noise, so they sit where real chat vectors sit and make a
realistic, crowded neighbourhood for the recall check. Every vector also goes to a float32 ``vec0`` table in
a separate file: the seed design's baseline, and the exact ground truth for the overlap figure.
"""

from __future__ import annotations

import functools
import hashlib
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

from openclaw_lossless.capture import importance
from openclaw_lossless.capture.records import MessageRecord, canonical_json
from openclaw_lossless.capture.text import descriptor_tokens, searchable_text, window_key
from openclaw_lossless.embed.index import store_vectors
from openclaw_lossless.embed.provider import Vectors
from openclaw_lossless.store.api import Database
from openclaw_lossless.store.backend import SQLITE, Backend
from openclaw_lossless.store.model.sessions import SessionRef
from openclaw_lossless.store.sqlite.connection import Connection, open_connection

AGENT = "bench"


def _words(text: str) -> list[str]:
    return text.split()


DAY_S = 86400.0
TOPICS: dict[str, list[str]] = {
    "deploy": _words("kubernetes helm rollout canary staging ingress replica cluster manifest pipeline"),
    "database": _words("postgres migration index vacuum replica schema query transaction deadlock sqlite"),
    "billing": _words("invoice stripe subscription refund coupon tax receipt customer charge webhook"),
    "frontend": _words("react component css layout render hydration bundle webpack typescript storybook"),
    "travel": _words("flight hotel booking itinerary passport visa luggage airport train lisbon"),
    "garden": _words("tomato compost seedling pruning irrigation mulch greenhouse basil soil harvest"),
    "fitness": _words("marathon interval tempo stretching protein recovery cadence shoes tendon hill"),
    "finance": _words("budget mortgage savings etf dividend pension inflation loan spreadsheet taxes"),
    "security": _words("token rotation vault certificate tls firewall audit phishing mfa breach"),
    "ml": _words("embedding transformer finetune dataset tokenizer gradient checkpoint eval onnx quantization"),
    "music": _words("guitar chord rehearsal setlist amplifier drummer album mixing vinyl concert"),
    "cooking": _words("risotto sourdough oven marinade saffron recipe braise knife stock dumpling"),
    "family": _words("birthday school daughter grandparents wedding holiday dentist soccer recital anniversary"),
    "hiring": _words("candidate interview offer onboarding recruiter salary referral rubric backlog manager"),
    "research": _words("paper citation experiment baseline ablation hypothesis survey reviewer deadline poster"),
    "car": _words("tyres brake service mileage battery charger insurance garage oil warranty"),
}
COMMON = _words(
    "work time day week plan idea thing problem question answer change update issue team meeting note file "
    "code test run build error fix check list start stop open close send read write look need want make "
    "think know see try use good new old small big next last first early late fast slow right wrong sure "
    "maybe still again already soon today tomorrow yesterday morning evening people project version status "
    "result report data system service user account message email call price cost money order item step "
    "part case point place home office city room door car phone screen page link image document review"
)
STOP = _words("the a to and of in is it that for on with this i you we be was are have do not at")
NAMES = _words("Alice Bruno Chen Dana Emeka Farah Goran Hana Ivan Julia Kenji Lena Marco Nadia Omar Priya")
NUMBERS = [str(n) for n in range(2, 3000, 7)]
KIND_EDGES = np.array([0.35, 0.55, 0.58, 0.60])  # stop, topic, name, number, common


# Mixed-language stores (``unspaced_share``): that share of the sessions is in Chinese, Japanese or Korean,
# written as their speakers write (no spaces in Chinese and Japanese, particles attached in Korean).
UNSPACED_LANGUAGES = ("zh", "ja", "ko")
JA_PARTICLES = ["の", "は", "を", "に", "で", "が", "と", "も", "から", "まで"]
LEXICON_SEED = 36
KO_PARTICLES = ["은", "는", "이", "가", "을", "를", "에", "에서", "와", "예요", "입니다"]


class UnspacedText:
    """Synthetic Chinese, Japanese and Korean with realistic posting lists for the keyword index's pairs.

    Not real language: each language has a lexicon of made-up words (two characters mostly, some of one or
    three) over a pool of real characters (2,500 ideographs, 1,200 Hangul syllables, the katakana), drawn
    Zipf-weighted, so a few pairs are in many messages and most in few, and a word's pairs also occur across
    word boundaries, as they do in real text. Prompts ask for a word of the lexicon (a name, a term) or
    for two words in a question.
    """

    def __init__(self) -> None:
        rng = np.random.default_rng(LEXICON_SEED)  # one lexicon, as one English vocabulary: prompts find words
        han = [chr(c) for c in rng.choice(np.arange(0x4E00, 0x9FA6), size=2500, replace=False)]
        hangul = [chr(c) for c in rng.choice(np.arange(0xAC00, 0xD7A4), size=1200, replace=False)]
        kana = [chr(c) for c in range(0x30A1, 0x30F4)] + ["ー"]
        self.lexicon = {
            "zh": _lexicon(rng, han, 8000),
            "ja": _lexicon(rng, han, 5000) + ["".join(rng.choice(kana, size=int(n))) for n in rng.integers(3, 6, 1500)],
            "ko": _lexicon(rng, hangul, 5000),
        }
        self.cdf = {lang: _zipf_cdf(len(words)) for lang, words in self.lexicon.items()}

    def text(self, lang: str, count: int, rng: np.random.Generator) -> str:
        """``count`` words of ``lang`` as sentences."""
        words = [self.lexicon[lang][i] for i in np.searchsorted(self.cdf[lang], rng.random(count))]
        if lang == "ja":
            words = [w + JA_PARTICLES[int(rng.integers(len(JA_PARTICLES)))] if rng.random() < 0.5 else w for w in words]
            return "".join(w + ("。" if i % 12 == 11 else "、" if i % 5 == 4 else "") for i, w in enumerate(words))
        if lang == "ko":
            words = [w + KO_PARTICLES[int(rng.integers(len(KO_PARTICLES)))] if rng.random() < 0.6 else w for w in words]
            return " ".join(w + ("." if i % 10 == 9 else "") for i, w in enumerate(words))
        return "".join(w + ("。" if i % 12 == 11 else "，" if i % 6 == 5 else "") for i, w in enumerate(words))

    def prompt(self, rng: np.random.Generator) -> str:
        """A word asked for alone (half the prompts), or two in a question, in one of the languages."""
        lang = UNSPACED_LANGUAGES[int(rng.integers(len(UNSPACED_LANGUAGES)))]
        words = self.lexicon[lang]
        # a word from the middle of the distribution: neither the commonest nor one never written
        picks: list[str] = []
        while len(picks) < 2:  # a word of two characters or more: one alone is not searched
            word = words[int(rng.integers(20, min(len(words), 1500)))]
            picks += [word] if len(word) > 1 else []
        if rng.random() < 0.5:
            return picks[0]
        return {"zh": f"{picks[0]}和{picks[1]}是什么？", "ja": f"{picks[0]}と{picks[1]}はどうなりましたか？",
                "ko": f"{picks[0]}와 {picks[1]}는 어떻게 됐어요?"}[lang]  # fmt: skip


def _lexicon(rng: np.random.Generator, pool: list[str], size: int) -> list[str]:
    """``size`` distinct made-up words over ``pool``: two characters mostly, a tenth one, a fifth three."""
    ranks = _zipf_cdf(len(pool))
    words: dict[str, None] = {}
    while len(words) < size:
        length = int(np.searchsorted([0.1, 0.8, 1.0], rng.random(), side="right")) + 1
        words["".join(pool[i] for i in np.searchsorted(ranks, rng.random(length)))] = None
    return list(words)


def _zipf_cdf(size: int) -> npt.NDArray[np.float64]:
    ranks = np.arange(1, size + 1, dtype=np.float64)
    cdf: npt.NDArray[np.float64] = np.cumsum(1 / ranks) / (1 / ranks).sum()
    cdf[-1] = 1.0
    return cdf


@dataclass(frozen=True)
class Message:
    role: str
    text: str
    timestamp_ms: int


class ChatGenerator:
    """Deterministic synthetic chat: the same seed gives the same messages in the same order."""

    def __init__(self, seed: int = 5, end_time: float = 1.79e9, unspaced_share: float = 0.0) -> None:
        self.rng = np.random.default_rng(seed)
        # a mixed-language store draws its languages and their words apart: at 0 the chat is as it always was
        self.unspaced_share = unspaced_share
        self.unspaced = UnspacedText() if unspaced_share > 0 else None
        self.language_rng = np.random.default_rng(seed + 1)
        self.end_time = end_time
        ranks = np.arange(1, len(COMMON) + 1, dtype=np.float64)
        self.common_cdf = np.cumsum(1 / ranks) / (1 / ranks).sum()
        self.common_cdf[-1] = 1.0
        self.topic_names = list(TOPICS)

    def words(self, count: int, topics: list[str]) -> str:
        """``count`` words as sentences: stop words, the topics' words, names, numbers and common words."""
        vocabulary, offsets, sizes = self._vocabulary(tuple(topics))
        kind = np.searchsorted(KIND_EDGES, self.rng.random(count))
        where = self.rng.random(count)
        picks = offsets[kind] + (where * sizes[kind]).astype(np.int64)
        common = kind == len(KIND_EDGES)
        picks[common] = offsets[-1] + np.searchsorted(self.common_cdf, where[common])
        words = vocabulary[picks].tolist()
        sentences = [" ".join(words[i : i + 12]) for i in range(0, count, 12)]
        return ". ".join(s[:1].upper() + s[1:] for s in sentences) + "."

    @functools.cache  # noqa: B019 - a handful of topic pairs, one generator per run
    def _vocabulary(
        self, topics: tuple[str, ...]
    ) -> tuple[npt.NDArray[np.object_], npt.NDArray[np.int64], npt.NDArray[np.int64]]:
        pools = [STOP, [w for t in topics for w in TOPICS[t]], NAMES, NUMBERS, COMMON]
        sizes = np.array([len(p) for p in pools], dtype=np.int64)
        offsets = np.concatenate([[0], np.cumsum(sizes)[:-1]]).astype(np.int64)
        return np.array([w for p in pools for w in p], dtype=object), offsets, sizes

    def length(self, role: str) -> int:
        """Words in a message: short user turns, longer answers and tool output, capped near 4,000 characters."""
        median = {"user": 14, "assistant": 60, "toolResult": 90}[role]
        return int(np.clip(self.rng.lognormal(np.log(median), 0.9), 3, 650))

    def sessions(self, total: int, *, span_days: float = 730.0) -> Iterator[tuple[str, list[Message]]]:
        """``(session_id, messages)`` until ``total`` messages; sessions of 20-400 messages, oldest first."""
        made, number = 0, 0
        start = self.end_time - span_days * DAY_S
        step = span_days * DAY_S / max(total, 1)
        while made < total:
            size = min(total - made, int(self.rng.integers(20, 400)))
            topics = list(self.rng.choice(self.topic_names, size=int(self.rng.integers(1, 3)), replace=False))
            language = self._session_language()
            batch: list[Message] = []
            while len(batch) < size:
                roles = ["user", "assistant"] + (["toolResult", "assistant"] if self.rng.random() < 0.2 else [])
                for role in roles[: size - len(batch)]:
                    when = start + (made + len(batch)) * step
                    batch.append(Message(role, self._text(language, self.length(role), topics), int(when * 1000)))
            yield f"bench-{number:06d}", batch
            made += size
            number += 1

    def _session_language(self) -> str | None:
        """None for English; else one of ``UNSPACED_LANGUAGES``, for ``unspaced_share`` of the sessions."""
        if self.unspaced is None or self.language_rng.random() >= self.unspaced_share:
            return None
        return UNSPACED_LANGUAGES[int(self.language_rng.integers(len(UNSPACED_LANGUAGES)))]

    def _text(self, language: str | None, count: int, topics: list[str]) -> str:
        if language is None or self.unspaced is None:
            return self.words(count, topics)
        return self.unspaced.text(language, count, self.language_rng)

    def unspaced_prompt(self) -> str:
        """A question in Chinese, Japanese or Korean (a mixed-language store's generator only)."""
        assert self.unspaced is not None, "a generator made with unspaced_share > 0"
        return self.unspaced.prompt(self.language_rng)

    def prompt(self) -> str:
        """A question an agent might be asked about its history."""
        topic = self.topic_names[int(self.rng.integers(len(self.topic_names)))]
        words = [TOPICS[topic][int(self.rng.integers(10))] for _ in range(2)]
        extra = COMMON[int(self.rng.integers(len(COMMON)))]
        name = NAMES[int(self.rng.integers(len(NAMES)))]
        return f"What did {name} and I decide about the {words[0]} {extra} and the {words[1]}?"


def agent_message(message: Message) -> dict[str, Any]:
    """The host's AgentMessage shape for one synthetic message."""
    if message.role == "toolResult":
        return {
            "role": "toolResult",
            "toolCallId": "call",
            "toolName": "exec",
            "content": [{"type": "text", "text": message.text}],
            "timestamp": message.timestamp_ms,
        }
    return {
        "role": message.role,
        "content": [{"type": "text", "text": message.text}],
        "timestamp": message.timestamp_ms,
    }


def stand_in_vectors(real: Vectors, count: int, rng: np.random.Generator) -> Vectors:
    """Unit vectors shaped like real ones: a random mix of two real vectors plus a little noise."""
    first = real[rng.integers(len(real), size=count)]
    second = real[rng.integers(len(real), size=count)]
    weight = rng.uniform(0.2, 0.8, size=(count, 1)).astype(np.float32)
    noise = rng.standard_normal((count, real.shape[1])).astype(np.float32) * 0.03
    mixed = first * weight + second * (1 - weight) + noise
    out: Vectors = (mixed / np.linalg.norm(mixed, axis=1, keepdims=True)).astype(np.float32)
    return out


def open_baseline(path: Path, dimension: int) -> Connection:
    """The seed design's vector store: one float32 ``vec0`` table, searched by full scan."""
    conn = open_connection(path, synchronous="OFF")
    conn.execute(
        "CREATE VIRTUAL TABLE IF NOT EXISTS baseline USING vec0("
        f"message_id INTEGER PRIMARY KEY, embedding float[{dimension}] distance_metric=cosine)"
    )
    return conn


@dataclass
class FillReport:
    messages: int
    sessions: int
    seconds: float
    real_vectors: int


def fill(
    db: Database[Any],
    baseline: Connection,
    total: int,
    real_texts_vectors: Vectors,
    *,
    ops: Backend = SQLITE,
    chunk: int = 20000,
    seed: int = 5,
    unspaced_share: float = 0.0,
) -> FillReport:
    """Build ``total`` messages of synthetic chat with vectors, in big transactions through the store layer
    of either backend (``ops``): the same calls, so both backends hold the same content."""
    began = time.monotonic()
    source = VectorSource(real_texts_vectors, seed)
    made, sessions = 0, 0
    for pending in session_chunks(total, chunk, seed, unspaced_share):
        stored = db.write(lambda conn, p=pending: _store_sessions(ops, conn, p))  # type: ignore[misc]
        ids = np.asarray([i for i, _ in stored], dtype=np.int64)
        session_rowids = [s for _, s in stored]
        vectors = source.take(len(ids))
        db.write(lambda conn, i=ids, v=vectors, s=session_rowids: store_vectors(ops, conn, i.tolist(), v, s))  # type: ignore[misc]
        _store_baseline(baseline, ids, vectors)
        made += len(ids)
        sessions += len(pending)
    return FillReport(made, sessions, time.monotonic() - began, min(len(real_texts_vectors), made))


def session_chunks(
    total: int, chunk: int, seed: int, unspaced_share: float = 0.0
) -> Iterator[list[tuple[str, list[Message]]]]:
    """The generator's sessions for ``total`` messages, in whole-session chunks of at least ``chunk`` messages
    (the last one smaller): a fill's transactions, the same for every way of writing them."""
    pending: list[tuple[str, list[Message]]] = []
    pending_count = 0
    for session_id, batch in ChatGenerator(seed, unspaced_share=unspaced_share).sessions(total):
        pending.append((session_id, batch))
        pending_count += len(batch)
        if pending_count >= chunk:
            yield pending
            pending, pending_count = [], 0
    if pending:
        yield pending


class VectorSource:
    """The fill's vectors in message order: the real ones for the first ``len(real)`` messages, stand-ins
    (``stand_in_vectors``, from one seeded stream) after; taken a chunk at a time."""

    def __init__(self, real: Vectors, seed: int) -> None:
        self.real = real
        self.rng = np.random.default_rng(seed + 1)
        self.made = 0

    def take(self, count: int) -> Vectors:
        vectors = np.empty((count, self.real.shape[1]), dtype=np.float32)
        position = np.arange(self.made, self.made + count)
        is_real = position < len(self.real)
        vectors[is_real] = self.real[position[is_real]]
        vectors[~is_real] = stand_in_vectors(self.real, int((~is_real).sum()), self.rng)
        self.made += count
        return vectors


def bulk_record(message: dict[str, Any]) -> MessageRecord:
    """What ``capture`` makes of a message, minus redaction and importance grading (regular expressions at
    ~1 ms a message: an hour at 1M). Synthetic text has nothing to redact and grading changes no row's
    shape; the commit-turns the benchmark times go through the full ``capture``."""
    original = canonical_json(message)
    return MessageRecord(
        role=str(message["role"]),
        created_at=float(message["timestamp"]) / 1000,
        text=searchable_text(message),
        original=original,
        content_hash=hashlib.sha256(original.encode()).digest(),
        window_key=window_key(message),
        tokens=descriptor_tokens(message),
        importance=0.5,
        importance_label=importance.label_for(0.5),
        dated=True,
    )


def _store_sessions(ops: Backend, conn: Any, batches: list[tuple[str, list[Message]]]) -> list[tuple[int, int]]:
    stored: list[tuple[int, int]] = []
    for session_id, batch in batches:
        session = ops.sessions.ensure_session(conn, session_id, f"agent:{AGENT}:{session_id}")
        for turn, start in enumerate(range(0, len(batch), 4)):
            records = [bulk_record(agent_message(m)) for m in batch[start : start + 4]]
            stored += _commit(ops, conn, session, f"{session_id}-t{turn}", records)
    return stored


def _commit(
    ops: Backend, conn: Any, session: SessionRef, key: str, records: list[MessageRecord]
) -> list[tuple[int, int]]:
    _, ids = ops.messages.commit_turn(conn, session, key, records, heartbeat=False)
    return [(i, session.rowid) for i in ids]


def _store_baseline(conn: Connection, ids: npt.NDArray[np.int64], vectors: Vectors) -> None:
    conn.execute("BEGIN")
    conn.executemany(
        "INSERT INTO baseline (message_id, embedding) VALUES (?, ?)",
        [(int(i), v.tobytes()) for i, v in zip(ids, vectors, strict=True)],
    )
    conn.execute("COMMIT")


def sample_texts(count: int, seed: int = 5) -> list[str]:
    """The texts of the first ``count`` messages ``fill`` makes (the ones given real vectors)."""
    texts: list[str] = []
    for _, batch in ChatGenerator(seed).sessions(count):
        texts += [m.text for m in batch]
    return texts[:count]
