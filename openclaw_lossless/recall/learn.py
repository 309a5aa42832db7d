"""A sidecar starting on a PostgreSQL store learns the words of the store's recent prompts in the background.

Why: the keyword lane asks, for each word of the prompt, how many messages hold it (counted on the GIN index up
to ``keyword_term_limit`` + 1), and, when every word is that common, where the word's newest matches start (a
probe of ~20-30 ms at a million messages: ``store/postgres/term_stats.py``). Both are cached per process, so a
fresh sidecar pays them on its first turns: on a 1M store, its first 100 turns learnt ~190 counts and ~16
starts, and their ``assemble`` p95 was 87.6-120.6 ms against 55-59 for the turns after. A user's next prompts
use the words of their last ones, so ``learn_words`` puts the newest ``PROMPTS`` user messages through the
same ``narrow`` a turn runs, before the turns need them: on that store, 8.4 s at start, after which the first
100 turns' p95 was 61.7 ms (36 counts and 3 starts left to learn) and the 400 turns' 56.2 against 63.0-79.3
(the same store, its keyword vectors in their old layout, two runs without).

Not on SQLite: FTS5 counts a word and finds its newest matches from its postings in a few milliseconds, and
its ``TermStats`` keeps no starts; there is nothing slow to learn ahead.
"""

from __future__ import annotations

import logging
import threading
import time
from typing import Any

from openclaw_lossless.recall.search import fts_query
from openclaw_lossless.store.api import KeywordStats
from openclaw_lossless.store.backend import Backend

log = logging.getLogger(__name__)
PROMPTS = 1000  # the newest user messages whose words are learnt
STATEMENT_S = 5.0  # a prompt's counts and probe give up after this (a server busy elsewhere): its words are left


def learn_words(ops: Backend, conn: Any, terms: KeywordStats[Any], stop: threading.Event) -> int:
    """Put the newest ``PROMPTS`` prompts' keyword queries through ``terms.narrow`` (newest first) until
    ``stop`` is set; the prompts read. A prompt whose statements run past ``STATEMENT_S`` is passed over."""
    began = time.monotonic()
    read = 0
    for text in ops.messages.recent_prompts(conn, PROMPTS):
        if stop.is_set():
            break
        read += 1
        expression = fts_query(text)
        if expression is None:
            continue
        try:
            with ops.fulltext.deadline(conn, time.monotonic() + STATEMENT_S):
                terms.narrow(conn, expression)
        except TimeoutError:
            continue
    counts, starts = terms.learnt()
    log.info(
        "learnt the words of the newest %d prompts in %.1f s: %d counts, %d starts held",
        read, time.monotonic() - began, counts, starts,
    )  # fmt: skip
    return read
