"""Keyword statistics both backends keep alike: how many terms are counted and which rare ones are kept."""

from __future__ import annotations

from dataclasses import dataclass

DEFAULT_LIMIT = 5000


CACHE_TERMS = 20000


@dataclass(frozen=True)
class TermCount:
    count: int  # messages holding the word, counted up to limit + 1
    probed_at: int  # the newest message id when counted


def keep_rarest(terms: list[str], counts: dict[str, int], limit: int) -> list[str] | None:
    """The words worth ranking, rarest first, while their matches stay within ``2 × limit``; ``[]`` when every
    word is too common to rank over the whole history; None when no message holds any of them.

    Shared by both backends: they count the words each its own way, and choose among them alike. A word no
    message holds matches nothing: kept as the "rarest", it would push out every word that does.
    """
    held = [term for term in terms if counts[term] > 0]
    if not held:
        return None
    rare = sorted((term for term in held if counts[term] <= limit), key=lambda term: counts[term])
    if not rare:
        return []
    kept, postings = [rare[0]], counts[rare[0]]
    for term in rare[1:]:
        if postings + counts[term] > 2 * limit:
            break
        kept.append(term)
        postings += counts[term]
    return kept
