"""The messages' keyword index on PostgreSQL (``search`` tsvector, GIN): the best BM25 matches within a scope.

The SQLite store ranks with FTS5's ``bm25()``; recall's keyword lane was tuned on those scores, so this module
computes the same formula (Robertson/Sparck Jones BM25 as FTS5 writes it, k1 = 1.2, b = 0.75, an IDF floor of
1e-6, negated: lower is better) instead of ``ts_rank_cd``, which weighs cover density and ignores how rare a
word is. Per query word, as FTS5 does per phrase:

- the word becomes ``phraseto_tsquery('lossless', word)``: the word is data, never tsquery syntax, so quotes,
  colons, ``&``, ``|``, ``!`` and parentheses in it are just characters the parser drops, and a word the
  tokenizer splits (``foo_bar``) must match as a phrase, as FTS5's quoted phrase does;
- its document frequency is counted on the GIN index (the postings of the word, never the whole history),
  and kept per process and store until the store grows (in a large store, by a sixteenth); a word the
  table's statistics put in more than ``ESTIMATED_ABOVE`` messages is taken from them instead (``ESTIMATES``);
- its frequency in a matching message is the count of the positions of its lexemes there, and the
  message's length is its count of positions (tokens), the numbers FTS5 keeps.

The corpus size and average length (what FTS5 keeps in its index) are kept per process and store: measured
whole (exactly up to ``EXACT_CORPUS`` messages, beyond it the planner's row count and a sample of pages),
then brought up to date from the messages added since the last query, and measured whole again after
``CORPUS_TTL_S`` (another sidecar may have archived) or ``forget_counts``.

How close its ranking comes to FTS5's, at what cost, and what else was tried:
docs/decisions/0004-postgres-keyword-ranking.md.
"""

from __future__ import annotations

import contextlib
import itertools
import math
import re
import threading
import time
import weakref
from collections import OrderedDict
from collections.abc import Iterator, Sequence
from dataclasses import dataclass

from psycopg import errors as pgerrors
from psycopg.pq import TransactionStatus

from openclaw_lossless.capture.grams import gram_text
from openclaw_lossless.store.model.sessions import Scope
from openclaw_lossless.store.postgres.connection import Connection
from openclaw_lossless.store.postgres.messages import date_terms, pg_text

K1 = 1.2
B = 0.75
IDF_FLOOR = 1e-6  # FTS5's: a word in more than half the messages still counts, barely
MAX_POSITIONS = 256  # positions a tsvector keeps for one lexeme
EXACT_CORPUS = 10_000  # up to this many messages the average length is computed over all of them
SAMPLE_ROWS = 10_000  # beyond it, over about this many messages of pages drawn at random
CORPUS_TTL_S = 600.0
GROWTH_MEASURED = 5_000  # messages added since the last query measured alone; more: the whole store
CACHE_WORDS = 20_000  # word counts kept per process
ESTIMATED_ABOVE = 10_000  # a word's count taken from ANALYZE beyond this many messages (see ``ESTIMATES``)
# Reading a match's row costs about as much as reading this many id entries of the keyword index
# (``bound_in_index``; measured in decision 0004): the ratio holds across machines better than either cost.
IDS_PER_ROW = 8
_EXPRESSION = re.compile(r'"((?:[^"]|"")*)"(?: OR "((?:[^"]|"")*)")*')
_WORD = re.compile(r'"((?:[^"]|"")*)"')
# A vector's count of positions (its tokens), in C: ``ts_rank`` divided by itself normalised by length
# (``cnt_length``), with one lexeme appended so that every vector matches; summing ``unnest`` costs 3x more.
_MARK = "({v} || 'lossless_length:1'::tsvector), 'lossless_length'::tsquery"
_TOKENS = f"(round(ts_rank({_MARK}, 0)::float8 / ts_rank({_MARK}, 2)) - 1)"
# Why estimate: GIN has bitmap scans only, so counting a word reads every posting it has, and ``LIMIT`` stops
# nothing (a common word's first count was most of a keyword query at 1M: decision 0004).
# ANALYZE keeps the most common lexemes of ``messages.search`` (autovacuum's, after a tenth of the table
# changed) with the share of sampled rows holding each: ``estimate`` is that share of the table's rows, for a
# word of one lexeme (0 otherwise, or before any ANALYZE). Its sampling error is a few percent for a word
# this common, and its lossy counting errs low, never high. Such a word's weight only matters when it is
# ranked alone (``term_stats``: every word that common), where it scales every score alike.
ESTIMATES = (
    "WITH common AS (SELECT e.lexeme, e.share * greatest(c.reltuples, 0) AS estimate"
    " FROM pg_stats s CROSS JOIN pg_class c"
    " CROSS JOIN unnest(s.most_common_elems::text::text[], s.most_common_elem_freqs) AS e(lexeme, share)"
    " WHERE s.schemaname = current_schema() AND s.tablename = 'messages' AND s.attname = 'search'"
    " AND c.oid = 'messages'::regclass)"
)
ESTIMATE_OF_WORD = (
    "CROSS JOIN LATERAL (SELECT coalesce(max(common.estimate), 0) AS estimate FROM common"
    " WHERE ARRAY[common.lexeme] = tsvector_to_array(to_tsvector('lossless', w.word))) e"
)


def words_of(expression: str) -> list[str]:
    """The words of recall's restricted expression (``"a" OR "b"``, quotes doubled inside a word).

    Anything else is refused: the expression is built by ``recall/search.fts_query``, so another shape is a
    caller's bug, not a query to guess at.
    """
    if not _EXPRESSION.fullmatch(expression):
        raise ValueError(f"not a keyword expression of quoted words joined by OR: {expression[:80]!r}")
    return [pg_text(word.replace('""', '"')) for word in _WORD.findall(expression)]


def expression_of(words: Sequence[str]) -> str:
    """The restricted expression of these words: what ``words_of`` reads back."""
    return " OR ".join('"' + word.replace('"', '""') + '"' for word in words)


def scope_sql(scope: Scope, alias: str = "m") -> tuple[str, list[object]]:
    """``Scope.sql`` for PostgreSQL: arrays as single parameters, however many agents and sessions."""
    parts: list[str] = []
    params: list[object] = []
    if scope.agent_ids:
        agents = f"{alias}.agent_id = ANY(%s::text[])"
        params.append(sorted(scope.agent_ids))
        if scope.excluded:
            agents = f"({agents} AND {alias}.session_rowid <> ALL(%s::bigint[]))"
            params.append(sorted(scope.excluded))
        parts.append(agents)
    if scope.session_rowids:
        parts.append(f"{alias}.session_rowid = ANY(%s::bigint[])")
        params.append(sorted(scope.session_rowids))
    return ("(" + " OR ".join(parts) + ")" if parts else "false"), params


def best_matches(conn: Connection, expression: str, after: int, scope: Scope, k: int) -> list[tuple[int, float]]:
    """``(message id, bm25)`` of the ``k`` best matches of ``expression`` in scope with an id above ``after``.

    Lower is better, as FTS5's ``bm25()``; ties go to the older message. Two statements when the words were
    counted lately (the store's probe, the ranking); a word not counted lately, or a store grown since the
    last query, costs one more each.
    """
    words = words_of(expression)
    if not words or k <= 0:
        return []
    corpus = corpus_stats(conn)
    counts = document_frequencies(conn, corpus, words)
    # A count can exceed the corpus figure (taken before messages committed meanwhile, or before another
    # sidecar's forget lowered it): the word is then as common as can be, at the floor, never a log of < 0
    idf = [max(math.log((max(corpus.rows - n, 0) + 0.5) / (n + 0.5)), IDF_FLOOR) for n in counts]
    where, params = scope_sql(scope)
    if after > 0:
        bound = newer_than("m", in_index=bound_in_index(corpus.newest - after, sum(counts)))
        where, params = f"{bound} AND {where}", [after, *params]
    rows = (
        in_time(conn)
        .execute(
            _best_matches_sql(len(words), where),
            [words, idf, *words, corpus.average_length or 1.0, *params, _TF_BOUNDS, k],
        )
        .fetchall()
    )
    return [(int(row[0]), float(row[1])) for row in rows]


def newer_than(alias: str, in_index: bool = True) -> str:
    """The bound ``id > %s``: in the scan of the ``(id, search)`` GIN index, or tested on each match's row.

    In the index, ``bigint`` on both sides (btree_gin's operator class has no cross-type operators, and a
    parameter that fits ``integer`` is sent as one). But the index reads one entry per id above the bound,
    whatever the word, and the row of each match costs more: when the ids above the bound outnumber the
    word's matches in the whole history ``IDS_PER_ROW`` times, the row test is cheaper (``bound_in_index``;
    decision 0004). Only for a real bound: ``id > 0`` in the index would read every id.
    """
    if in_index:
        return f"{alias}.id > %s::bigint"
    return f"({alias}.id + 0) > %s::bigint"  # an expression no index has: the bound is tested on the row


def bound_in_index(ids_above: int, matches: int) -> bool:
    """Whether ``newer_than``'s bound costs less in the index (reading ``ids_above`` id entries) than on the
    rows of the words' ``matches`` in the whole history (figures: docs/decisions/0004)."""
    return ids_above <= IDS_PER_ROW * matches


def _best_matches_sql(count: int, where: str) -> str:
    """The ranking for ``count`` words: FTS5's ``fts5Bm25Function`` in SQL.

    ``hits``: the messages in scope holding any word, found on the GIN index, each with ``norm``, BM25's length
    term, and ``rank``, ``ts_rank`` of the query. The length in tokens is ``ts_rank`` without, then with, its
    divide-by-length normalisation: their ratio is the count of the vector's positions (``cnt_length`` in
    PostgreSQL), computed in C where summing ``unnest`` costs five times as much.

    A query of one word of one lexeme (``alone``: every query whose words are all common ranks that way) takes
    the word's count in the message from ``rank`` too (``tf_bounds``). Any other query reads ``held``, the
    vector cut down to the query's lexemes (``setweight`` marks them, ``ts_filter`` keeps them), so counting a
    word reads a few entries, not the whole message: a word of one lexeme weighs its count of positions
    (``single``: its IDF summed over the words sharing the lexeme, as FTS5 weighs two phrases that stem alike
    twice); a word the parser splits (``a_b``, rare: recall's words are ``\\w+``) counts where its phrase
    matches, as often as its least frequent lexeme (an upper bound on FTS5's count of phrase instances).

    What else was tried for a query of several words: docs/decisions/0004-postgres-keyword-ranking.md.
    """
    any_word = " || ".join(["phraseto_tsquery('lossless', %s::text)"] * count)
    return f"""
        WITH terms AS MATERIALIZED (
            SELECT t.idf, phraseto_tsquery('lossless', t.word) AS query,
                   tsvector_to_array(to_tsvector('lossless', t.word)) AS lexemes
            FROM unnest(%s::text[], %s::float8[]) AS t(word, idf)
        ), single AS (
            SELECT array_agg(s.lexeme ORDER BY s.lexeme) AS lexemes, array_agg(s.idf ORDER BY s.lexeme) AS idfs,
                   (SELECT bool_or(cardinality(lexemes) > 1) FROM terms) AS phrases,
                   (SELECT count(*) = 1 AND bool_and(cardinality(lexemes) = 1) FROM terms) AS alone
            FROM (SELECT t.lexemes[1] AS lexeme, sum(t.idf) AS idf FROM terms t
                  WHERE cardinality(t.lexemes) = 1 GROUP BY 1) s
        ), wanted AS (
            SELECT ({any_word}) AS query, array_agg(DISTINCT l) AS lexemes FROM terms, unnest(terms.lexemes) l
        ), hits AS MATERIALIZED (
            SELECT m.id, r.rank,
                   CASE WHEN NOT s.alone THEN ts_filter(setweight(m.search, 'A', w.lexemes), '{{a}}') END AS held,
                   {K1} * ({1 - B} + {B} * round(r.rank / nullif(r.per_token, 0)) / %s::float8) AS norm
            FROM messages m CROSS JOIN wanted w CROSS JOIN single s
            CROSS JOIN LATERAL (SELECT ts_rank(m.search, w.query, 0)::float8 AS rank,
                                       ts_rank(m.search, w.query, 2)::float8 AS per_token) r
            WHERE m.search @@ w.query AND {where}
        )
        SELECT h.id, -(CASE WHEN s.alone THEN (
            SELECT s.idfs[1] * f.tf * {K1 + 1} / (f.tf + h.norm)
            FROM (SELECT width_bucket(h.rank, %s::float8[]) + 1 AS tf) f
        ) ELSE
            coalesce((SELECT sum(s.idfs[array_position(s.lexemes, u.lexeme)] * cardinality(u.positions) * {K1 + 1}
                                 / (cardinality(u.positions) + h.norm)) FROM unnest(h.held) u), 0)
            + coalesce(CASE WHEN s.phrases THEN (
                SELECT sum(t.idf * f.tf * {K1 + 1} / (f.tf + h.norm)) FROM terms t CROSS JOIN LATERAL (
                    SELECT min(cardinality(u.positions)) AS tf FROM unnest(h.held) u WHERE u.lexeme = ANY(t.lexemes)
                ) f WHERE cardinality(t.lexemes) > 1 AND h.held @@ t.query) END, 0)
        END) AS bm25
        FROM hits h CROSS JOIN single s ORDER BY bm25, h.id LIMIT %s"""


def tf_bounds() -> list[float]:
    """Where ``ts_rank(vector, one_lexeme, 0)`` crosses from one count of the lexeme's positions to the next.

    ``ts_rank`` of a single lexeme is ``w × Σ_{j≤tf} 1/j² / (π²/6)`` (``calc_rank_or`` in PostgreSQL's
    ``tsrank.c``), with ``w`` = 0.1, the default weight of position class D, which every position of
    ``messages.search`` has. That grows with every position, up to the 256 a vector keeps for a lexeme, so the
    count is the rank's bucket among these midpoints: exact where ``ts_filter`` and ``unnest`` take twice the
    time (``test_fulltext``: every count from 1 to 256).
    """
    ranks = list(itertools.accumulate(0.1 / (j * j) / 1.64493406685 for j in range(1, MAX_POSITIONS + 1)))
    return [(low + high) / 2 for low, high in itertools.pairwise(ranks)]


_TF_BOUNDS = tf_bounds()


@dataclass(frozen=True)
class Corpus:
    """What BM25 weighs a match against: how many messages, and their average length in tokens."""

    key: tuple[object, ...]  # the store: server, database, schema
    rows: int
    average_length: float
    newest: int  # the newest message id when measured
    taken_at: float


_lock = threading.Lock()
_corpora: dict[tuple[object, ...], Corpus] = {}
_frequencies: OrderedDict[tuple[object, ...], tuple[int, int, float]] = OrderedDict()  # -> count, newest, taken at


def corpus_stats(conn: Connection) -> Corpus:
    """The store's corpus figures, kept per process and store (server, database, schema).

    One cheap probe per query (the newest id). Messages added since the last query are measured and added
    in (exact, and as cheap as the growth is small); a large jump, ``CORPUS_TTL_S`` passing (messages archived
    or forgotten by another sidecar) or ``forget_counts`` measures the whole store again.
    """
    key, newest = store_of(conn)
    with _lock:
        known = _corpora.get(key)
    expired = known is None or time.time() - known.taken_at >= CORPUS_TTL_S
    if known is None or expired or not 0 <= newest - known.newest <= GROWTH_MEASURED:
        fresh = _measure(conn, key, newest)
    elif newest == known.newest:
        return known
    else:
        fresh = _grown(conn, known, newest)
    with _lock:
        _corpora[key] = fresh
    return fresh


def store_of(conn: Connection) -> tuple[tuple[object, ...], int]:
    """Which store ``conn`` reads (server, database, schema: the key of a per-process cache) and its newest
    message id, in one cheap statement."""
    row = in_time(conn).execute("SELECT current_schema(), coalesce((SELECT max(id) FROM messages), 0)").fetchone()
    assert row is not None
    return (conn.info.host, conn.info.port, conn.info.dbname, row[0]), int(row[1])


def _grown(conn: Connection, known: Corpus, newest: int) -> Corpus:
    """``known`` with the messages stored since added in: their count and their tokens."""
    found = (
        in_time(conn)
        .execute(
            f"SELECT count(*), coalesce(sum({_TOKENS.format(v='search')}), 0) FROM messages WHERE id > %s AND id <= %s",
            (known.newest, newest),
        )
        .fetchone()
    )
    added, tokens = (0, 0.0) if found is None else (int(found[0]), float(found[1]))
    rows = known.rows + added
    average = (known.average_length * known.rows + tokens) / rows if rows else 0.0
    return Corpus(known.key, rows, average, newest, known.taken_at)


def forget_counts() -> None:
    """Drop every kept figure and word count: the next query counts again (after messages were archived or
    forgotten, when counts went down)."""
    with _lock:
        _corpora.clear()
        _frequencies.clear()


def _measure(conn: Connection, key: tuple[object, ...], newest: int) -> Corpus:
    """Exact up to ``EXACT_CORPUS`` messages; beyond, the planner's row count (counted when it has none) and
    the average length over a sample of pages, so a refresh never reads every message's vector."""
    capped = _scalar(conn, "SELECT count(*) FROM (SELECT 1 FROM messages LIMIT %s) c", (EXACT_CORPUS + 1,))
    if capped <= EXACT_CORPUS:
        average = _scalar(conn, f"SELECT coalesce(avg({_TOKENS.format(v='search')}), 0) FROM messages", ())
        return Corpus(key, int(capped), average, newest, time.time())
    rows, percent = sample_of(conn, SAMPLE_ROWS)
    sql = f"SELECT coalesce(avg({_TOKENS.format(v='search')}), 0) FROM messages TABLESAMPLE SYSTEM (%s)"
    average = _scalar(conn, sql, (percent,))
    return Corpus(key, rows, average or 1.0, newest, time.time())


def sample_of(conn: Connection, wanted: int) -> tuple[int, float]:
    """The messages stored, as the planner's statistics count them (counted when they have not, or counted no
    more than ``wanted``), and the percent of pages a ``TABLESAMPLE SYSTEM`` reads to see about ``wanted``."""
    rows = _scalar(conn, "SELECT reltuples FROM pg_class WHERE oid = 'messages'::regclass", ())
    if rows <= wanted:  # never analysed (-1), or analysed while still small
        rows = _scalar(conn, "SELECT count(*) FROM messages", ())
    return int(rows), min(100.0, 100.0 * wanted / max(rows, 1.0))


def _scalar(conn: Connection, query: str, params: tuple[object, ...]) -> float:
    row = in_time(conn).execute(query, params).fetchone()
    return 0.0 if row is None or row[0] is None else float(row[0])


def document_frequencies(conn: Connection, corpus: Corpus, words: Sequence[str]) -> list[int]:
    """How many messages hold each word (its phrase), counted on the GIN index (the postings of the word), or
    estimated from ANALYZE's statistics when they put it in more than ``ESTIMATED_ABOVE`` messages.

    A count is kept per process and store until the store grows (beyond ``EXACT_CORPUS`` messages: by a
    sixteenth) or ``CORPUS_TTL_S`` passes: a word asked turn after turn (a name, the topic) is counted once,
    not every turn.
    """
    found: dict[str, int] = {}
    stale: list[str] = []
    with _lock:
        for word in dict.fromkeys(words):
            known = _frequencies.get((corpus.key, word))
            if known is not None and _fresh(known, corpus):
                _frequencies.move_to_end((corpus.key, word))
                found[word] = known[0]
            else:
                stale.append(word)
    if stale:
        rows = (
            in_time(conn)
            .execute(
                f"{ESTIMATES} SELECT w.word, CASE WHEN e.estimate > %s THEN round(e.estimate)::bigint"
                " ELSE (SELECT count(*) FROM messages WHERE search @@ phraseto_tsquery('lossless', w.word)) END"
                f" FROM unnest(%s::text[]) AS w(word) {ESTIMATE_OF_WORD}",
                (ESTIMATED_ABOVE, stale),
            )
            .fetchall()
        )
        with _lock:
            for word, count in rows:
                found[str(word)] = int(count)
                _frequencies[(corpus.key, str(word))] = (int(count), corpus.newest, time.time())
            while len(_frequencies) > CACHE_WORDS:
                _frequencies.popitem(last=False)
    return [found[word] for word in words]


def _fresh(known: tuple[int, int, float], corpus: Corpus) -> bool:
    """Whether a word's count still stands: exact while the store is small (where counting is cheap and
    the figures are exact too), within a sixteenth of its growth beyond."""
    slack = corpus.rows // 16 if corpus.rows > EXACT_CORPUS else 0
    return 0 <= corpus.newest - known[1] <= slack and time.time() - known[2] < CORPUS_TTL_S


_deadlines: weakref.WeakKeyDictionary[Connection, float] = weakref.WeakKeyDictionary()


@contextlib.contextmanager
def deadline(conn: Connection, at: float) -> Iterator[None]:
    """Statements on ``conn`` inside give up at ``at`` (monotonic) with ``TimeoutError``.

    The server's ``statement_timeout`` is set to the time left when the block starts and put back as it was
    after (inside a transaction, for the transaction only, so a rollback restores it too). It bounds each
    statement, not their sum, so this module and ``term_stats`` also check the clock before each statement
    (``in_time``): a search of several statements stops at the first one that would start late, as SQLite's
    progress handler stops the statement running at the deadline.
    """
    left_ms = max(1, int((at - time.monotonic()) * 1000))
    local = conn.info.transaction_status != TransactionStatus.IDLE
    row = conn.execute(
        "SELECT current_setting('statement_timeout'), set_config('statement_timeout', %s, %s)",
        (f"{left_ms}ms", local),
    ).fetchone()
    previous = "0" if row is None else str(row[0])
    outer = _deadlines.get(conn)
    _deadlines[conn] = at
    try:
        yield
    except pgerrors.QueryCanceled as exc:
        raise TimeoutError("keyword search passed its deadline") from exc
    finally:
        if outer is None:
            _deadlines.pop(conn, None)
        else:
            _deadlines[conn] = outer
        if conn.info.transaction_status in (TransactionStatus.IDLE, TransactionStatus.INTRANS):
            conn.execute("SELECT set_config('statement_timeout', %s, %s)", (previous, local))


def in_time(conn: Connection) -> Connection:
    """``conn``, unless a ``deadline`` block on it has passed its time: then ``TimeoutError``."""
    at = _deadlines.get(conn)
    if at is not None and time.monotonic() >= at:
        raise TimeoutError("keyword search passed its deadline")
    return conn


def rebuild(conn: Connection, batch: int) -> Iterator[int]:
    """Derive every message's ``search`` vector again, ``batch`` messages at a time; yields each batch's count.

    The vector is computed by a trigger (``keyword_entry``, m009): rewriting its inputs (the text, and the date
    words and pairs of characters computed again from ``created_at`` and the text) computes it again with the
    current text search configuration. Run it to the end in one write transaction: readers keep the old
    vectors until it commits, and an interrupted rebuild leaves them as they were. Each message is rewritten
    once (dead row versions for VACUUM).
    """
    last = 0
    while True:
        rows = conn.execute(
            "SELECT id, created_at, text FROM messages WHERE id > %s ORDER BY id LIMIT %s", (last, batch)
        ).fetchall()
        if not rows:
            forget_counts()  # lengths and counts changed; a query racing the commit re-counts after the TTL
            return
        yield _rewrite(conn, [int(r[0]) for r in rows], [float(r[1]) for r in rows], [str(r[2]) for r in rows])
        last = int(rows[-1][0])


def _rewrite(conn: Connection, ids: Sequence[int], created: Sequence[float], texts: Sequence[str]) -> int:
    cursor = conn.execute(
        "UPDATE messages m SET text = m.text, date_terms = d.terms, grams = d.grams"
        " FROM unnest(%s::bigint[], %s::text[], %s::text[]) AS d(id, terms, grams) WHERE m.id = d.id",
        (list(ids), [date_terms(at) for at in created], [gram_text(text) for text in texts]),
    )
    return cursor.rowcount
