"""The two candidate lanes: vector (cosine over the in-memory index) and keyword (FTS5 / BM25).

User text never reaches FTS5 as syntax: it is split into words, stop words dropped, and each word quoted,
so operators, quotes, column filters and SQL fragments in a query are just words. A keyword search that runs
past its deadline is interrupted (SQLite progress handler) and reported, never left to stall the turn.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from openclaw_lossless.capture import grams
from openclaw_lossless.store.api import Fulltext, TermStats
from openclaw_lossless.store.model.sessions import Scope

MAX_QUERY_TERMS = 32
STOP_WORDS = frozenset(
    [
        "a",
        "about",
        "above",
        "after",
        "again",
        "against",
        "all",
        "am",
        "an",
        "and",
        "any",
        "are",
        "as",
        "at",
        "be",
        "because",
        "been",
        "before",
        "being",
        "below",
        "between",
        "both",
        "but",
        "by",
        "can",
        "could",
        "did",
        "do",
        "does",
        "doing",
        "down",
        "during",
        "each",
        "few",
        "for",
        "from",
        "further",
        "had",
        "has",
        "have",
        "having",
        "he",
        "her",
        "here",
        "hers",
        "herself",
        "him",
        "himself",
        "his",
        "how",
        "i",
        "if",
        "in",
        "into",
        "is",
        "it",
        "its",
        "itself",
        "just",
        "me",
        "more",
        "most",
        "my",
        "myself",
        "no",
        "nor",
        "not",
        "now",
        "of",
        "off",
        "on",
        "once",
        "only",
        "or",
        "other",
        "our",
        "ours",
        "ourselves",
        "out",
        "over",
        "own",
        "same",
        "she",
        "should",
        "so",
        "some",
        "such",
        "than",
        "that",
        "the",
        "their",
        "theirs",
        "them",
        "themselves",
        "then",
        "there",
        "these",
        "they",
        "this",
        "those",
        "through",
        "to",
        "too",
        "under",
        "until",
        "up",
        "very",
        "was",
        "we",
        "were",
        "what",
        "when",
        "where",
        "which",
        "while",
        "who",
        "whom",
        "why",
        "will",
        "with",
        "would",
        "you",
        "your",
        "yours",
        "yourself",
        "yourselves",
        "s",
        "t",
        "don",
        "didn",
        "doesn",
        "isn",
        "wasn",
        "weren",
        "won",
        "wouldn",
        "ll",
        "re",
        "ve",
        "d",
        "m",
        "o",
        "y",
        "also",
        "get",
        "got",
        "let",
        "lets",
        "like",
        "ok",
        "okay",
        "yes",
        "yeah",
    ]
)


@dataclass(frozen=True)
class KeywordHit:
    message_id: int
    bm25: float


def query_terms(text: str) -> list[str]:
    """The distinct non-stop words of ``text`` a keyword search looks for, in order (at most ``MAX_QUERY_TERMS``).

    A run of a script written without spaces becomes its pairs of characters, as the index holds it
    (``capture/grams.py``); a single character of such a script is left out, as a single letter is.
    """
    terms: list[str] = []
    for word in grams.query_words(text.lower()):
        if word in STOP_WORDS or (len(word) < 2 and not word.isdigit()) or word in terms:
            continue
        terms.append(word)
        if len(terms) == MAX_QUERY_TERMS:
            break
    return terms


def fts_query(text: str) -> str | None:
    """A safe FTS5 MATCH expression: ``query_terms`` of ``text``, quoted, OR-ed."""
    terms = query_terms(text)
    return " OR ".join(f'"{term}"' for term in terms) if terms else None


def query_pairs(terms: Sequence[str]) -> list[str]:
    """The pairs of characters of an unspaced script among a keyword query's ``terms``."""
    return [term for term in terms if grams.has_unspaced(term)]


def pair_coverage(terms: Sequence[str], message: str, pairs: Sequence[str] | None = None) -> float:
    """The share of a keyword query's ``terms`` (``query_terms``) that ``message`` holds: a pair of characters
    (``pairs``: ``query_pairs`` of the terms, given when known) counts where the message's text has it, a
    word always (the index matched it, stemmed). 1 for a query without pairs, so a query in a spaced
    language is scored as before.

    Why: the keyword lane's scores are relative to its best hit, and a pair is weak evidence: a question in
    other words shares common pairs (particles, endings) with unrelated messages, and the best of those
    scored 1 beside the vector lane's cosine. Weighed by coverage, a message holding a few of the question's
    pairs counts for little, one holding the asked word's pairs nearly all (docs/decisions/0301).
    """
    pairs = query_pairs(terms) if pairs is None else pairs
    if not pairs:
        return 1.0
    lowered = message.lower()
    return (len(terms) - len(pairs) + sum(term in lowered for term in pairs)) / len(terms)


def keyword_search(
    conn: Any,
    fulltext: Fulltext[Any],
    text: str,
    scope: Scope,
    k: int,
    deadline: float,
    terms: TermStats[Any] | None = None,
) -> list[KeywordHit]:
    """Best BM25 matches in scope; raises TimeoutError when ``deadline`` (monotonic) passes first.

    With ``terms``, words too common to rank over the whole history are left out (``store/sqlite/term_stats.py``).
    """
    expression = fts_query(text)
    if expression is None or k <= 0:
        return []
    with fulltext.deadline(conn, deadline):
        expression, after = terms.narrow(conn, expression) if terms is not None else (expression, 0)
        rows = fulltext.best_matches(conn, expression, after, scope, k)
    return [KeywordHit(message_id, -bm25) for message_id, bm25 in rows]
