"""Leave-one-conversation-out selection of the tuned recall defaults, on the store ``locomo.py`` replayed.

Why: the defaults were chosen on the same conversations they were measured on, and held-out conversations
scored lower. Here every tuned knob of ``RecallSettings`` is chosen the way it will be judged: for each fold,
each knob's value is picked from a small grid on the other conversations (the rest at their defaults), and
the knobs so chosen, together, are scored on the held-out conversation. The held-out answers of all folds
together are the out-of-fold figures; the same selection on every conversation is the in-sample one.

Cheap by construction: the store is replayed once (over HTTP, by ``locomo.py``); every configuration of the
grid is then asked once per question through ``Sidecar.assemble`` in this process (the code behind
``POST /v1/hooks/assemble``, without the HTTP layer; opened as the CLI opens a store, ``store_for_queries``),
and each fold's choice is arithmetic over those answers. Only a fold's combination of several changed knobs
needs asking again, on its held-out questions alone.

The choice: the value with the best mean of block any-hit and all-hit (raw citations) on the training
conversations, among those whose block stays within the token target (p95), a tie keeping the default. A
knob's default changes only if its out-of-fold figures beat the default's and most folds agree on the value.
The near-duplicate step (``recall_duplicate_cosine``) stays on only if out-of-fold all-hit and multi-hop
all-hit both improve.
"""

from __future__ import annotations

import math
import statistics
import time
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from openclaw_lossless.config import RecallSettings, Settings
from openclaw_lossless.recall import render
from openclaw_lossless.sidecar import Sidecar, store_for_queries

# Each tuned knob and the values tried, the default among them. Not here: lane fusion (the lanes' mean, a
# rule in code, no setting: docs/decisions/0011-recall-defaults.md), windowShare (no window here) and the vector
# shortlist (a server setting that only matters above ~250k vectors; this store is exact at 2,760).
GRID: dict[str, tuple[Any, ...]] = {
    "recency_floor": (0.8, 0.9, 0.95, 1.0),
    "recency_decay_hours": (72.0, 168.0, 720.0),
    "neighbour_radius": (1, 2, 3),
    "recall_token_budget": (1500, 2000, 2500),
    "retrieval_count": (15, 20, 30),
    "min_similarity": (0.25, 0.3, 0.35),
    "recall_duplicate_cosine": (0.85, 0.9, 0.95, 1.0),
    "recall_time_boost": (0.0, 0.2, 0.4),
}
DEFAULT = "defaults"
# The seed plugin's settings keep its defaults (docs/configuration.md): an out-of-fold winner is reported, not adopted.
SEED_SETTINGS = frozenset({"retrieval_count", "recency_decay_hours", "min_similarity"})
SIGNIFICANCE = 0.1  # a default changes only if the sign test puts its out-of-fold gain below this p
MULTI_HOP = "multi-hop"


@dataclass(frozen=True)
class Asked:
    """One question as ``locomo.py`` asked it over HTTP, with what scores it."""

    conversation: str
    session_key: str
    session_id: str
    prompt: str
    now_ms: int
    category: str
    evidence: frozenset[str]
    dia: dict[int, str]


@dataclass(frozen=True)
class Block:
    any: bool
    all: bool
    tokens: int


Answers = dict[str, list[Block | None]]  # per configuration, per question (None: not asked)


def config_key(knob: str, value: Any) -> str:
    return f"{knob}={value}"


def configurations(defaults: RecallSettings) -> dict[str, RecallSettings]:
    """The defaults and every single-knob change of the grid."""
    found = {DEFAULT: defaults}
    for knob, values in GRID.items():
        if getattr(defaults, knob) not in values:
            raise ValueError(f"the grid of {knob} must hold its default {getattr(defaults, knob)}")
        for value in values:
            if value != getattr(defaults, knob):
                found[config_key(knob, value)] = defaults.model_copy(update={knob: value})
    return found


def ask(store: Sidecar, asked: Asked, recall: RecallSettings) -> Block:
    queries = store.queries
    result = queries.assemble(asked.session_id, asked.session_key, [], asked.prompt, None, recall, asked.now_ms / 1000)
    found = {asked.dia[r.id] for r in result.recalled if r.id in asked.dia}
    tokens = render.estimate_tokens(result.system_prompt_addition)
    return Block(bool(found & asked.evidence), asked.evidence <= found, tokens)


def ask_all(
    store: Sidecar, questions: Sequence[Asked], recall: RecallSettings, only: Callable[[Asked], bool] | None = None
) -> list[Block | None]:
    return [ask(store, q, recall) if only is None or only(q) else None for q in questions]


# -- figures -------------------------------------------------------------------------------------------------


def _blocks(answers: list[Block | None], positions: Sequence[int]) -> list[Block]:
    return [b for p in positions if (b := answers[p]) is not None]


def figures(blocks: Sequence[Block], categories: Sequence[str] = ()) -> dict[str, Any]:
    n = len(blocks)
    if n == 0:
        return {"n": 0, "any": 0.0, "all": 0.0}
    tokens = sorted(b.tokens for b in blocks)
    out: dict[str, Any] = {
        "n": n,
        "any": round(sum(b.any for b in blocks) / n, 4),
        "all": round(sum(b.all for b in blocks) / n, 4),
        "tokensP95": tokens[max(0, -(-95 * n // 100) - 1)],
    }
    if categories:
        names = sorted(set(categories))
        out["byCategory"] = {
            name: figures([b for b, c in zip(blocks, categories, strict=True) if c == name]) for name in names
        }
    return out


def objective(blocks: Sequence[Block]) -> float:
    return (sum(b.any for b in blocks) + sum(b.all for b in blocks)) / (2 * len(blocks)) if blocks else 0.0


def choose(answers: Answers, positions: Sequence[int], defaults: RecallSettings, p95_limit: float) -> dict[str, Any]:
    """Each knob's best value on ``positions`` (the others at their defaults), a tie keeping the default."""
    base = objective(_blocks(answers[DEFAULT], positions))
    chosen: dict[str, Any] = {}
    for knob, values in GRID.items():
        best_value, best = getattr(defaults, knob), base
        for value in values:
            if value == getattr(defaults, knob):
                continue
            blocks = _blocks(answers[config_key(knob, value)], positions)
            if figures(blocks)["tokensP95"] > p95_limit:
                continue
            if (score := objective(blocks)) > best:
                best_value, best = value, score
        chosen[knob] = best_value
    return chosen


def changed(chosen: dict[str, Any], defaults: RecallSettings) -> dict[str, Any]:
    return {k: v for k, v in chosen.items() if v != getattr(defaults, k)}


def answers_for(
    store: Sidecar,
    questions: Sequence[Asked],
    answers: Answers,
    chosen: dict[str, Any],
    defaults: RecallSettings,
    only: Callable[[Asked], bool] | None = None,
) -> list[Block | None]:
    """The answers of the configuration ``chosen`` names: from the grid when it changes one knob or none."""
    diff = changed(chosen, defaults)
    if not diff:
        return answers[DEFAULT]
    if len(diff) == 1:
        return answers[config_key(*next(iter(diff.items())))]
    return ask_all(store, questions, defaults.model_copy(update=diff), only)


# -- the run -------------------------------------------------------------------------------------------------


def run(
    state_dir: Path, model_dir: Path | None, questions: Sequence[Asked], p95_limit: float, log: Callable[[str], None]
) -> dict[str, Any]:
    """Ask every configuration, choose per fold, and return every figure (``report["folds"]`` of locomo.py)."""
    defaults = RecallSettings()
    settings = Settings(
        state_dir=state_dir,
        catch_up=False,
        synchronous="NORMAL",
        assemble_deadline_ms=20_000,
        query_embed_deadline_ms=20_000,
    )
    if model_dir is not None:
        settings = settings.model_copy(update={"model_dir": model_dir})
    conversations = list(dict.fromkeys(q.conversation for q in questions))
    categories = [q.category for q in questions]
    every = range(len(questions))
    began = time.monotonic()
    with store_for_queries(settings) as store:
        grid = configurations(defaults)
        answers: Answers = {}
        for number, (key, recall) in enumerate(grid.items(), 1):
            answers[key] = ask_all(store, questions, recall)
            log(f"[folds] {number}/{len(grid)} {key}: {figures(_blocks(answers[key], every))}")
        grid_s = time.monotonic() - began
        folds = []
        out_of_fold: list[Block | None] = [None] * len(questions)
        per_knob: dict[str, list[Block | None]] = {knob: [None] * len(questions) for knob in GRID}
        for held in conversations:
            train = [p for p, q in enumerate(questions) if q.conversation != held]
            test = [p for p, q in enumerate(questions) if q.conversation == held]
            chosen = choose(answers, train, defaults, p95_limit)
            tuned = answers_for(store, questions, answers, chosen, defaults, held_out(held))
            for p in test:
                out_of_fold[p] = tuned[p]
                for knob in GRID:
                    alone = answers_for(store, questions, answers, {knob: chosen[knob]}, defaults)
                    per_knob[knob][p] = alone[p]
            test_categories = [categories[p] for p in test]
            folds.append(
                {
                    "heldOut": held,
                    "chosen": changed(chosen, defaults),
                    "trainDefaults": figures(_blocks(answers[DEFAULT], train)),
                    "trainTuned": round(objective(_blocks(tuned, train)), 4) if None not in tuned else None,
                    "heldOutDefaults": figures(_blocks(answers[DEFAULT], test), test_categories),
                    "heldOutTuned": figures(_blocks(tuned, test), test_categories),
                }
            )
            log(f"[folds] held out {held}: chose {changed(chosen, defaults) or 'the defaults'}")
        in_sample_choice = choose(answers, list(every), defaults, p95_limit)
        in_sample = answers_for(store, questions, answers, in_sample_choice, defaults)
    return {
        "method": "leave one conversation out; each knob chosen alone on the other conversations by the mean of"
        f" block any-hit and all-hit (raw citations), block p95 ≤ {p95_limit} tokens, ties keep the default;"
        " the knobs chosen, together, scored on the held-out conversation",
        "via": "Sidecar.assemble in the benchmark's process on the replayed store (the code behind"
        " POST /v1/hooks/assemble), prompt = question, empty window, now = last turn + 1 day",
        "grid": {k: list(v) for k, v in GRID.items()},
        "defaults": {k: getattr(defaults, k) for k in GRID},
        "gridS": round(grid_s, 1),
        "totalS": round(time.monotonic() - began, 1),
        "configurations": {key: figures(_blocks(a, every), categories) for key, a in answers.items()},
        "folds": folds,
        "spread": spread(folds),
        "inSample": {"chosen": changed(in_sample_choice, defaults)} | figures(_blocks(in_sample, every), categories),
        "defaultsAll": figures(_blocks(answers[DEFAULT], every), categories),
        "outOfFold": figures(_blocks(out_of_fold, every), categories),
        "outOfFoldPaired": paired_test(answers[DEFAULT], out_of_fold),
        "perKnob": knob_verdicts(per_knob, answers, folds, categories, defaults),
    }


def held_out(conversation: str) -> Callable[[Asked], bool]:
    def test(question: Asked) -> bool:
        return question.conversation == conversation

    return test


def spread(folds: Sequence[dict[str, Any]]) -> dict[str, Any]:
    """Held-out any/all per fold, for the defaults and for the tuned choice: min, max, standard deviation."""
    out: dict[str, Any] = {}
    for row in ("heldOutDefaults", "heldOutTuned"):
        for kind in ("any", "all"):
            values = [f[row][kind] for f in folds]
            out[f"{row}.{kind}"] = {
                "min": min(values),
                "max": max(values),
                "sd": round(statistics.pstdev(values), 4),
                "values": values,
            }
    return out


def knob_verdicts(
    per_knob: dict[str, list[Block | None]],
    answers: Answers,
    folds: Sequence[dict[str, Any]],
    categories: Sequence[str],
    defaults: RecallSettings,
) -> dict[str, Any]:
    """Per knob: the value each fold chose, its out-of-fold figures against the defaults', and the verdict."""
    every = range(len(categories))
    base = figures(_blocks(answers[DEFAULT], every), categories)
    verdicts: dict[str, Any] = {}
    for knob, blocks in per_knob.items():
        picks = [f["chosen"].get(knob, getattr(defaults, knob)) for f in folds]
        tuned = figures(_blocks(blocks, every), categories)
        value, votes = Counter(picks).most_common(1)[0]
        wins = (tuned["any"] + tuned["all"]) > (base["any"] + base["all"])
        if knob == "recall_duplicate_cosine":
            hop = tuned["byCategory"].get(MULTI_HOP, {}).get("all", 0.0)
            wins = tuned["all"] > base["all"] and hop > base["byCategory"].get(MULTI_HOP, {}).get("all", 0.0)
        paired = paired_test(answers[DEFAULT], blocks)
        change = wins and value != getattr(defaults, knob) and votes > len(folds) / 2 and paired["p"] < SIGNIFICANCE
        verdicts[knob] = {
            "default": getattr(defaults, knob),
            "chosenPerFold": picks,
            "outOfFold": tuned,
            "paired": paired,
            "winsOutOfFold": wins,
            "verdict": verdict(knob, value, change),
        }
    return verdicts


def verdict(knob: str, value: Any, change: bool) -> str:
    if not change:
        return "keep the default"
    return (
        f"wins out of fold at {value}; a seed setting, so its default stays the seed's"
        if knob in SEED_SETTINGS
        else f"change to {value}"
    )


def paired_test(before: Sequence[Block | None], after: Sequence[Block | None]) -> dict[str, Any]:
    """Questions gained and lost (any-hit plus all-hit, per question) and the two-sided sign test's p.

    Why: five conversations hold 760 questions, and a default moved by three of them is noise; a change
    must win by more than chance would.
    """
    gained = lost = 0
    for b, a in zip(before, after, strict=True):
        if a is None or b is None:
            continue
        delta = (a.any + a.all) - (b.any + b.all)
        gained, lost = gained + (delta > 0), lost + (delta < 0)
    n = gained + lost
    tail = sum(math.comb(n, k) for k in range(min(gained, lost) + 1)) / 2**n if n else 1.0
    return {"gained": gained, "lost": lost, "p": round(min(1.0, 2 * tail), 4)}


# -- the tables ----------------------------------------------------------------------------------------------


def _pair(row: dict[str, Any]) -> str:
    return f"{row['any']:.3f} / {row['all']:.3f}"


def markdown(folds: dict[str, Any]) -> list[str]:
    names = list(folds["defaultsAll"]["byCategory"])
    out = [
        "## Leave-one-conversation-out selection of the recall defaults (`--folds`)",
        "",
        f"{folds['method']}. Via {folds['via']}. Grid: "
        + "; ".join(f"`{k}` {', '.join(str(v) for v in vs)}" for k, vs in folds["grid"].items())
        + f" (defaults: {', '.join(f'{k} {v}' for k, v in folds['defaults'].items())}). {folds['totalS']:.0f} s.",
        "",
        "| block any / all | all | "
        + " | ".join(f"{n} (n={folds['defaultsAll']['byCategory'][n]['n']})" for n in names)
        + " | multi-hop all |",
        "|---|---|" + "---|" * len(names) + "---|",
    ]
    rows = (
        ("defaults (chosen before on these conversations)", folds["defaultsAll"]),
        (f"in-sample: chosen on all ({folds['inSample']['chosen'] or 'the defaults'})", folds["inSample"]),
        ("**out of fold**: chosen without the conversation scored", folds["outOfFold"]),
    )
    for label, row in rows:
        cells = [_pair(row["byCategory"][n]) for n in names]
        hop = row["byCategory"].get(MULTI_HOP, {}).get("all", 0.0)
        out.append(f"| {label} | {_pair(row)} | " + " | ".join(cells) + f" | {hop:.3f} |")
    if "httpProduct" in folds:
        out += [
            "",
            f"The defaults asked in-process: {_pair(folds['defaultsAll'])}; the product row over HTTP in the same"
            f" run: {_pair(folds['httpProduct'])} (the same code, so the same answers).",
        ]
    out += ["", "| held out | chosen on the others | defaults any / all | tuned any / all |", "|---|---|---|---|"]
    for fold in folds["folds"]:
        out.append(
            f"| {fold['heldOut']} | {fold['chosen'] or 'the defaults'} | {_pair(fold['heldOutDefaults'])} |"
            f" {_pair(fold['heldOutTuned'])} |"
        )
    s = folds["spread"]
    out += [
        "",
        "Spread across folds (held-out any-hit, all-hit: min–max, sd): defaults"
        f" {s['heldOutDefaults.any']['min']:.3f}–{s['heldOutDefaults.any']['max']:.3f}"
        f" (sd {s['heldOutDefaults.any']['sd']:.3f}), {s['heldOutDefaults.all']['min']:.3f}–"
        f"{s['heldOutDefaults.all']['max']:.3f} (sd {s['heldOutDefaults.all']['sd']:.3f}); tuned"
        f" {s['heldOutTuned.any']['min']:.3f}–{s['heldOutTuned.any']['max']:.3f}"
        f" (sd {s['heldOutTuned.any']['sd']:.3f}), {s['heldOutTuned.all']['min']:.3f}–"
        f"{s['heldOutTuned.all']['max']:.3f} (sd {s['heldOutTuned.all']['sd']:.3f}).",
        "",
        f"Out of fold against the defaults, per question: {folds['outOfFoldPaired']['gained']} gained,"
        f" {folds['outOfFoldPaired']['lost']} lost (sign test p = {folds['outOfFoldPaired']['p']}).",
        "",
        "Each knob alone, chosen per fold (the others at their defaults); a default changes only if the knob wins"
        f" out of fold, most folds agree on the value, and the sign test gives p < {SIGNIFICANCE}"
        " (`recall_duplicate_cosine`: only if all-hit and multi-hop all-hit both rise):",
        "",
        "| knob | default | chosen per fold | out-of-fold any / all | multi-hop all | gained / lost (p) | verdict |",
        "|---|---|---|---|---|---|---|",
    ]
    for knob, v in folds["perKnob"].items():
        hop = v["outOfFold"]["byCategory"].get(MULTI_HOP, {}).get("all", 0.0)
        out.append(
            f"| {knob} | {v['default']} | {', '.join(str(p) for p in v['chosenPerFold'])} |"
            f" {_pair(v['outOfFold'])} | {hop:.3f} | {v['paired']['gained']} / {v['paired']['lost']}"
            f" ({v['paired']['p']}) | {v['verdict']} |"
        )
    out += [
        "",
        "Every configuration of the grid on all questions (in-sample):",
        "",
        "| configuration | any / all | multi-hop all | block tokens p95 |",
        "|---|---|---|---|",
    ]
    for key, row in folds["configurations"].items():
        hop = row["byCategory"].get(MULTI_HOP, {}).get("all", 0.0)
        out.append(f"| {key} | {_pair(row)} | {hop:.3f} | {row['tokensP95']} |")
    return [*out, ""]
