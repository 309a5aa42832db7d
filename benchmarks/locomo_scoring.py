"""Scoring the recalled blocks and rankings against the LoCoMo citations: any-hit, all-hit, @k and tokens.

A question is hit when the messages a method recalled hold its evidence turns (``dia_id``): any of them
(any-hit) or all of them (all-hit), in the block and in the first k of the ranking; overall, per category
and per conversation, with the raw and with the audit-corrected citations.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from benchmarks.harness import percentile
from benchmarks.locomo_data import CATEGORIES, Question
from benchmarks.locomo_replay import Outcome

KS = (5, 10, 20, 50)
TARGETS = {"anyHit": 0.90, "allHit": 0.80, "blockTokensP95": 2000, "categoryAnyHit": 0.80}


@dataclass
class Record:
    question: Question
    outcomes: dict[str, Outcome]
    dia: dict[int, str]


def hit(ids: Sequence[int], dia: dict[int, str], evidence: frozenset[str]) -> tuple[bool, bool]:
    found = {dia[i] for i in ids if i in dia}
    return bool(found & evidence), evidence <= found


def rates(records: Sequence[Record], method: str, audited: bool) -> dict[str, Any]:
    n = len(records)
    if n == 0:
        return {"n": 0}
    sums: Counter[str] = Counter()
    for record in records:
        evidence = record.question.audited if audited else record.question.evidence
        outcome = record.outcomes[method]
        any_hit, all_hit = hit(outcome.block, record.dia, evidence)
        sums["any"] += any_hit
        sums["all"] += all_hit
        for k in KS:
            any_k, all_k = hit(outcome.ranked[:k], record.dia, evidence)
            sums[f"any@{k}"] += any_k
            sums[f"all@{k}"] += all_k
    return {"n": n} | {
        key: round(sums[key] / n, 4) for key in ["any", "all", *[f"{a}@{k}" for k in KS for a in ("any", "all")]]
    }


def summarise(records: Sequence[Record], method: str, audited: bool) -> dict[str, Any]:
    by_category: dict[str, list[Record]] = defaultdict(list)
    by_conversation: dict[str, list[Record]] = defaultdict(list)
    for record in records:
        by_category[CATEGORIES.get(record.question.category, str(record.question.category))].append(record)
        by_conversation[record.question.conversation].append(record)
    return rates(records, method, audited) | {
        "byCategory": {name: rates(group, method, audited) for name, group in sorted(by_category.items())},
        "byConversation": {name: rates(group, method, audited) for name, group in by_conversation.items()},
    }


def token_stats(records: Sequence[Record], method: str) -> dict[str, float]:
    tokens = [float(r.outcomes[method].tokens) for r in records]
    sizes = [float(len(r.outcomes[method].block)) for r in records]
    stats = {
        "median": percentile(tokens, 50),
        "p95": percentile(tokens, 95),
        "max": max(tokens, default=0.0),
        "medianItems": percentile(sizes, 50),
    }
    latencies = [r.outcomes[method].ms for r in records]
    if latencies and all(ms is not None for ms in latencies):
        # one assemble over loopback HTTP as the benchmark saw it (trace on): context, never a target
        stats["assembleHttpP50Ms"] = round(percentile([ms or 0.0 for ms in latencies], 50), 1)
        stats["assembleHttpP95Ms"] = round(percentile([ms or 0.0 for ms in latencies], 95), 1)
    return stats


def targets_check(summary: dict[str, Any], tokens: dict[str, float]) -> dict[str, Any]:
    categories = {name: group["any"] for name, group in summary["byCategory"].items()}
    return {
        "anyHit": {"value": summary["any"], "target": TARGETS["anyHit"], "met": summary["any"] >= TARGETS["anyHit"]},
        "allHit": {"value": summary["all"], "target": TARGETS["allHit"], "met": summary["all"] >= TARGETS["allHit"]},
        "blockTokensP95": {
            "value": tokens["p95"],
            "target": TARGETS["blockTokensP95"],
            "met": tokens["p95"] <= TARGETS["blockTokensP95"],
        },
        "categoryAnyHit": {
            "value": categories,
            "target": TARGETS["categoryAnyHit"],
            "met": all(v >= TARGETS["categoryAnyHit"] for v in categories.values()),
        },
    }
