"""LoCoMo evidence recall, measured through the sidecar's real HTTP hooks.

What it measures: whether the "## Recalled Context" block that ``assemble`` returns holds the dialogue turns
the LoCoMo annotators cite as evidence for each question. The sidecar runs as a real subprocess
(``python -m openclaw_lossless serve``) on loopback with a fresh state directory and the real local model.

1. Replay. Each conversation is one agent (session key ``agent:<sample_id>:main``); each LoCoMo session is one
   OpenClaw session (``POST /v1/hooks/bootstrap``), and each dialogue turn is one ``POST /v1/hooks/commit-turn``
   carrying one message: ``"<Speaker>: <text> [image: <blip caption>]"``, speaker A as ``user`` and speaker B as
   ``assistant``, timestamped from ``session_<N>_date_time`` (+30 s per turn), with
   ``"metadata": {"dia_id": ...}`` in the message object. After the embedding backlog drains, every stored
   message is read back through ``GET /v1/sessions/{id}/messages`` to map ``msg:<id>`` to its ``dia_id``.
2. Questions. For every non-adversarial question (category 5 is adversarial) with at least one evidence turn
   that exists in the conversation: ``POST /v1/hooks/assemble`` with the question as ``prompt``, an empty
   window (``messages: []``), a fresh session id of the agent, ``trace: true`` and ``now`` = one day after the
   conversation's last turn. With ``--window-turns N`` each question is also asked as a host asks it
   mid-conversation (``product+window``): in the conversation's last session, its last N turns sent as the
   plugin sends a history (descriptors; the text of the last three user messages), reported beside the
   empty-window figures.
3. Scores, with the raw and with the audit-corrected citations (``--audit``, every entry's
   ``correct_evidence``): any-hit (at least one evidence turn recalled) and all-hit (every evidence turn
   recalled) of the recalled block, and at k = 5, 10, 20, 50 of the ranked candidates (``trace.candidates``
   in score order, minus those under ``minSimilarity``); overall, per category and per conversation; the
   block's tokens (the product's own per-script estimate, ``capture/token_estimate.py``) as median and p95.

Methods, all in the same run against the same store:

- ``product``: ``assemble`` with no overrides (whatever the product's defaults are today);
- ``seed``: ``assemble`` with the seed's settings sent explicitly as per-request ``config``, its candidates
  re-ranked from the trace by the seed's score (similarity, the better lane, × 0.5^(age/168 h) × role·importance
  weight; the product ranks by the lanes' mean), ``minSimilarity`` 0.3, the first 20;
- ``hybrid``: ``assemble`` with the seed's config but ``"recencyDecayHours": 1e9`` (the product's ranking of
  both lanes, no decay, no neighbours);
- ``bm25``: ``GET /v1/search?mode=keyword`` re-ranked by its BM25 (the keyword lane alone);
- ``vector``: ``GET /v1/search?mode=vector`` ranked by cosine (the vector lane alone);
- ``rrf``: reciprocal-rank fusion (k = 60) of those two lists, computed here (the product has no switch);
- ``recency``: the agent's newest messages, computed here from the stored messages (no query at all).
For the search-based methods the "block" is their top ``retrievalCount`` (20), rendered as the product
renders recalled lines to count its tokens.

Run it from the repository root (the model must be fetched: ``openclaw-lossless model fetch``)::

    python benchmarks/locomo.py                     # every conversation of ../shared/data/locomo/locomo_dev.json
    python benchmarks/locomo.py --quick             # 1 conversation, 40 questions: well under 3 minutes
    python benchmarks/locomo.py --data FILE --audit AUDIT.json --conversations 2 --questions 60
    python benchmarks/locomo.py --window-turns 10   # also ask after the last 10 turns as the host's window

Writes ``benchmarks/results/locomo.json`` (every figure and the run's metadata), ``locomo.md`` (tables) and
``locomo.png`` (needs matplotlib, a benchmark-time tool only: ``pip install matplotlib``); ``--quick`` writes
``locomo-quick.*`` instead so a smoke run never overwrites the full results (``--out``/``--name`` to choose).
``--details FILE`` also writes one JSON line per question (ranked lists, the trace) and per conversation (the
stored messages), for offline analysis. Nothing here asserts a timing; phase durations are recorded for context only.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import re
import socket
import subprocess
import sys
import tempfile
import time
from collections import Counter, defaultdict
from collections.abc import Iterable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import IO, Any

import httpx

from openclaw_lossless import __version__
from openclaw_lossless.capture.text import descriptor_text, descriptor_tokens, window_key
from openclaw_lossless.config import RecallSettings, Settings
from openclaw_lossless.recall import render
from openclaw_lossless.store.messages import StoredMessage

REPO = Path(__file__).resolve().parents[1]
if str(REPO) not in sys.path:  # run as a script: benchmarks/ is on the path, the repository is not
    sys.path.insert(0, str(REPO))
from benchmarks import machine  # noqa: E402

DEFAULT_DATA = REPO.parent / "shared" / "data" / "locomo" / "locomo_dev.json"
RESULTS = Path(__file__).resolve().parent / "results"

KS = (5, 10, 20, 50)
CATEGORIES = {1: "multi-hop", 2: "temporal", 3: "open-domain", 4: "single-hop", 5: "adversarial"}
ADVERSARIAL = 5
TURN_SPACING_S = 30
LANE_K = 100  # the product's lane depth: deeper search hits would not exist in assemble either
RRF_K = 60
NO_DECAY_HOURS = 1e9
# Pins the seed's settings per request; when the product gains a recall knob, add its seed value here.
SEED_CONFIG: dict[str, Any] = {
    "retrievalCount": 20,
    "recencyDecayHours": 168.0,
    "minSimilarity": 0.3,
    "recencyFloor": 0.0,
    "neighbourRadius": 0,
    "recallTokenBudget": 0,
}
HYBRID_CONFIG: dict[str, Any] = SEED_CONFIG | {"recencyDecayHours": NO_DECAY_HOURS}
# Candidates the product set aside on principle; every other candidate a search lane found is "ranked".
EXCLUDED = frozenset({"below_min_similarity", "in_window", "missing"})
SEARCH_LANES = frozenset({"vector", "keyword"})
DATE_FORMATS = ("%I:%M %p on %d %B, %Y", "%I:%M %p on %d %b, %Y", "%I:%M %p on %B %d, %Y", "%Y-%m-%d %H:%M")
_DIA = re.compile(r"D:?(\d+):(\d+)")
_AGENT_UNSAFE = re.compile(r"[^A-Za-z0-9_.\-]")
# The run's server settings that are not recall settings: generous deadlines so a busy machine cannot
# silently turn a vector query into a keyword-only one (fallbacks are still counted and reported).
SERVER_ENV = {
    "LOSSLESS_SYNCHRONOUS": "NORMAL",
    "LOSSLESS_ASSEMBLE_DEADLINE_MS": "20000",
    "LOSSLESS_QUERY_EMBED_DEADLINE_MS": "20000",
}
TARGETS = {"anyHit": 0.90, "allHit": 0.80, "blockTokensP95": 2000, "categoryAnyHit": 0.80}
REFERENCE: dict[str, Any] = {
    "note": "simple methods, all ten LoCoMo conversations, one message per turn, k = 20 (benchmarks.md)",
    "bm25": {"any@20": 0.745, "all@20": 0.617, "any@5": 0.585},
    "vector": {"any@20": 0.613, "all@20": 0.486, "any@5": 0.402},
    "rrf": {"any@20": 0.743, "all@20": 0.609},
}
METHODS: dict[str, tuple[str, str]] = {
    "product": ("assemble, no overrides (the product's defaults)", "POST /v1/hooks/assemble"),
    "seed": (
        "the seed's formula: similarity (the better lane) × 0.5^(age/168h) × weight, minSimilarity 0.3, top 20",
        "POST /v1/hooks/assemble config="
        + json.dumps(SEED_CONFIG, separators=(",", ":"))
        + ", re-ranked by similarity × recency × weight from the trace",
    ),
    "hybrid": (
        "the product's ranking, mean(cosine, BM25/best) × weight, with the seed's settings but no recency"
        " decay: minSimilarity 0.3, 20 hits, no neighbours, no token cap",
        "POST /v1/hooks/assemble config=" + json.dumps(HYBRID_CONFIG, separators=(",", ":")),
    ),
    "bm25": ("keyword lane alone, ranked by BM25", "GET /v1/search?mode=keyword (re-ranked by bm25)"),
    "vector": ("vector lane alone, ranked by cosine", "GET /v1/search?mode=vector (ranked by cosine)"),
    "rrf": ("reciprocal-rank fusion (k=60) of the bm25 and vector lists", "computed by the benchmark"),
    "recency": ("the agent's newest messages, no query", "computed by the benchmark from the store"),
}
ASSEMBLE_METHODS = ("product", "seed", "hybrid")
WINDOW_METHOD = "product+window"
RECENT_USER_TEXTS = 3  # the plugin describes this many last user messages with their text (plugin/index.js)


# -- the data ------------------------------------------------------------------------------------------------


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


# -- the sidecar ---------------------------------------------------------------------------------------------


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


class SidecarProcess:
    """``python -m openclaw_lossless serve`` on 127.0.0.1 with its own state directory; stopped by its pid."""

    def __init__(self, state_dir: Path, model_dir: Path | None) -> None:
        self.state_dir = state_dir
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        env = {k: v for k, v in os.environ.items() if not k.startswith("LOSSLESS_")} | SERVER_ENV
        command = [sys.executable, "-m", "openclaw_lossless", "serve", "--state-dir", str(state_dir)]
        command += ["--port", str(self.port), "--host", "127.0.0.1", "--log-level", "warning"]
        if model_dir is not None:
            command += ["--model-dir", str(model_dir)]
        state_dir.mkdir(parents=True, exist_ok=True)
        self.log: IO[bytes] = (state_dir / "sidecar.log").open("wb")
        self.process = subprocess.Popen(command, env=env, stdout=self.log, stderr=subprocess.STDOUT)
        self.client = self._connect()

    def _connect(self, timeout_s: float = 180) -> httpx.Client:
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise RuntimeError(f"the sidecar exited ({self.process.returncode}):\n{self.log_tail()}")
            try:
                health = httpx.get(f"{self.url}/healthz", timeout=2).json()
                token = (self.state_dir / "token").read_text().strip()
            except (httpx.HTTPError, OSError, ValueError):
                time.sleep(0.2)
                continue
            if health.get("status") != "ok":
                raise RuntimeError(f"the sidecar is not ready (is the model fetched?): {health}")
            return httpx.Client(base_url=self.url, headers={"Authorization": f"Bearer {token}"}, timeout=120)
        raise RuntimeError(f"the sidecar did not answer within {timeout_s:.0f} s:\n{self.log_tail()}")

    def log_tail(self) -> str:
        self.log.flush()
        return (self.state_dir / "sidecar.log").read_text(errors="replace")[-3000:]

    def post(self, path: str, body: dict[str, Any]) -> dict[str, Any]:
        response = self.client.post(path, json=body)
        if response.status_code != 200:
            raise RuntimeError(f"POST {path} -> {response.status_code}: {response.text[:500]}")
        result: dict[str, Any] = response.json()
        return result

    def get(self, path: str, **params: Any) -> dict[str, Any]:
        response = self.client.get(path, params=params)
        if response.status_code != 200:
            raise RuntimeError(f"GET {path} -> {response.status_code}: {response.text[:500]}")
        result: dict[str, Any] = response.json()
        return result

    def drain(self, timeout_s: float = 1800) -> None:
        deadline = time.monotonic() + timeout_s
        while True:
            stats = self.get("/stats")
            if stats["backlog"] == 0 and stats["vectors"] >= stats["messages"]:
                return
            if time.monotonic() > deadline:
                raise RuntimeError(f"embedding backlog did not drain: {stats['backlog']} left")
            time.sleep(0.5)

    def stop(self) -> None:
        self.client.close()
        if self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(15)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait(5)
        self.log.close()


@contextmanager
def running_sidecar(state_dir: Path | None, model_dir: Path | None) -> Iterator[SidecarProcess]:
    with tempfile.TemporaryDirectory(prefix="locomo-bench-") as scratch:
        sidecar = SidecarProcess(state_dir or Path(scratch) / "state", model_dir)
        try:
            yield sidecar
        finally:
            sidecar.stop()


# -- replay and questions ------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Stored:
    id: int
    dia_id: str
    role: str
    created_at: float
    text: str
    importance: float | None


def session_id(conversation: Conversation, session: Session) -> str:
    return f"locomo-{conversation.agent}-s{session.number}"


def session_key(conversation: Conversation) -> str:
    return f"agent:{conversation.agent}:main"


def turn_message(turn: Turn) -> dict[str, Any]:
    """One dialogue turn as the host's message (what commit-turn stores and the window describes)."""
    return {
        "role": turn.role,
        "content": [{"type": "text", "text": turn.text}],
        "timestamp": turn.timestamp_ms,
        "metadata": {"dia_id": turn.dia_id},
    }


def replay(sidecar: SidecarProcess, conversation: Conversation) -> None:
    key = session_key(conversation)
    for session in conversation.sessions:
        sid = session_id(conversation, session)
        sidecar.post("/v1/hooks/bootstrap", {"sessionId": sid, "sessionKey": key})
        for position, turn in enumerate(session.turns):
            message = turn_message(turn)
            body = {"sessionId": sid, "sessionKey": key, "advancementKey": f"{sid}:{position}:{turn.dia_id}"}
            answer = sidecar.post("/v1/hooks/commit-turn", body | {"messages": [message]})
            if answer["status"] != "committed" or answer["stored"] != 1:
                raise RuntimeError(f"turn {turn.dia_id} of {conversation.sample_id} was not stored: {answer}")


def read_back(sidecar: SidecarProcess, conversation: Conversation) -> dict[int, Stored]:
    stored: dict[int, Stored] = {}
    for session in conversation.sessions:
        listing = sidecar.get(f"/v1/sessions/{session_id(conversation, session)}/messages", last=10_000)
        for m in listing["messages"]:
            dia = ((m.get("original") or {}).get("metadata") or {}).get("dia_id")
            if dia is not None:
                stored[int(m["id"])] = Stored(
                    int(m["id"]), str(dia), m["role"], m["createdAt"], m["text"], m["importance"]
                )
    return stored


@dataclass(frozen=True)
class Window:
    """The host's recent turns a question is asked after: the last session's last turns, as descriptors."""

    session_id: str
    descriptors: list[dict[str, Any]]
    ids: list[int]  # the stored messages the window holds: in the model's context, so found if cited


def host_window(
    conversation: Conversation, stored: dict[int, Stored], turns: int, session: Session | None = None
) -> Window | None:
    """The last ``turns`` turns of ``session`` (default: the conversation's last), described as the plugin
    describes a host history (``describeMessages``): role, key, tokens and timestamp, with the text of the last
    ``RECENT_USER_TEXTS`` user messages (the context the product reads the question with)."""
    if turns <= 0 or not conversation.sessions:
        return None
    session = session or conversation.sessions[-1]
    recent = [turn_message(turn) for turn in session.turns[-turns:]]
    with_text = [n for n, m in enumerate(recent) if m["role"] == "user"][-RECENT_USER_TEXTS:]
    descriptors = [
        {"role": m["role"], "key": window_key(m), "tokens": descriptor_tokens(m), "timestamp": m["timestamp"]}
        | ({"text": descriptor_text(m)} if n in with_text else {})
        for n, m in enumerate(recent)
    ]
    dia = {turn.dia_id for turn in session.turns[-turns:]}
    ids = [i for i, s in stored.items() if s.dia_id in dia]
    return Window(session_id(conversation, session), descriptors, ids)


@dataclass
class Outcome:
    """One method's answer to one question: its ranking (message ids) and its recalled block."""

    ranked: list[int]
    block: list[int]
    tokens: int
    ms: float | None = None


def rendered_tokens(ids: Sequence[int], stored: dict[int, Stored], text_chars: int) -> int:
    """Tokens of a block of these messages rendered exactly as the product renders recalled lines."""
    if not ids:
        return 0
    chosen = sorted((stored[i] for i in ids if i in stored), key=lambda s: (s.created_at, s.id))
    lines = [
        render.line(StoredMessage(s.id, s.role, "message", s.created_at, s.text, 0, "", None, s.importance), text_chars)
        for s in chosen
    ]
    return render.estimate_tokens(render.block(lines))


def seed_outcome(ranked: list[dict[str, Any]], stored: dict[int, Stored], text_chars: int, ms: float) -> Outcome:
    """The seed's exact formula from the trace of an assemble run with the seed's settings.

    The product ranks by the mean of the two lanes (``relevance``); the seed ranked by ``similarity``, the
    better lane. Every part of the seed's score is in the trace (similarity, the seed's recency with floor 0
    and its 168 h half-life, the weight), and with the seed's settings nothing but the count limits the block
    (no token cap, no neighbours), so its block is the first ``retrievalCount`` by the seed's score.
    """
    order = sorted(ranked, key=lambda c: (-c["similarity"] * c["recency"] * c["weight"], c["message_id"]))
    ids = [int(c["message_id"]) for c in order]
    block = ids[: SEED_CONFIG["retrievalCount"]]
    return Outcome(ranked=ids, block=block, tokens=rendered_tokens(block, stored, text_chars), ms=ms)


def ask(
    sidecar: SidecarProcess,
    conversation: Conversation,
    question: Question,
    stored: dict[int, Stored],
    newest: list[int],
    block_size: int,
    text_chars: int,
    window: Window | None = None,
) -> tuple[dict[str, Outcome], dict[str, Any]]:
    """Every method's outcome for one question, and the product's trace (for --details).

    With a ``window``, ``product+window`` asks again as a host would mid-conversation: in the last session,
    its recent turns as descriptors. Its block counts the window's messages too (they are in the model's
    context; recall leaves them out); its ranking is recall's alone.
    """
    outcomes: dict[str, Outcome] = {}
    trace: dict[str, Any] = {}
    base = {
        "sessionId": f"locomo-{conversation.agent}-q{question.index}",
        "sessionKey": session_key(conversation),
        "messages": [],
        "prompt": question.text,
        "now": conversation.now_ms,
        "trace": True,
    }
    configs: dict[str, dict[str, Any] | None] = {
        "product": None,
        "seed": SEED_CONFIG,
        "hybrid": HYBRID_CONFIG,
    }
    for name, config in configs.items():
        began = time.perf_counter()
        answer = sidecar.post("/v1/hooks/assemble", base if config is None else base | {"config": config})
        elapsed_ms = (time.perf_counter() - began) * 1000
        candidates = answer["trace"]["candidates"]
        ranked = [c for c in candidates if c["decision"] not in EXCLUDED and SEARCH_LANES.intersection(c["lanes"])]
        if name == "seed":
            outcomes[name] = seed_outcome(ranked, stored, text_chars, elapsed_ms)
        else:
            outcomes[name] = Outcome(
                ranked=[int(c["message_id"]) for c in ranked],
                block=[int(r["id"]) for r in answer["recalled"]],
                tokens=render.estimate_tokens(answer["systemPromptAddition"]),
                ms=elapsed_ms,
            )
        if answer.get("recallSkipped"):
            trace.setdefault("skipped", {})[name] = answer["recallSkipped"]
        if name == "product":
            trace["candidates"] = candidates
    if window is not None:
        body = {k: v for k, v in base.items() if k != "messages"}
        body |= {"sessionId": window.session_id, "descriptors": window.descriptors}
        began = time.perf_counter()
        answer = sidecar.post("/v1/hooks/assemble", body)
        elapsed_ms = (time.perf_counter() - began) * 1000
        candidates = answer["trace"]["candidates"]
        ranked = [c for c in candidates if c["decision"] not in EXCLUDED and SEARCH_LANES.intersection(c["lanes"])]
        outcomes[WINDOW_METHOD] = Outcome(
            ranked=[int(c["message_id"]) for c in ranked],
            block=[int(r["id"]) for r in answer["recalled"]] + window.ids,
            tokens=render.estimate_tokens(answer["systemPromptAddition"]),
            ms=elapsed_ms,
        )
        trace["windowCandidates"] = candidates
    scope = f"agent:{conversation.agent}"
    lanes: dict[str, list[int]] = {}
    for name, mode, key in (("bm25", "keyword", "keyword"), ("vector", "vector", "cosine")):
        hits = sidecar.get("/v1/search", q=question.text, scope=scope, k=LANE_K, mode=mode)["hits"]
        hits.sort(key=lambda h: (-(h.get(key) or 0.0), h["id"]))
        lanes[name] = [int(h["id"]) for h in hits]
    fused: dict[int, float] = defaultdict(float)
    for ranking in lanes.values():
        for rank, ident in enumerate(ranking):
            fused[ident] += 1.0 / (RRF_K + rank + 1)
    lanes["rrf"] = sorted(fused, key=lambda i: (-fused[i], i))
    lanes["recency"] = newest
    for name, ranking in lanes.items():
        top = ranking[:block_size]
        outcomes[name] = Outcome(ranking, top, rendered_tokens(top, stored, text_chars))
    return outcomes, trace


# -- scoring -------------------------------------------------------------------------------------------------


@dataclass
class Record:
    question: Question
    outcomes: dict[str, Outcome]
    dia: dict[int, str]


def hit(ids: Sequence[int], dia: dict[int, str], evidence: frozenset[str]) -> tuple[bool, bool]:
    found = {dia[i] for i in ids if i in dia}
    return bool(found & evidence), evidence <= found


def percentile(values: Sequence[float], q: float) -> float:
    """Nearest-rank percentile (q in 0..100)."""
    if not values:
        return 0.0
    ordered = sorted(values)
    return float(ordered[max(0, math.ceil(q / 100 * len(ordered)) - 1)])


def rates(records: Sequence[Record], method: str, audited: bool) -> dict[str, Any]:
    n = len(records)
    if n == 0:
        return {"n": 0}
    sums: Counter[str] = Counter()
    for record in records:
        evidence = record.question.audited if audited else record.question.evidence
        outcome = record.outcomes[method]
        any_hit, all_hit = hit(outcome.block, record.dia, evidence)
        sums["any"] += any_hit
        sums["all"] += all_hit
        for k in KS:
            any_k, all_k = hit(outcome.ranked[:k], record.dia, evidence)
            sums[f"any@{k}"] += any_k
            sums[f"all@{k}"] += all_k
    return {"n": n} | {
        key: round(sums[key] / n, 4) for key in ["any", "all", *[f"{a}@{k}" for k in KS for a in ("any", "all")]]
    }


def summarise(records: Sequence[Record], method: str, audited: bool) -> dict[str, Any]:
    by_category: dict[str, list[Record]] = defaultdict(list)
    by_conversation: dict[str, list[Record]] = defaultdict(list)
    for record in records:
        by_category[CATEGORIES.get(record.question.category, str(record.question.category))].append(record)
        by_conversation[record.question.conversation].append(record)
    return rates(records, method, audited) | {
        "byCategory": {name: rates(group, method, audited) for name, group in sorted(by_category.items())},
        "byConversation": {name: rates(group, method, audited) for name, group in by_conversation.items()},
    }


def token_stats(records: Sequence[Record], method: str) -> dict[str, float]:
    tokens = [float(r.outcomes[method].tokens) for r in records]
    sizes = [float(len(r.outcomes[method].block)) for r in records]
    stats = {
        "median": percentile(tokens, 50),
        "p95": percentile(tokens, 95),
        "max": max(tokens, default=0.0),
        "medianItems": percentile(sizes, 50),
    }
    latencies = [r.outcomes[method].ms for r in records]
    if latencies and all(ms is not None for ms in latencies):
        # one assemble over loopback HTTP as the benchmark saw it (trace on): context, never a target
        stats["assembleHttpP50Ms"] = round(percentile([ms or 0.0 for ms in latencies], 50), 1)
        stats["assembleHttpP95Ms"] = round(percentile([ms or 0.0 for ms in latencies], 95), 1)
    return stats


def targets_check(summary: dict[str, Any], tokens: dict[str, float]) -> dict[str, Any]:
    categories = {name: group["any"] for name, group in summary["byCategory"].items()}
    return {
        "anyHit": {"value": summary["any"], "target": TARGETS["anyHit"], "met": summary["any"] >= TARGETS["anyHit"]},
        "allHit": {"value": summary["all"], "target": TARGETS["allHit"], "met": summary["all"] >= TARGETS["allHit"]},
        "blockTokensP95": {
            "value": tokens["p95"],
            "target": TARGETS["blockTokensP95"],
            "met": tokens["p95"] <= TARGETS["blockTokensP95"],
        },
        "categoryAnyHit": {
            "value": categories,
            "target": TARGETS["categoryAnyHit"],
            "met": all(v >= TARGETS["categoryAnyHit"] for v in categories.values()),
        },
    }


# -- output --------------------------------------------------------------------------------------------------


def fmt(value: float) -> str:
    return f"{value:.3f}"


def markdown(report: dict[str, Any]) -> str:
    meta, data = report["meta"], report["dataset"]
    out = [
        "# LoCoMo evidence recall through the real hooks",
        "",
        f"Run {meta['date']} on {machine.line(meta['machine'])}, openclaw-lossless"
        f" {meta['version']} ({meta['gitCommit'] or 'no git'}), model {meta['embedder']}; data `{meta['data']}`:"
        f" {data['conversations']} conversations, {data['turns']} turns, {data['questions']} questions scored"
        f" ({data['skipped']}). Wall time {meta['phases']['totalS']:.0f} s.",
        "",
        "Any-hit = at least one evidence turn in the recalled block; all-hit = every evidence turn. `@k` = the"
        " first k of the method's ranking (for assemble: `trace.candidates` by score, above minSimilarity)."
        " Block tokens = the product's token estimate of `systemPromptAddition` (search-based methods: their top"
        f" {meta['blockSize']} rendered the same way). HTTP ms = one `assemble` round trip over loopback with"
        " the trace on, as the benchmark saw it on a shared machine: context, not a target.",
        "",
    ]
    if meta.get("windowTurns"):
        out += [
            f"`{WINDOW_METHOD}`: the same questions asked as a host asks mid-conversation, in"
            f" {window_place(meta.get('windowAt', 'end'))} after"
            f" its last {meta['windowTurns']} turns (sent as descriptors, the text on the last {RECENT_USER_TEXTS}"
            " user messages: what the product reads the question with). Those turns are in the model's context,"
            " so its block any/all counts them too; its @k figures rank recall's candidates alone.",
            "",
        ]
    for audited in (False, True):
        key = "audit" if audited else "raw"
        title = "audit-corrected citations" if audited else "raw citations"
        out += [
            f"## All questions, {title}",
            "",
            "| method | block any | block all | any@5 | any@10 | any@20 | all@20 | any@50 | all@50 | tok p50 | p95 |"
            " HTTP ms p50 | p95 |",
            "|---|---|---|---|---|---|---|---|---|---|---|---|---|",
        ]
        for name, result in report["methods"].items():
            s, t = result[key], result["tokens"]
            out.append(
                f"| {name} | {fmt(s['any'])} | {fmt(s['all'])} | {fmt(s['any@5'])} | {fmt(s['any@10'])} |"
                f" {fmt(s['any@20'])} | {fmt(s['all@20'])} | {fmt(s['any@50'])} | {fmt(s['all@50'])} |"
                f" {t['median']:.0f} | {t['p95']:.0f} | {t.get('assembleHttpP50Ms', '—')} |"
                f" {t.get('assembleHttpP95Ms', '—')} |"
            )
        out.append("")
    categories = list(report["methods"]["product"]["raw"]["byCategory"])
    out += [
        "## Per category (raw citations): block any-hit / all-hit",
        "",
        "| method | "
        + " | ".join(f"{c} (n={report['methods']['product']['raw']['byCategory'][c]['n']})" for c in categories)
        + " |",
        "|---|" + "---|" * len(categories),
    ]
    for name, result in report["methods"].items():
        cells = [
            f"{fmt(result['raw']['byCategory'][c]['any'])} / {fmt(result['raw']['byCategory'][c]['all'])}"
            for c in categories
        ]
        out.append(f"| {name} | " + " | ".join(cells) + " |")
    conversations = list(report["methods"]["product"]["raw"]["byConversation"])
    out += [
        "",
        "## Per conversation (raw citations): block any-hit / all-hit",
        "",
        "| method | "
        + " | ".join(f"{c} (n={report['methods']['product']['raw']['byConversation'][c]['n']})" for c in conversations)
        + " |",
        "|---|" + "---|" * len(conversations),
    ]
    for name, result in report["methods"].items():
        groups = result["raw"]["byConversation"]
        out.append(
            f"| {name} | "
            + " | ".join(f"{fmt(groups[c]['any'])} / {fmt(groups[c]['all'])}" for c in conversations)
            + " |"
        )
    checks = report["targets"]
    out += [
        "",
        "## Targets (issue 5), product defaults, raw citations",
        "",
        "| target | value | met |",
        "|---|---|---|",
        f"| any-hit ≥ {TARGETS['anyHit']} | {fmt(checks['anyHit']['value'])} | {checks['anyHit']['met']} |",
        f"| all-hit ≥ {TARGETS['allHit']} | {fmt(checks['allHit']['value'])} | {checks['allHit']['met']} |",
        f"| block p95 ≤ {TARGETS['blockTokensP95']} tokens | {checks['blockTokensP95']['value']:.0f} |"
        f" {checks['blockTokensP95']['met']} |",
        f"| every category any-hit ≥ {TARGETS['categoryAnyHit']} |"
        f" {', '.join(f'{k} {fmt(v)}' for k, v in checks['categoryAnyHit']['value'].items())} |"
        f" {checks['categoryAnyHit']['met']} |",
        "",
        f"Reference ({REFERENCE['note']}): BM25 0.745 / 0.617, vector 0.613 / 0.486, RRF 0.743 / 0.609 (any / all@20).",
        "",
        "## Methods",
        "",
        "| method | what | via |",
        "|---|---|---|",
    ]
    out += [f"| {name} | {r['description']} | `{r['via']}` |" for name, r in report["methods"].items()]
    if "folds" in report:
        from benchmarks import locomo_folds

        out += ["", *locomo_folds.markdown(report["folds"])]
    return "\n".join(out) + "\n"


def plot(report: dict[str, Any], path: Path) -> bool:
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        print("matplotlib is not installed: no plot (pip install matplotlib)", file=sys.stderr)
        return False
    figure, axes = plt.subplots(1, 3, figsize=(16, 4.8))
    for name, result in report["methods"].items():
        for axis, kind in zip(axes[:2], ("any", "all"), strict=True):
            axis.plot(KS, [result["raw"][f"{kind}@{k}"] for k in KS], marker="o", label=name)
    product = report["methods"]["product"]
    for axis, kind, target in ((axes[0], "any", TARGETS["anyHit"]), (axes[1], "all", TARGETS["allHit"])):
        # the block holds the hits plus their neighbours: plot it at its median size, not on the ranking's line
        items = max(product["tokens"]["medianItems"], 1.0)
        axis.scatter([items], [product["raw"][kind]], marker="*", s=160, color="C0", zorder=3)
        axis.annotate(f"product block ({items:.0f} lines)", (items, product["raw"][kind]), fontsize=8,
                      xytext=(-40, 8), textcoords="offset points")  # fmt: skip
        axis.axhline(target, color="grey", linestyle="--", linewidth=1)
        for name in ("bm25", "vector", "rrf"):
            axis.scatter([20], [REFERENCE[name][f"{kind}@20"]], marker="x", color="black")
        axis.set_xscale("log")
        axis.set_xticks(KS, [str(k) for k in KS])
        axis.minorticks_off()
        axis.set_ylim(0, 1)
        axis.set_xlabel("k (first k of the ranking)")
        axis.set_title(f"{kind}-hit@k, raw citations (x = reference k=20; -- target)")
        axis.grid(alpha=0.3)
    axes[0].legend(fontsize=8)
    categories = list(report["methods"]["product"]["raw"]["byCategory"])
    names = list(report["methods"])
    width = 0.8 / len(names)
    for i, name in enumerate(names):
        values = [report["methods"][name]["raw"]["byCategory"][c]["any"] for c in categories]
        axes[2].bar([j + i * width for j in range(len(categories))], values, width, label=name)
    axes[2].axhline(TARGETS["categoryAnyHit"], color="grey", linestyle="--", linewidth=1)
    axes[2].set_xticks([j + 0.4 - width / 2 for j in range(len(categories))], categories)
    axes[2].set_ylim(0, 1)
    axes[2].set_title("block any-hit per category, raw citations")
    figure.tight_layout()
    figure.savefig(path, dpi=110)
    plt.close(figure)
    return True


def git_commit() -> str | None:
    try:
        out = subprocess.run(
            ["git", "rev-parse", "--short", "HEAD"], cwd=REPO, capture_output=True, text=True, timeout=10
        )
    except OSError:
        return None
    return out.stdout.strip() or None


# -- main ----------------------------------------------------------------------------------------------------


def evidence_session(conversation: Conversation, question: Question) -> Session | None:
    """The session of the question's latest evidence turn (``D<session>:<turn>``)."""
    numbers = [int(match[1]) for d in question.evidence if (match := _DIA.fullmatch(d))]
    return next((s for s in conversation.sessions if numbers and s.number == max(numbers)), None)


def window_place(window_at: str) -> str:
    return "the session of the question's latest evidence" if window_at == "evidence" else "the last session"


def methods_run(window_turns: int, window_at: str = "end") -> dict[str, tuple[str, str]]:
    if window_turns <= 0:
        return METHODS
    window = (
        f"assemble, no overrides, asked in {window_place(window_at)} after its last {window_turns} turns"
        f" (descriptors, the last {RECENT_USER_TEXTS} user texts); the block counts the window's turns too",
        "POST /v1/hooks/assemble descriptors=[...]",
    )
    return {"product": METHODS["product"], WINDOW_METHOD: window} | METHODS


def as_asked(conversation: Conversation, question: Question, dia: dict[int, str]) -> Any:
    """One question as ``--folds`` asks it again in-process: the product row's request, scored on raw citations."""
    from benchmarks.locomo_folds import Asked

    return Asked(
        conversation=conversation.sample_id,
        session_key=session_key(conversation),
        session_id=f"locomo-{conversation.agent}-q{question.index}",
        prompt=question.text,
        now_ms=conversation.now_ms,
        category=CATEGORIES.get(question.category, str(question.category)),
        evidence=question.evidence,
        dia=dia,
    )


def run_folds(args: argparse.Namespace, sidecar: SidecarProcess, asked: list[Any]) -> dict[str, Any]:
    """Stop the sidecar (its store stays) and choose the recall defaults leave-one-conversation-out."""
    from benchmarks import locomo_folds

    sidecar.stop()
    result: dict[str, Any] = locomo_folds.run(
        sidecar.state_dir, args.model_dir, asked, TARGETS["blockTokensP95"], lambda line: print(line, file=sys.stderr)
    )
    return result


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    parser.add_argument("--data", type=Path, default=DEFAULT_DATA, help="a LoCoMo-format JSON file")
    parser.add_argument(
        "--audit", type=Path, help="corrected citations (default: <data stem>_audit_errors.json next to --data)"
    )
    parser.add_argument("--no-audit", action="store_true", help="score raw citations only")
    parser.add_argument("--conversations", type=int, help="only the first N conversations")
    parser.add_argument("--questions", type=int, help="at most N questions per conversation, evenly spaced")
    parser.add_argument("--quick", action="store_true", help="1 conversation, 40 questions")
    parser.add_argument(
        "--window-turns",
        type=int,
        default=0,
        metavar="N",
        help=f"also ask every question after the conversation's last N turns as the host's window ({WINDOW_METHOD})",
    )
    parser.add_argument(
        "--window-at",
        choices=("end", "evidence"),
        default="end",
        help="where the window is taken: the conversation's last session, or the last turns of the session that"
        " holds the question's latest evidence (its context is then about the question)",
    )
    parser.add_argument(
        "--folds",
        action="store_true",
        help="also choose each tuned recall default leave-one-conversation-out on a small grid and report"
        " in-sample and out-of-fold figures (benchmarks/locomo_folds.py; needs 2+ conversations)",
    )
    parser.add_argument("--out", type=Path, default=RESULTS, help="directory for the results")
    parser.add_argument("--name", help="file stem of the results (default: locomo, with --quick: locomo-quick)")
    parser.add_argument("--details", type=Path, help="also write per-question JSON lines here")
    parser.add_argument("--state-dir", type=Path, help="keep the sidecar's store here (default: a temp dir)")
    parser.add_argument("--model-dir", type=Path, help="the local model (default: the product's default)")
    args = parser.parse_args(argv)
    if args.quick:
        args.conversations = args.conversations or 1
        args.questions = args.questions or 40
    args.name = args.name or ("locomo-quick" if args.quick else "locomo")
    if args.folds and args.conversations == 1:
        parser.error("--folds leaves one conversation out at a time: it needs at least 2 (--conversations)")
    if args.audit is None and not args.no_audit:
        candidate = args.data.with_name(f"{args.data.stem}_audit_errors.json")
        args.audit = candidate if candidate.exists() else None
    return args


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    began = time.monotonic()
    load_before = os.getloadavg()
    conversations = load_conversations(args.data)[: args.conversations]
    audit = apply_audit(conversations, args.audit) if args.audit and not args.no_audit else None
    settings = RecallSettings()
    block_size = settings.retrieval_count
    text_chars = int(Settings.model_fields["recalled_text_chars"].default)
    phases: dict[str, float] = {}
    records: list[Record] = []
    asked: list[Any] = []  # locomo_folds.Asked, for --folds
    details = args.details.open("w") if args.details else None
    with running_sidecar(args.state_dir, args.model_dir) as sidecar:
        started = time.monotonic()
        for conversation in conversations:
            replay(sidecar, conversation)
        phases["replayS"] = round(time.monotonic() - started, 1)
        started = time.monotonic()
        sidecar.drain()
        phases["embedDrainS"] = round(time.monotonic() - started, 1)
        started = time.monotonic()
        for number, conversation in enumerate(conversations, 1):
            stored = read_back(sidecar, conversation)
            dia = {i: s.dia_id for i, s in stored.items()}
            newest = sorted(stored, key=lambda i: (-stored[i].created_at, -i))[:LANE_K]
            chosen = spread(conversation.questions, args.questions)
            window = host_window(conversation, stored, args.window_turns)
            if details:
                messages = [s.__dict__ for s in sorted(stored.values(), key=lambda s: s.id)]
                details.write(json.dumps({"conversation": conversation.sample_id, "messages": messages}) + "\n")
            for question in chosen:
                if args.window_at == "evidence":
                    window = host_window(
                        conversation, stored, args.window_turns, evidence_session(conversation, question)
                    )
                outcomes, trace = ask(sidecar, conversation, question, stored, newest, block_size, text_chars, window)
                records.append(Record(question, outcomes, dia))
                if args.folds:
                    asked.append(as_asked(conversation, question, dia))
                if details:
                    row = {
                        "conversation": question.conversation,
                        "index": question.index,
                        "category": question.category,
                        "question": question.text,
                        "evidence": sorted(question.evidence),
                        "audited": sorted(question.audited),
                        "nowMs": conversation.now_ms,
                        "outcomes": {k: v.__dict__ for k, v in outcomes.items()},
                        "trace": trace,
                    }
                    details.write(json.dumps(row) + "\n")
            progress = rates(records[-len(chosen) :], "product", False).get("any")
            print(
                f"[{number}/{len(conversations)}] {conversation.sample_id}: {conversation.turns} turns,"
                f" {len(chosen)} questions, product any-hit {progress}",
                file=sys.stderr,
            )
        phases["questionsS"] = round(time.monotonic() - started, 1)
        stats = sidecar.get("/stats")
        folds = run_folds(args, sidecar, asked) if args.folds else None
    if details:
        details.close()
    phases["totalS"] = round(time.monotonic() - began, 1)
    methods: dict[str, dict[str, Any]] = {
        name: {
            "description": description,
            "via": via,
            "raw": summarise(records, name, audited=False),
            "audit": summarise(records, name, audited=True),
            "tokens": token_stats(records, name),
        }
        for name, (description, via) in methods_run(args.window_turns, args.window_at).items()
    }
    skipped: Counter[str] = Counter()
    for conversation in conversations:
        skipped.update(conversation.skipped)
        skipped["not_sampled"] += len(conversation.questions) - len(spread(conversation.questions, args.questions))
    embedder = stats["embedder"]
    report = {
        "meta": {
            "date": datetime.now(UTC).isoformat(timespec="seconds"),
            "version": __version__,
            "gitCommit": git_commit(),
            "machine": {
                **machine.describe(),
                "loadAvgBefore": [round(x, 2) for x in load_before],
                "loadAvgAfter": [round(x, 2) for x in os.getloadavg()],
            },
            "data": shown(args.data),
            "audit": audit,
            "embedder": f"{embedder['model']} ({embedder['variant']})",
            "embedderFallbacks": embedder["fallbacks"],
            "recallSkips": stats["recallSkips"],
            "productDefaults": settings.model_dump(),
            "seedConfig": SEED_CONFIG,
            "serverEnv": SERVER_ENV,
            "blockSize": block_size,
            "recalledTextChars": text_chars,
            "ingest": "one commit-turn per LoCoMo dialogue turn; speaker A = user, speaker B = assistant;"
            f" +{TURN_SPACING_S} s per turn from session_<N>_date_time (UTC); image captions as '[image: ...]'",
            "query": "assemble: prompt = question, messages = [], fresh session id, now = last turn + 1 day",
            "windowTurns": args.window_turns,
            "windowAt": args.window_at,
            "phases": phases,
            "storedMessages": stats["messages"],
            "sidecarLatency": stats["latency"],
        },
        "dataset": {
            "conversations": len(conversations),
            "turns": sum(c.turns for c in conversations),
            "questions": len(records),
            "skipped": dict(skipped),
            "byCategory": dict(Counter(CATEGORIES.get(r.question.category, "?") for r in records)),
            "droppedEvidenceIds": sorted({d for r in records for d in r.question.dropped}),
        },
        "targets": targets_check(methods["product"]["raw"], methods["product"]["tokens"]),
        "reference": REFERENCE,
        "methods": methods,
    }
    if folds is not None:
        # the in-process defaults must reproduce the HTTP product row, or the grid measured something else
        folds["httpProduct"] = {k: methods["product"]["raw"][k] for k in ("n", "any", "all")}
        report["folds"] = folds
        report["meta"]["phases"]["foldsS"] = folds["totalS"]
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / f"{args.name}.json").write_text(json.dumps(report, indent=2) + "\n")
    table = markdown(report)
    (args.out / f"{args.name}.md").write_text(table)
    plot(report, args.out / f"{args.name}.png")
    print(table)
    return 0


if __name__ == "__main__":
    sys.exit(main())
