"""Overlapping bigrams of text written without spaces, so the keyword index finds a word inside it.

Why: the full-text index splits on spaces and punctuation. Chinese, Japanese and Thai put no space between
words, and Korean attaches particles to a word (``김민수예요``), so a sentence is one token and a word asked
for (``北京``, ``田中``, ``김민수``) matches nothing. As Lucene's CJK analyzer does, every run of such a script
is also indexed as its overlapping pairs of characters (``北京出差`` → ``北京 京出 出差``), and a query's runs
become the same pairs: a word of two or more characters is then found inside any run holding it, and BM25
over the pairs ranks a message holding all of a word's pairs above one holding some. The pairs are a
column beside the text (``gram_text``); text with no such run has none, so its index and ranking are as
before. A lone character of such a script is not a pair and is not searched (a query needs two).

Both backends' stores write ``gram_text`` of each message and both read queries through ``query_words``;
anything else indexed by the full-text index (workspace memory) can call the same two functions.
"""

from __future__ import annotations

import re

# Scripts written without spaces between words (Han, kana, Thai, Lao, Khmer, Myanmar, Yi, Bopomofo), and
# Hangul, written with spaces but with particles attached to the word. Combining marks of these scripts are
# in their blocks, so a Thai word is one run. The ideographic iteration and prolonged-sound marks are in.
UNSPACED_CHARS = (
    "\u0e00-\u0eff"  # Thai, Lao
    "\u1000-\u109f"  # Myanmar
    "\u1100-\u11ff"  # Hangul Jamo
    "\u1780-\u17ff"  # Khmer
    "\u2e80-\u2fdf"  # CJK radicals, Kangxi radicals
    "\u3005-\u3007\u3021-\u3029\u3031-\u3035\u3038-\u303c"  # 々〆〇, Hangzhou numerals, kana repeat marks
    "\u3040-\u30ff"  # Hiragana, Katakana (with ー)
    "\u3100-\u31ff"  # Bopomofo, Hangul compatibility Jamo, Katakana extensions
    "\u3400-\u4dbf"  # CJK extension A
    "\u4e00-\u9fff"  # CJK unified ideographs
    "\ua000-\ua4cf"  # Yi
    "\ua960-\ua97f"  # Hangul Jamo extended A
    "\uac00-\ud7ff"  # Hangul syllables, Jamo extended B
    "\uf900-\ufaff"  # CJK compatibility ideographs
    "\uff66-\uffdc"  # half-width Katakana and Hangul
    "\U00020000-\U0003134f"  # CJK extensions B-G
)
_RUN = f"[{UNSPACED_CHARS}]+"
_HAS_UNSPACED = re.compile(f"[{UNSPACED_CHARS}]")
# A run of such a script, or a word of any other (``\w`` without those scripts' characters)
_SEGMENT = re.compile(f"({_RUN})|((?:(?![{UNSPACED_CHARS}])\\w)+)")
_WORD = re.compile(r"\w+", re.UNICODE)
# Only a message's first characters are paired (a text that long is an import's, not a chat line): a
# PostgreSQL tsvector holds at most 1 MB, and 20,000 characters' distinct pairs stay far below it.
GRAM_CHARS = 20_000


def has_unspaced(text: str) -> bool:
    """Whether ``text`` holds a character of a script written without spaces (or Hangul). ASCII text (most
    messages) is answered without a scan: CPython knows a string is ASCII from its header."""
    return not text.isascii() and _HAS_UNSPACED.search(text) is not None


def pairs(run: str) -> list[str]:
    """The overlapping pairs of characters of ``run`` (none for a single character).

    Combining marks (Thai vowels and tones, ...) are left out: the keyword index splits a word at them (FTS5's
    unicode61 takes only letters and digits into a token), so a pair holding one would not be one token.
    """
    if not run.isalnum():
        run = "".join(c for c in run if c.isalnum())
    return [run[i : i + 2] for i in range(len(run) - 1)]


def gram_text(text: str) -> str | None:
    """What the index holds beside ``text``: the pairs of every unspaced run, and the other words of any word
    that mixes scripts (``iPhone手机`` → ``iPhone 手机``), space-separated; None when ``text`` has no such run.

    The text's own tokens stay indexed as they were: a mixed word is one token there, so its Latin part is
    repeated here for a query that asks for it alone.
    """
    if text.isascii():
        return None
    head = text[:GRAM_CHARS]
    if not has_unspaced(head):
        return None
    out: list[str] = []
    segments = list(_SEGMENT.finditer(head))
    for i, segment in enumerate(segments):
        if segment.group(1) is not None:
            out.extend(pairs(segment.group(1)))
        elif _touches_run(segments, i):
            out.append(segment.group(2))
    return " ".join(out) or None


def _touches_run(segments: list[re.Match[str]], i: int) -> bool:
    """Whether segment ``i`` (a word of another script) is part of one word with a neighbouring run."""
    before = i > 0 and segments[i - 1].group(1) is not None and segments[i - 1].end() == segments[i].start()
    after = (
        i + 1 < len(segments) and segments[i + 1].group(1) is not None and segments[i + 1].start() == segments[i].end()
    )
    return before or after


def query_words(text: str) -> list[str]:
    """The words of a query in order: ``\\w+`` words, with each unspaced run replaced by its pairs.

    Text without an unspaced run gives exactly ``\\w+``'s words, so queries in spaced languages are as before.
    """
    if not has_unspaced(text):
        return _WORD.findall(text)
    words: list[str] = []
    for segment in _SEGMENT.finditer(text):
        words.extend(pairs(segment.group(1)) if segment.group(1) is not None else [segment.group(2)])
    return words
