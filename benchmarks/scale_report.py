"""The scale benchmark's outputs: the JSON document as measured, a markdown table against the targets, a plot."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

from benchmarks import machine


def write(document: dict[str, Any], out: Path, name: str) -> None:
    out.mkdir(parents=True, exist_ok=True)
    (out / f"{name}.json").write_text(json.dumps(document, indent=2) + "\n")
    (out / f"{name}.md").write_text(markdown(document))
    plot(document, out / f"{name}.png")
    print(f"wrote {out / name}.{{json,md,png}}")


def _cell(sizes: dict[str, Any], size: str, path: tuple[str, ...]) -> str:
    value: Any = sizes.get(size)
    for key in path:
        if not isinstance(value, dict) or key not in value:
            return "—"
        value = value[key]
    if isinstance(value, dict) and "top20" in value and "p50_ms" in value:  # one point of PostgreSQL's sweep
        return f"{value['top20']} / {value['p50_ms']}"
    if isinstance(value, dict):  # the sweep: one time per shortlist size
        return " / ".join(str(v.get("p50_ms", "—")) for v in value.values())
    return f"{value:,}" if isinstance(value, int) else str(value)


ROWS: list[tuple[str, tuple[str, ...], tuple[str, ...] | None, str]] = [
    # (figure, product path, baseline path, target)
    ("assemble p50 ms (in the sidecar, prompt as query)", ("assemble", "p50"), ("baseline", "assemble", "p50"), ""),
    ("assemble p95 ms (in the sidecar, prompt as query)", ("assemble", "p95"), ("baseline", "assemble", "p95"),
     "≤ 25 @100k, ≤ 60 @1M"),
    ("assemble p99 ms (in the sidecar, prompt as query)", ("assemble", "p99"), ("baseline", "assemble", "p99"), ""),
    ("assemble p95 ms (in the sidecar, 200-message window)", ("assemble_window", "p95"), None, ""),
    ("  phase p95 ms: setup (window, session, scope)", ("assemble", "phases", "setup", "p95"), None, ""),
    ("  phase p95 ms: lanes (vector and keyword side by side)", ("assemble", "phases", "lanes", "p95"), None, ""),
    ("  phase p95 ms: choose (read, score, rank, fit)", ("assemble", "phases", "choose", "p95"), None, ""),
    ("  phase p95 ms: neighbours", ("assemble", "phases", "neighbours", "p95"), None, ""),
    ("  phase p95 ms: render", ("assemble", "phases", "render", "p95"), None, ""),
    ("vector lane p95 ms (top-100)", ("lanes", "vector", "p95"), ("baseline", "vec0_scan_top20", "p95"), ""),
    ("keyword lane p95 ms (top-100)", ("lanes", "keyword", "p95"), None, ""),
    ("query embedding p95 ms", ("lanes", "query_embed", "p95"), None, ""),
    ("assemble p95 ms over HTTP, 200-message history", ("server", "http_assemble", "p95"), None, "≤ 40 @100k"),
    ("commit-turn p50 ms (4 messages)", ("commit", "latency", "p50"), None, ""),
    ("commit-turn p95 ms (4 messages)", ("commit", "latency", "p95"), None, "≤ 10 @1M"),
    ("sustained commits/s", ("commit", "sustained_per_s"), None, ""),
    ("backlog drain msg/s (~100 words)", ("drain", "msg_per_s"), None, "≥ 40"),
    ("bytes on disk per message beyond text", ("size", "beyond_text_per_message"), None, "≤ 3,072"),
    ("  of which vectors", ("size", "per_message_by_table", "vectors"), ("baseline", "vec0_bytes_per_message"), ""),
    ("  of which full-text index", ("size", "per_message_by_table", "fts"), None, ""),
    ("sidecar RSS MB (index loaded)", ("server", "rss_mb"), None, "≤ 1,536 @1M"),
    ("cold start to /healthz ok, s", ("server", "cold_start_s"), None, "≤ 3 @1M"),
    ("cold start to vector index loaded, s", ("server", "index_loaded_s"), None, ""),
    ("load average (1/5/15 min) after measuring", ("load_average",), None, "a quiet machine: < 1"),
    ("vector top-20 overlap with exact float32", ("overlap", "top20", "mean"), None, "≥ 0.98"),
    ("vector top-100 overlap with exact float32", ("overlap", "top100", "mean"), None, ""),
    ("  top-20 overlap, fixed shortlist 2,000", ("overlap", "shortlist_sweep", "2000", "top20"), None, ""),
    ("  top-20 overlap, fixed shortlist 10,000", ("overlap", "shortlist_sweep", "10000", "top20"), None, ""),
    ("  top-20 overlap, fixed shortlist 30,000", ("overlap", "shortlist_sweep", "30000", "top20"), None, ""),
    ("  top-20 overlap, fixed shortlist 40,000", ("overlap", "shortlist_sweep", "40000", "top20"), None, ""),
    ("  vector search p50 ms, fixed shortlist 2,000 / 10,000 / 30,000 / 40,000", ("overlap", "shortlist_sweep"),
     None, ""),
]  # fmt: skip


def server_rows(sizes: dict[str, Any]) -> list[tuple[str, tuple[str, ...], tuple[str, ...] | None, str]]:
    """The PostgreSQL run's own figures: the fill's index build, several sidecars committing at once over HTTP,
    several draining one backlog (absent from a SQLite run, so no row there)."""
    rows: list[tuple[str, tuple[str, ...], tuple[str, ...] | None, str]] = [
        ("fill: COPY (the rows commit_turn writes) or commit_turn", ("fill",), None, ""),
        ("fill s (20,000 messages a transaction)", ("fill_s",), None, ""),
    ]
    rows += [
        (f"  {name} index build s (after the fill)", ("secondary_index_build_s", name), None, "")
        for name in sorted({n for r in sizes.values() for n in r.get("secondary_index_build_s", {})})
    ]
    rows.append(("  vector index build s (after the fill; IVFFlat)", ("index_build_s",), None, ""))
    writers = sorted({int(n) for r in sizes.values() for n in r.get("concurrent_commits", {})})
    for n in writers:
        rows += [
            (f"commits/s, {n} sidecar process(es) writing at once (HTTP)", ("concurrent_commits", str(n),
             "commits_per_s"), None, ""),
            (f"  commit-turn p95 ms over HTTP, {n} at once", ("concurrent_commits", str(n), "latency", "p95"), None,
             ""),
        ]  # fmt: skip
    rows += [
        (f"  top-20 overlap / vector search p50 ms, lists read {name}", ("probes_sweep", name), None, "")
        for name in sorted({n for r in sizes.values() for n in r.get("probes_sweep", {})}, key=_sweep_order)
    ]
    drainers = sorted({int(n) for r in sizes.values() for n in r.get("shared_drain", {})})
    rows += [
        (f"backlog drain msg/s, {n} sidecar process(es) sharing it", ("shared_drain", str(n), "msg_per_s"), None, "")
        for n in drainers
    ]
    return rows


def _sweep_order(name: str) -> int:
    return int(name) if name.isdigit() else 10**9  # "exact" (every scope ranked whole) last


def _server_line(document: dict[str, Any]) -> list[str]:
    server = document.get("server")
    if not server:
        return []
    settings = ", ".join(f"{k}={v}" for k, v in server.get("settings", {}).items())
    return [f"Server: PostgreSQL {server.get('version')}, pgvector {server.get('pgvector')}; settings: {settings}."]


def markdown(document: dict[str, Any]) -> str:
    sizes: dict[str, Any] = document["sizes"]
    names = list(sizes)
    head = "| figure | " + " | ".join(f"{int(n):,}" for n in names) + " | baseline (seed: float32 vec0 scan) | target |"
    backend = " (PostgreSQL + pgvector)" if document.get("backend") == "postgres" else ""
    lines = [
        f"# Scale benchmark{backend} — {document['date']}",
        "",
        f"Machine: {machine.line(document['machine'])}. Command: `{document['command']}`.",
        *_server_line(document),
        f"Vectors: {document['vectors']}. Timings are from one run on a shared machine: compare ratios.",
        "",
        head,
        "|---|" + "---|" * len(names) + "---|---|",
    ]
    for label, product, baseline, target in ROWS + (server_rows(sizes) if document.get("server") else []):
        cells = [_cell(sizes, n, product) for n in names]
        base = " / ".join(_cell(sizes, n, baseline) for n in names) if baseline else "—"
        if all(cell == "—" for cell in cells) and base.strip(" /—") == "":
            continue  # not measured on this backend (the shortlist sweep of SQLite's in-memory index)
        lines.append(f"| {label} | " + " | ".join(cells) + f" | {base} | {target} |")
    lines += ["", "Baseline column: one value per size, in the same order.", ""]
    lines += ratio_table(sizes, names)
    for n in names:
        split = sizes[n].get("size", {}).get("per_message_by_table", {})
        lines.append(
            f"- {int(n):,} messages, bytes per message by table: " + ", ".join(f"{k} {v}" for k, v in split.items())
        )
    first = sizes[names[-1]].get("plans", {})
    if first:
        lines += ["", "Query plans (largest size):", ""]
        lines += [f"- {name}: " + "; ".join(plan) for name, plan in first.items()]
    return "\n".join(lines) + "\n"


def _percentile_of(path: tuple[str, ...]) -> str:
    """The percentile a latency path measures (its last ``pNN`` key), so it is divided by the same one."""
    return next((key for key in reversed(path) if key in ("p50", "p95", "p99")), "p95")


def ratio_table(sizes: dict[str, Any], names: list[str]) -> list[str]:
    """Every latency as a share of the seed's ``assemble`` at the same size and percentile, measured in the run.

    Milliseconds move with the CPU (an AVX2-only core is slower than one with AVX-512/VNNI) and with whatever
    else the machine does; the seed's full float32 scan runs on the same data in the same minutes, so the ratio
    is the figure to compare across machines and runs. The targets in milliseconds still apply as they are.
    """
    lines = [
        "Latencies as a ratio to the seed's assemble (float32 vec0 scan) at the same size and percentile, measured"
        " in this run (lower is better; the machine's speed cancels out):",
        "",
        "| figure | " + " | ".join(f"{int(n):,}" for n in names) + " |",
        "|---|" + "---|" * len(names),
    ]
    for label, product, _baseline, _target in ROWS:
        if not re.search(r"\bms\b", label) or product[0] == "overlap":
            continue
        seed = ("baseline", "assemble", _percentile_of(product))
        cells = [_ratio(_number(sizes[n], product), _number(sizes[n], seed)) for n in names]
        lines.append(f"| {label.strip()} | " + " | ".join(cells) + " |")
    return [*lines, ""]


def _ratio(value: float, seed: float) -> str:
    if value != value or seed != seed or seed <= 0:  # NaN: not measured at this size
        return "—"
    return f"{value / seed:.3f}"


def plot(document: dict[str, Any], path: Path) -> None:
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        print("matplotlib is not installed: no plot (pip install matplotlib)")
        return
    sizes = document["sizes"]
    xs = [int(n) for n in sizes]
    fig, (left, right) = plt.subplots(1, 2, figsize=(11, 4.2))
    series = [
        ("assemble p95 (product)", ("assemble", "p95")),
        ("assemble p95 (seed: vec0 scan)", ("baseline", "assemble", "p95")),
        ("HTTP assemble p95 (product)", ("server", "http_assemble", "p95")),
        ("commit-turn p95 (product)", ("commit", "latency", "p95")),
    ]
    for label, keys in series:
        ys = [_number(sizes[n], keys) for n in sizes]
        left.plot(xs, ys, marker="o", label=label)
    left.set(xscale="log", yscale="log", xlabel="stored messages", ylabel="ms", title="latency")
    left.legend(fontsize=8)
    right.plot(xs, [_number(sizes[n], ("server", "rss_mb")) for n in sizes], marker="o", label="RSS MB")
    right.plot(xs, [_number(sizes[n], ("size", "beyond_text_per_message")) for n in sizes], marker="s",
               label="bytes/message beyond text")  # fmt: skip
    right.set(xscale="log", yscale="log", xlabel="stored messages", title="memory and disk")
    right.legend(fontsize=8)
    fig.suptitle(f"openclaw-lossless scale, {document['date']}, {document['machine']['cpus']} cores")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def _number(result: dict[str, Any], keys: tuple[str, ...]) -> float:
    value: Any = result
    for key in keys:
        value = value.get(key, {}) if isinstance(value, dict) else {}
    return float(value) if isinstance(value, int | float) else float("nan")
