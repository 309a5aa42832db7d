"""How many of an IVFFlat index's lists a search reads, measured with the queries the store is asked.

An IVFFlat search reads the lists whose centres are nearest the query, and how many it needs to find the true
nearest neighbours depends on how the vectors crowd around the queries, which only the store and its queries
can tell: on the scale benchmark's chat, 2 % of the lists kept 0.987 of the exact top 20 at 1M messages
(2,000 lists), while at 100k (400 lists) 20 % kept 0.933 and 40 % 0.990. A rule fitted to one such chat would
read too few lists of another's, or too many. So ``measure`` asks the index itself, with the last
``QUERIES`` searches a sidecar made through it, each with its scope (``DatabaseIndex`` keeps them, in memory
only; ``vectors.measure_reads`` runs them): each is searched for exactly (every vector of its scope, half
precision), then as a search runs it (the scope's filter, the iterative scan) reading 1, 2, 3, 4, 6, 8, 11,
... lists (steps of about √2), until the index's top ``TOP`` keeps ``TARGET`` of the exact one on average; a
search then reads ``MARGIN`` times that many, never more than the caller's ``most`` (the ``READ_VECTORS``
rule, which a search reads until then: so the measure only ever makes a search cheaper than the rule).
Searched with their own scopes, an agent's queries in a store several agents share are measured on what they
look for: the agent's nearest, further apart in the lists than the whole store's.

Why the queries asked, not stored vectors: a stored vector sits in the list made around it, with its
neighbours, and is easier to find than a prompt. On the scale benchmark's first 100,000 vectors (400 lists),
100 stored vectors, each left out of its own answer, met the target at 32 lists, where the benchmark's
prompts keep only 0.93 of their exact top 20 reading 40.

Recall is counted by distance, not by id: a found vector as near as the exact ``TOP``-th counts, so ties
(common among half-precision copies of int8 codes) do not read as misses.

The cost, once per index and sidecar start at most: ``QUERIES`` exact searches, each reading every vector
(~0.3 s at 1M on one server core, ~30 s in all), and the index searches of the steps (a few seconds), in the
upkeep's thread, on its connection.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

QUERIES = 100  # the searches measured with: the last ones a sidecar made through the index
TOP = 20  # the top measured: recall's vector lane keeps its best 20 (``retrievalCount``)
TARGET = 0.99  # share of the exact top ``TOP`` the index must keep, on average over the queries
MARGIN = 1.5  # a search reads this many times the fewest lists that kept the target
_SLACK = 1e-6  # distances within this of the exact ``TOP``-th count as as near (half precision ties)


@dataclass(frozen=True)
class Reads:
    lists: int  # lists a search reads (at most the caller's ``most``)
    measured: int  # the fewest lists that kept ``TARGET``; ``most`` when none under it did
    recall: float  # the share of the exact top ``TOP`` kept reading ``measured`` lists
    queries: int  # searches measured with


def steps(most: int) -> list[int]:
    """The lists tried, fewest first: 1, 2, 3, 4, 6, 8, 11, 16, ... (steps of about √2), then ``most``."""
    tried: list[int] = []
    n = 1.0
    while round(n) < most:
        if not tried or round(n) > tried[-1]:
            tried.append(round(n))
        n *= math.sqrt(2)
    return [*tried, most]


# The searches measured with, for a number of lists read (None: exactly, every vector of each query's scope):
# each query's ``TOP`` nearest distances, nearest first.
Search = Callable[[int | None], list[list[float]]]


def measure(search: Search, queries: int, most: int) -> Reads:
    """The lists a search should read for ``queries`` queries like those ``search`` runs, at most ``most``."""
    exact = search(None)
    for lists in steps(most):
        recall = _recall(exact, search(lists))
        if recall >= TARGET or lists == most:
            return Reads(min(most, math.ceil(lists * MARGIN)), lists, recall, queries)
    raise AssertionError("steps() ends with most")  # pragma: no cover


def _recall(exact: list[list[float]], found: list[list[float]]) -> float:
    """The mean share of each exact top ``TOP`` the index found: a found vector counts when it is as near as
    the exact answer's farthest (ties are not misses)."""
    shares = []
    for truth, answer in zip(exact, found, strict=True):
        if not truth:
            continue
        farthest = truth[-1] + _SLACK
        shares.append(min(len(truth), sum(1 for distance in answer if distance <= farthest)) / len(truth))
    return sum(shares) / len(shares) if shares else 1.0
