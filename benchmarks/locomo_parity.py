"""Recall parity of two LoCoMo runs of the same questions: which questions one store recalls and the other not.

Issue 16 asks the PostgreSQL backend for the SQLite backend's recall: with the default settings, any-hit and
all-hit within 0.01. Run ``locomo.py --details`` on both backends over the same conversations and questions,
then compare the two files here::

    python benchmarks/locomo.py --backend sqlite --name locomo-parity-sqlite --details /tmp/sqlite.jsonl
    python benchmarks/locomo.py --backend postgresql --details /tmp/postgres.jsonl
    python benchmarks/locomo_parity.py /tmp/sqlite.jsonl /tmp/postgres.jsonl --out benchmarks/results/locomo-parity.md

What it reports, on the raw citations: each method's block any-hit and all-hit on both and their difference,
with the count of questions hit on one backend only; how alike the two backends' rankings are (the mean
share of one's first 20 dia_ids the other also ranks first 20, per lane: the keyword lane alone, the vector
lane alone, the product's candidates); and, for every question the product's block hits on one backend
only, where its evidence turns stood on each (their lanes, lane ranks and the product's decision), and the
block's turns that differ. Both runs are scored by dia_id, so message ids need not agree.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

METHODS = ("product", "hybrid", "seed", "bm25", "vector", "rrf")
RANKINGS = ("bm25", "vector", "product")
TOP = 20

Key = tuple[str, int]  # (conversation, question index)


@dataclass
class Run:
    """One ``--details`` file: each conversation's message id -> dia_id, and each question's line."""

    dia: dict[str, dict[int, str]]
    questions: dict[Key, dict[str, Any]]

    @classmethod
    def read(cls, path: Path) -> Run:
        dia: dict[str, dict[int, str]] = {}
        questions: dict[Key, dict[str, Any]] = {}
        with path.open() as lines:
            for line in lines:
                row = json.loads(line)
                if "messages" in row:
                    dia[row["conversation"]] = {int(m["id"]): str(m["dia_id"]) for m in row["messages"]}
                else:
                    questions[(row["conversation"], int(row["index"]))] = row
        return cls(dia, questions)

    def turns(self, key: Key, method: str, part: str) -> list[str]:
        """The dia_ids of a method's ``block`` or ``ranked`` for one question, in order."""
        known = self.dia[key[0]]
        return [known[i] for i in self.questions[key]["outcomes"][method][part] if i in known]

    def hit(self, key: Key, method: str) -> tuple[bool, bool]:
        evidence = set(self.questions[key]["evidence"])
        found = set(self.turns(key, method, "block"))
        return bool(found & evidence), evidence <= found

    def candidate(self, key: Key, turn: str) -> dict[str, Any] | None:
        """The product's trace entry of one dia_id for a question (None: not a candidate)."""
        known = self.dia[key[0]]
        return next((c for c in self.questions[key]["trace"]["candidates"] if known.get(c["message_id"]) == turn), None)


def method_rows(a: Run, b: Run, keys: Sequence[Key]) -> list[str]:
    rows = [
        "| method | any A | any B | B − A | all A | all B | B − A | any-hit on A only | on B only |"
        " all-hit on A only | on B only |",
        "|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    n = len(keys)
    for method in METHODS:
        hits = [(a.hit(k, method), b.hit(k, method)) for k in keys]
        cells = []
        for part in (0, 1):
            on_a = sum(x[part] for x, _ in hits) / n
            on_b = sum(y[part] for _, y in hits) / n
            cells += [f"{on_a:.4f}", f"{on_b:.4f}", f"{on_b - on_a:+.4f}"]
        only = (
            [sum(x[p] and not y[p] for x, y in hits) for p in (0, 1)],
            [sum(y[p] and not x[p] for x, y in hits) for p in (0, 1)],
        )
        rows.append(f"| {method} | {' | '.join(cells)} | {only[0][0]} | {only[1][0]} | {only[0][1]} | {only[1][1]} |")
    return rows


def ranking_rows(a: Run, b: Run, keys: Sequence[Key]) -> list[str]:
    rows = [
        f"| ranking | mean top-{TOP} overlap | same top-{TOP} order | same block |",
        "|---|---|---|---|",
    ]
    for method in RANKINGS:
        overlaps, same_order, same_block = [], 0, 0
        for k in keys:
            first_a, first_b = a.turns(k, method, "ranked")[:TOP], b.turns(k, method, "ranked")[:TOP]
            if first_a or first_b:
                overlaps.append(len(set(first_a) & set(first_b)) / max(len(first_a), len(first_b)))
            same_order += first_a == first_b
            same_block += set(a.turns(k, method, "block")) == set(b.turns(k, method, "block"))
        mean = sum(overlaps) / len(overlaps) if overlaps else 1.0
        rows.append(f"| {method} | {mean:.4f} | {same_order}/{len(keys)} | {same_block}/{len(keys)} |")
    return rows


def where(run: Run, key: Key, turn: str) -> str:
    """Where one evidence turn stood in a run: lane ranks and the product's decision on it."""
    ranks = []
    for lane in ("bm25", "vector"):
        ranked = run.turns(key, lane, "ranked")
        ranks.append(f"{lane} #{ranked.index(turn) + 1}" if turn in ranked else f"{lane} —")
    entry = run.candidate(key, turn)
    decision = "not a candidate" if entry is None else f"{entry['decision']} via {'+'.join(entry['lanes'])}"
    return f"{', '.join(ranks)}, {decision}"


def disagreement_rows(a: Run, b: Run, keys: Sequence[Key]) -> list[str]:
    rows: list[str] = []
    for k in keys:
        hit_a, hit_b = a.hit(k, "product"), b.hit(k, "product")
        if hit_a == hit_b:
            continue
        question = a.questions[k]
        block_a, block_b = set(a.turns(k, "product", "block")), set(b.turns(k, "product", "block"))
        rows.append(
            f"- {k[0]} q{k[1]} (category {question['category']}) {question['question']!r}: any/all A"
            f" {hit_a[0]}/{hit_a[1]}, B {hit_b[0]}/{hit_b[1]}; block turns on A only"
            f" {sorted(block_a - block_b)}, on B only {sorted(block_b - block_a)}"
        )
        rows += [f"  - {turn}: A {where(a, k, turn)}; B {where(b, k, turn)}" for turn in sorted(question["evidence"])]
    return rows or ["None."]


def report(a: Run, b: Run, names: tuple[str, str]) -> str:
    if set(a.questions) != set(b.questions):
        raise SystemExit(f"not the same questions: {len(a.questions)} against {len(b.questions)}")
    keys = sorted(a.questions)
    out = [
        "# LoCoMo recall parity",
        "",
        f"A = `{names[0]}`, B = `{names[1]}`: {len(keys)} questions in {len(a.dia)} conversations, raw"
        " citations, block any-hit / all-hit with the default settings (see `locomo.py` for the methods).",
        "",
        *method_rows(a, b, keys),
        "",
        f"How alike the rankings are (dia_ids of the first {TOP}; `product`: its candidates by score):",
        "",
        *ranking_rows(a, b, keys),
        "",
        "## Questions the product's block hits on one backend only",
        "",
        *disagreement_rows(a, b, keys),
        "",
    ]
    return "\n".join(out)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    parser.add_argument("a", type=Path, help="--details of the first run (the SQLite one)")
    parser.add_argument("b", type=Path, help="--details of the second run, same questions (the PostgreSQL one)")
    parser.add_argument("--out", type=Path, help="also write the markdown here")
    args = parser.parse_args(argv)
    text = report(Run.read(args.a), Run.read(args.b), (args.a.name, args.b.name))
    if args.out:
        args.out.write_text(text)
    print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
