"""The LoCoMo conversations replayed into a real sidecar over its hooks, and every method asked each question.

The sidecar is the product as a user runs it (``benchmarks/harness.py``): ``serve`` in a process of its own,
with no ``LOSSLESS_*`` of the caller's shell but the run's deadlines (``SERVER_ENV``). ``replay`` commits one
turn per dialogue turn, ``read_back`` maps the stored messages to their ``dia_id``, and ``ask`` gets each
method's ranking and block for one question (see ``locomo.py`` for what each method is).
"""

from __future__ import annotations

import tempfile
import time
from collections import defaultdict
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from benchmarks.harness import JsonCalls, SidecarFailed, SidecarProcess
from benchmarks.locomo_data import Conversation, Question, Session, Turn
from openclaw_lossless.capture.text import descriptor_text, descriptor_tokens, window_key
from openclaw_lossless.recall import render
from openclaw_lossless.store.model.messages import StoredMessage

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
# The run's server settings that are not recall settings: generous deadlines so a busy machine cannot
# silently turn a vector query into a keyword-only one (fallbacks are still counted and reported).
SERVER_ENV = {
    "LOSSLESS_SYNCHRONOUS": "NORMAL",
    "LOSSLESS_ASSEMBLE_DEADLINE_MS": "20000",
    "LOSSLESS_QUERY_EMBED_DEADLINE_MS": "20000",
}
WINDOW_METHOD = "product+window"
RECENT_USER_TEXTS = 3  # the plugin describes this many last user messages with their text (plugin/index.js)


@contextmanager
def running_sidecar(
    state_dir: Path | None, model_dir: Path | None, store_env: dict[str, str] | None = None
) -> Iterator[tuple[SidecarProcess, JsonCalls]]:
    """``serve`` on a free loopback port over ``state_dir`` (default: a temp dir), ready with the local model.

    ``store_env`` names the store when it is not the state dir's SQLite file (``LOSSLESS_DATABASE_URL`` and
    ``LOSSLESS_DATABASE_SCHEMA`` of a PostgreSQL one); it is added to ``SERVER_ENV``, never to recall's settings.
    """
    with tempfile.TemporaryDirectory(prefix="locomo-bench-") as scratch:
        state = state_dir or Path(scratch) / "state"
        state.mkdir(mode=0o700, parents=True, exist_ok=True)
        args = ["--model-dir", str(model_dir)] if model_dir is not None else []
        env = SERVER_ENV | (store_env or {})
        server = SidecarProcess(state, env=env, args=args, log=state / "sidecar.log", clean_env=True)
        try:
            server.spawn().wait_healthy(180, poll_s=0.2)
            health = server.health()
            if health.get("status") != "ok":
                raise SidecarFailed(f"the sidecar is not ready (is the model fetched?): {health}")
            with server.client(timeout=120) as client:
                yield server, JsonCalls(client)
        finally:
            server.stop()


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


def replay(sidecar: JsonCalls, conversation: Conversation) -> None:
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


def read_back(sidecar: JsonCalls, conversation: Conversation) -> dict[int, Stored]:
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


def _as_stored(s: Stored) -> StoredMessage:
    """The fields ``render.line`` reads, as the product's message type."""
    return StoredMessage(s.id, s.role, "message", s.created_at, s.text, 0, "", None, s.importance, "")


def rendered_tokens(ids: Sequence[int], stored: dict[int, Stored], text_chars: int) -> int:
    """Tokens of a block of these messages rendered exactly as the product renders recalled lines."""
    if not ids:
        return 0
    chosen = sorted((stored[i] for i in ids if i in stored), key=lambda s: (s.created_at, s.id))
    lines = [render.line(_as_stored(s), text_chars) for s in chosen]
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
    sidecar: JsonCalls,
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
