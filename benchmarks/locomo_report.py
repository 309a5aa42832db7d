"""The LoCoMo benchmark's outputs: what each method is, the markdown tables, the plot, the run's commit."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

from benchmarks import machine
from benchmarks.locomo_data import REPO
from benchmarks.locomo_replay import HYBRID_CONFIG, RECENT_USER_TEXTS, SEED_CONFIG, WINDOW_METHOD
from benchmarks.locomo_scoring import KS, TARGETS

REFERENCE: dict[str, Any] = {
    "note": "simple methods, all ten LoCoMo conversations, one message per turn, k = 20 (benchmarks.md)",
    "bm25": {"any@20": 0.745, "all@20": 0.617, "any@5": 0.585},
    "vector": {"any@20": 0.613, "all@20": 0.486, "any@5": 0.402},
    "rrf": {"any@20": 0.743, "all@20": 0.609},
}
METHODS: dict[str, tuple[str, str]] = {
    "product": ("assemble, no overrides (the product's defaults)", "POST /v1/hooks/assemble"),
    "seed": (
        "the seed's formula: similarity (the better lane) × 0.5^(age/168h) × weight, minSimilarity 0.3, top 20",
        "POST /v1/hooks/assemble config="
        + json.dumps(SEED_CONFIG, separators=(",", ":"))
        + ", re-ranked by similarity × recency × weight from the trace",
    ),
    "hybrid": (
        "the product's ranking, mean(cosine, BM25/best) × weight, with the seed's settings but no recency"
        " decay: minSimilarity 0.3, 20 hits, no neighbours, no token cap",
        "POST /v1/hooks/assemble config=" + json.dumps(HYBRID_CONFIG, separators=(",", ":")),
    ),
    "bm25": ("keyword lane alone, ranked by BM25", "GET /v1/search?mode=keyword (re-ranked by bm25)"),
    "vector": ("vector lane alone, ranked by cosine", "GET /v1/search?mode=vector (ranked by cosine)"),
    "rrf": ("reciprocal-rank fusion (k=60) of the bm25 and vector lists", "computed by the benchmark"),
    "recency": ("the agent's newest messages, no query", "computed by the benchmark from the store"),
}


def window_place(window_at: str) -> str:
    return "the session of the question's latest evidence" if window_at == "evidence" else "the last session"


def methods_run(window_turns: int, window_at: str = "end") -> dict[str, tuple[str, str]]:
    """Every method this run reports, in the tables' order (with ``--window-turns``, ``product+window`` second)."""
    if window_turns <= 0:
        return METHODS
    window = (
        f"assemble, no overrides, asked in {window_place(window_at)} after its last {window_turns} turns"
        f" (descriptors, the last {RECENT_USER_TEXTS} user texts); the block counts the window's turns too",
        "POST /v1/hooks/assemble descriptors=[...]",
    )
    return {"product": METHODS["product"], WINDOW_METHOD: window} | METHODS


def fmt(value: float) -> str:
    return f"{value:.3f}"


def store_line(store: dict[str, Any] | None) -> str:
    """The backend the sidecar stored into (runs before the flag have none: SQLite)."""
    if not store or store.get("backend") == "sqlite":
        return "SQLite"
    return f"PostgreSQL {store.get('version')} with pgvector {store.get('pgvector')}"


def markdown(report: dict[str, Any]) -> str:
    meta, data = report["meta"], report["dataset"]
    out = [
        "# LoCoMo evidence recall through the real hooks",
        "",
        f"Run {meta['date']} on {machine.line(meta['machine'])}, openclaw-lossless"
        f" {meta['version']} ({meta['gitCommit'] or 'no git'}), model {meta['embedder']}; data `{meta['data']}`:"
        f" {data['conversations']} conversations, {data['turns']} turns, {data['questions']} questions scored"
        f" ({data['skipped']}). Store: {store_line(meta.get('store'))}. Wall time {meta['phases']['totalS']:.0f} s.",
        "",
        "Any-hit = at least one evidence turn in the recalled block; all-hit = every evidence turn. `@k` = the"
        " first k of the method's ranking (for assemble: `trace.candidates` by score, above minSimilarity)."
        " Block tokens = the product's token estimate of `systemPromptAddition` (search-based methods: their top"
        f" {meta['blockSize']} rendered the same way). HTTP ms = one `assemble` round trip over loopback with"
        " the trace on, as the benchmark saw it on a shared machine: context, not a target.",
        "",
    ]
    if meta.get("windowTurns"):
        out += [
            f"`{WINDOW_METHOD}`: the same questions asked as a host asks mid-conversation, in"
            f" {window_place(meta.get('windowAt', 'end'))} after"
            f" its last {meta['windowTurns']} turns (sent as descriptors, the text on the last {RECENT_USER_TEXTS}"
            " user messages: what the product reads the question with). Those turns are in the model's context,"
            " so its block any/all counts them too; its @k figures rank recall's candidates alone.",
            "",
        ]
    for audited in (False, True):
        key = "audit" if audited else "raw"
        title = "audit-corrected citations" if audited else "raw citations"
        out += [
            f"## All questions, {title}",
            "",
            "| method | block any | block all | any@5 | any@10 | any@20 | all@20 | any@50 | all@50 | tok p50 | p95 |"
            " HTTP ms p50 | p95 |",
            "|---|---|---|---|---|---|---|---|---|---|---|---|---|",
        ]
        for name, result in report["methods"].items():
            s, t = result[key], result["tokens"]
            out.append(
                f"| {name} | {fmt(s['any'])} | {fmt(s['all'])} | {fmt(s['any@5'])} | {fmt(s['any@10'])} |"
                f" {fmt(s['any@20'])} | {fmt(s['all@20'])} | {fmt(s['any@50'])} | {fmt(s['all@50'])} |"
                f" {t['median']:.0f} | {t['p95']:.0f} | {t.get('assembleHttpP50Ms', '—')} |"
                f" {t.get('assembleHttpP95Ms', '—')} |"
            )
        out.append("")
    out += _grouped_table(report, "byCategory", "Per category (raw citations): block any-hit / all-hit")
    out += ["", *_grouped_table(report, "byConversation", "Per conversation (raw citations): block any-hit / all-hit")]
    checks = report["targets"]
    out += [
        "",
        "## Targets (issue 5), product defaults, raw citations",
        "",
        "| target | value | met |",
        "|---|---|---|",
        f"| any-hit ≥ {TARGETS['anyHit']} | {fmt(checks['anyHit']['value'])} | {checks['anyHit']['met']} |",
        f"| all-hit ≥ {TARGETS['allHit']} | {fmt(checks['allHit']['value'])} | {checks['allHit']['met']} |",
        f"| block p95 ≤ {TARGETS['blockTokensP95']} tokens | {checks['blockTokensP95']['value']:.0f} |"
        f" {checks['blockTokensP95']['met']} |",
        f"| every category any-hit ≥ {TARGETS['categoryAnyHit']} |"
        f" {', '.join(f'{k} {fmt(v)}' for k, v in checks['categoryAnyHit']['value'].items())} |"
        f" {checks['categoryAnyHit']['met']} |",
        "",
        f"Reference ({REFERENCE['note']}): BM25 0.745 / 0.617, vector 0.613 / 0.486, RRF 0.743 / 0.609 (any / all@20).",
        "",
        "## Methods",
        "",
        "| method | what | via |",
        "|---|---|---|",
    ]
    out += [f"| {name} | {r['description']} | `{r['via']}` |" for name, r in report["methods"].items()]
    if "folds" in report:
        from benchmarks import locomo_folds

        out += ["", *locomo_folds.markdown(report["folds"])]
    return "\n".join(out) + "\n"


def plot(report: dict[str, Any], path: Path) -> bool:
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        print("matplotlib is not installed: no plot (pip install matplotlib)", file=sys.stderr)
        return False
    figure, axes = plt.subplots(1, 3, figsize=(16, 4.8))
    for name, result in report["methods"].items():
        for axis, kind in zip(axes[:2], ("any", "all"), strict=True):
            axis.plot(KS, [result["raw"][f"{kind}@{k}"] for k in KS], marker="o", label=name)
    product = report["methods"]["product"]
    for axis, kind, target in ((axes[0], "any", TARGETS["anyHit"]), (axes[1], "all", TARGETS["allHit"])):
        # the block holds the hits plus their neighbours: plot it at its median size, not on the ranking's line
        items = max(product["tokens"]["medianItems"], 1.0)
        axis.scatter([items], [product["raw"][kind]], marker="*", s=160, color="C0", zorder=3)
        axis.annotate(f"product block ({items:.0f} lines)", (items, product["raw"][kind]), fontsize=8,
                      xytext=(-40, 8), textcoords="offset points")  # fmt: skip
        axis.axhline(target, color="grey", linestyle="--", linewidth=1)
        for name in ("bm25", "vector", "rrf"):
            axis.scatter([20], [REFERENCE[name][f"{kind}@20"]], marker="x", color="black")
        axis.set_xscale("log")
        axis.set_xticks(KS, [str(k) for k in KS])
        axis.minorticks_off()
        axis.set_ylim(0, 1)
        axis.set_xlabel("k (first k of the ranking)")
        axis.set_title(f"{kind}-hit@k, raw citations (x = reference k=20; -- target)")
        axis.grid(alpha=0.3)
    axes[0].legend(fontsize=8)
    categories = list(report["methods"]["product"]["raw"]["byCategory"])
    names = list(report["methods"])
    width = 0.8 / len(names)
    for i, name in enumerate(names):
        values = [report["methods"][name]["raw"]["byCategory"][c]["any"] for c in categories]
        axes[2].bar([j + i * width for j in range(len(categories))], values, width, label=name)
    axes[2].axhline(TARGETS["categoryAnyHit"], color="grey", linestyle="--", linewidth=1)
    axes[2].set_xticks([j + 0.4 - width / 2 for j in range(len(categories))], categories)
    axes[2].set_ylim(0, 1)
    axes[2].set_title("block any-hit per category, raw citations")
    figure.tight_layout()
    figure.savefig(path, dpi=110)
    plt.close(figure)
    return True


def git_commit() -> str | None:
    try:
        out = subprocess.run(
            ["git", "rev-parse", "--short", "HEAD"], cwd=REPO, capture_output=True, text=True, timeout=10
        )
    except OSError:
        return None
    return out.stdout.strip() or None


def _grouped_table(report: dict[str, Any], grouping: str, title: str) -> list[str]:
    """One row per method, one column per group (category or conversation): any-hit / all-hit."""
    groups = report["methods"]["product"]["raw"][grouping]
    out = [
        f"## {title}",
        "",
        "| method | " + " | ".join(f"{g} (n={groups[g]['n']})" for g in groups) + " |",
        "|---|" + "---|" * len(groups),
    ]
    for name, result in report["methods"].items():
        cells = result["raw"][grouping]
        pairs = (f"{fmt(cells[g]['any'])} / {fmt(cells[g]['all'])}" for g in groups)
        out.append(f"| {name} | " + " | ".join(pairs) + " |")
    return out
