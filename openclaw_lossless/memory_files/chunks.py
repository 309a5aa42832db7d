"""Markdown into chunks: one per paragraph (a list, a quote, a fenced block), under the headings it sits in.

Why paragraphs: the memory flush and the agent append a paragraph at a time, so an edit replaces the chunks it
touched and leaves the rest (and their vectors) alone; a chunk keeps its heading trail as its first line, so a
bullet under "## Preferences" is found by that word too. A paragraph longer than ``MAX_CHARS`` is cut at line
ends. Lines are 1-based and inclusive, as the citation ``file:MEMORY.md#L3-7`` names them.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

MAX_CHARS = 1500
_HEADING = re.compile(r"^ {0,3}(#{1,6})\s+(.*?)\s*#*\s*$")
_FENCE = re.compile(r"^ {0,3}(`{3,}|~{3,})")


@dataclass(frozen=True)
class Chunk:
    first_line: int
    last_line: int
    headings: tuple[str, ...]
    body: str

    @property
    def text(self) -> str:
        """What is stored and searched: the heading trail, then the paragraph as written."""
        return (" › ".join(self.headings) + "\n" + self.body) if self.headings else self.body


def chunk_markdown(text: str) -> list[Chunk]:
    """The file's chunks in order; headings alone (no paragraph under them) make none."""
    chunks: list[Chunk] = []
    trail: list[tuple[int, str]] = []  # (level, title) of the headings above
    block: list[tuple[int, str]] = []  # (line number, line) of the paragraph being read
    fence: str | None = None

    def flush() -> None:
        if block:
            chunks.extend(_cut(block, tuple(title for _, title in trail)))
            block.clear()

    for number, line in enumerate(text.splitlines(), start=1):
        if fence is not None:
            block.append((number, line))
            if line.strip().startswith(fence):
                fence = None
            continue
        opening = _FENCE.match(line)
        if opening:
            fence = opening.group(1)[0] * 3
            block.append((number, line))
            continue
        heading = _HEADING.match(line)
        if heading:
            flush()
            level = len(heading.group(1))
            trail[:] = [(lvl, title) for lvl, title in trail if lvl < level] + [(level, heading.group(2))]
            continue
        if not line.strip():
            flush()
            continue
        block.append((number, line))
    flush()
    return chunks


def _cut(block: list[tuple[int, str]], headings: tuple[str, ...]) -> list[Chunk]:
    """The paragraph as one chunk, or as pieces of at most ``MAX_CHARS`` cut at line ends."""
    pieces: list[list[tuple[int, str]]] = [[]]
    size = 0
    for number, line in block:
        if pieces[-1] and size + len(line) > MAX_CHARS:
            pieces.append([])
            size = 0
        pieces[-1].append((number, line[: MAX_CHARS * 4]))
        size += len(line) + 1
    return [Chunk(p[0][0], p[-1][0], headings, "\n".join(line for _, line in p)) for p in pieces if p]
