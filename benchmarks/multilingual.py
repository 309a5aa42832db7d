"""Recall by language: the multilingual set through the real sidecar, for each local model and each lane.

The set (``benchmarks/fixtures/multilingual.json``, written for this project, see its README) holds eight
languages; in each, six facts a user states, then 32 turns of everyday same-language conversation, and two
questions per fact: one with the fact's own words (``same``) and one in other words (``other``).

For each model, a sidecar (``python -m openclaw_lossless serve``, real SQLite with FTS5 and sqlite-vec, the
real local model chosen with ``LOSSLESS_LOCAL_MODEL``) stores every language as one session of one agent
through ``POST /v1/hooks/commit-turn``, drains its embedding backlog, and is asked every question through
``GET /v1/search`` in each mode (``keyword``, ``vector``, ``hybrid``) over the agent (all 304 messages, every
language). A question scores a hit@k when its fact is among the first k hits. The keyword lane does not
depend on the model; it is reported from the first model's run. Also recorded per model: the backlog's
drain rate (messages a second) and the sidecar's resident memory after the drain.

    python benchmarks/multilingual.py                  # both models; the e5 model must be fetched:
                                                       #   openclaw-lossless model fetch --model multilingual-e5-small
    python benchmarks/multilingual.py --quick          # the default model only: a smoke run of a minute
    python benchmarks/multilingual.py --models all-MiniLM-L6-v2 --out DIR

Writes ``benchmarks/results/multilingual.{json,md}`` (``multilingual-quick.*`` with ``--quick``).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
if str(REPO) not in sys.path:  # run as a script: benchmarks/ is on the path, the repository is not
    sys.path.insert(0, str(REPO))

from benchmarks import machine  # noqa: E402
from benchmarks.harness import JsonCalls  # noqa: E402
from benchmarks.locomo_replay import running_sidecar  # noqa: E402

DATA = Path(__file__).parent / "fixtures" / "multilingual.json"
RESULTS = Path(__file__).parent / "results"
MODELS = ("all-MiniLM-L6-v2", "multilingual-e5-small")
MODES = ("keyword", "vector", "hybrid")
KINDS = ("same", "other")
KS = (1, 5)
AGENT = "multilingual"
START_MS = 1_767_225_600_000  # 2026-01-01: one turn a minute from here


def load(path: Path) -> list[dict[str, Any]]:
    languages: list[dict[str, Any]] = json.loads(path.read_text(encoding="utf-8"))["languages"]
    return languages


def store(sidecar: JsonCalls, languages: list[dict[str, Any]]) -> int:
    """Each language one session: its facts (user turns), then its conversation (user and assistant)."""
    key = f"agent:{AGENT}:main"
    turn = 0
    for language in languages:
        sid = f"multilingual-{language['code']}"
        sidecar.post("/v1/hooks/bootstrap", {"sessionId": sid, "sessionKey": key})
        texts = [(fact["text"], "user") for fact in language["facts"]]
        texts += [(text, "user" if i % 2 == 0 else "assistant") for i, text in enumerate(language["conversation"])]
        for position, (text, role) in enumerate(texts):
            message = {"role": role, "content": [{"type": "text", "text": text}], "timestamp": START_MS + turn * 60_000}
            body = {"sessionId": sid, "sessionKey": key, "advancementKey": f"{sid}:{position}", "messages": [message]}
            answer = sidecar.post("/v1/hooks/commit-turn", body)
            if answer["status"] != "committed" or answer["stored"] != 1:
                raise RuntimeError(f"{sid} turn {position} was not stored: {answer}")
            turn += 1
    return turn


def rank_of(sidecar: JsonCalls, question: str, fact: str, mode: str) -> int | None:
    """1-based rank of the fact among the search's hits (``None``: not in the first ``max(KS)``)."""
    answer = sidecar.get("/v1/search", q=question, mode=mode, k=max(KS), scope=f"agent:{AGENT}")
    for rank, hit in enumerate(answer["hits"], 1):
        if hit["text"].strip() == fact:
            return rank
    return None


def ask(sidecar: JsonCalls, languages: list[dict[str, Any]], modes: Sequence[str]) -> list[dict[str, Any]]:
    rows = []
    for language in languages:
        for fact in language["facts"]:
            for kind in KINDS:
                for mode in modes:
                    rank = rank_of(sidecar, fact[kind], fact["text"], mode)
                    rows.append({"lang": language["code"], "kind": kind, "mode": mode, "rank": rank})
    return rows


def run_model(model: str, languages: list[dict[str, Any]], modes: Sequence[str]) -> dict[str, Any]:
    with running_sidecar(None, None, {"LOSSLESS_LOCAL_MODEL": model}) as (server, sidecar):
        stats = sidecar.get("/stats")
        stored_at = time.monotonic()
        messages = store(sidecar, languages)
        drain_from = time.monotonic()
        sidecar.drain()
        drained = time.monotonic()
        memory = server.memory()
        embedder = sidecar.get("/stats").get("embedder") or stats.get("embedder")
        rows = ask(sidecar, languages, modes)
    return {
        "model": model,
        "embedder": embedder,
        "messages": messages,
        "storeS": round(drain_from - stored_at, 1),
        "drainAfterStoreS": round(drained - drain_from, 1),
        "drainMsgPerS": round(messages / max(drained - stored_at, 1e-9), 1),
        "rssMb": round(memory["rss"] / 2**20),
        "peakRssMb": round(memory["peak"] / 2**20),
        "rows": rows,
    }


def rates(rows: list[dict[str, Any]], **where: str) -> dict[str, float | int]:
    picked = [r for r in rows if all(r[k] == v for k, v in where.items())]
    out: dict[str, float | int] = {"n": len(picked)}
    for k in KS:
        hits = sum(1 for r in picked if r["rank"] is not None and r["rank"] <= k)
        out[f"hit@{k}"] = round(hits / len(picked), 3) if picked else 0.0
    return out


def summarise(runs: list[dict[str, Any]], languages: list[dict[str, Any]]) -> dict[str, Any]:
    """``lane -> language -> kind -> rates``; a lane is ``keyword`` or ``<mode> <model>``."""
    codes = [language["code"] for language in languages] + ["all"]
    lanes: dict[str, list[dict[str, Any]]] = {"keyword": [r for r in runs[0]["rows"] if r["mode"] == "keyword"]}
    for run in runs:
        for mode in ("vector", "hybrid"):
            lanes[f"{mode} {run['model']}"] = [r for r in run["rows"] if r["mode"] == mode]
    table: dict[str, Any] = {}
    for lane, rows in lanes.items():
        table[lane] = {}
        for code in codes:
            scoped = rows if code == "all" else [r for r in rows if r["lang"] == code]
            table[lane][code] = {kind: rates(scoped, kind=kind) for kind in KINDS}
    return table


def markdown(report: dict[str, Any], languages: list[dict[str, Any]]) -> str:
    codes = [language["code"] for language in languages] + ["all"]
    lines = [
        "# Recall by language (multilingual set)",
        "",
        f"Run {report['meta']['startedAt']} on {report['meta']['machine']}; {report['meta']['messages']} messages"
        f" in {len(languages)} languages, {report['meta']['questions']} questions per lane. Hit@5 = the fact is"
        " among the first 5 hits of `GET /v1/search` over the agent (every language's messages); `same` ="
        " asked with the fact's words, `other` = in other words. Keyword does not depend on the model.",
        "",
        "## Hit@5, same words / other words",
        "",
        "| lane | " + " | ".join(codes) + " |",
        "|---|" + "---|" * len(codes),
    ]
    for lane, per_code in report["table"].items():
        cells = [f"{per_code[c]['same']['hit@5']:.2f} / {per_code[c]['other']['hit@5']:.2f}" for c in codes]
        lines.append(f"| {lane} | " + " | ".join(cells) + " |")
    lines += ["", "## Hit@1, same words / other words", "", "| lane | " + " | ".join(codes) + " |"]
    lines.append("|---|" + "---|" * len(codes))
    for lane, per_code in report["table"].items():
        cells = [f"{per_code[c]['same']['hit@1']:.2f} / {per_code[c]['other']['hit@1']:.2f}" for c in codes]
        lines.append(f"| {lane} | " + " | ".join(cells) + " |")
    lines += ["", "## Cost per model", "", "| model | store+drain msg/s | RSS after drain MB | peak RSS MB |"]
    lines.append("|---|---|---|---|")
    for run in report["runs"]:
        lines.append(f"| {run['model']} | {run['drainMsgPerS']} | {run['rssMb']} | {run['peakRssMb']} |")
    load = report["meta"]["loadAvgBefore"][0]
    lines += [
        "",
        f"Load average at the start: {load} on {report['meta']['machineDetails']['cpus']} cores. The drain"
        " rate is the wall time of storing and embedding the set: comparable within a run only;"
        " `benchmarks/embed_speed.py --model` measures throughput properly.",
    ]
    names = ", ".join(f"{language['code']} {language['name']}" for language in languages)
    lines += ["", f"Languages: {names}.", ""]
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--data", type=Path, default=DATA, help="the multilingual set")
    parser.add_argument("--models", nargs="+", choices=MODELS, default=list(MODELS), help="local models to run")
    parser.add_argument("--quick", action="store_true", help="the default model only")
    parser.add_argument("--out", type=Path, default=RESULTS, help="directory for the results")
    args = parser.parse_args(argv)
    models = [MODELS[0]] if args.quick else args.models
    languages = load(args.data)
    started = time.strftime("%Y-%m-%dT%H:%M:%S+00:00", time.gmtime())
    load_before = os.getloadavg()
    runs = [run_model(model, languages, MODES if i == 0 else MODES[1:]) for i, model in enumerate(models)]
    described = machine.describe()
    report = {
        "meta": {
            "startedAt": started,
            "command": machine.command("multilingual.py", sys.argv[1:] if argv is None else argv),
            "machine": machine.line(described),
            "machineDetails": described,
            "loadAvgBefore": [round(x, 2) for x in load_before],
            "messages": runs[0]["messages"],
            "questions": sum(len(language["facts"]) * len(KINDS) for language in languages),
            "data": "benchmarks/fixtures/multilingual.json",
        },
        "table": summarise(runs, languages),
        "runs": runs,
    }
    name = "multilingual-quick" if args.quick else "multilingual"
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / f"{name}.json").write_text(json.dumps(report, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
    (args.out / f"{name}.md").write_text(markdown(report, languages), encoding="utf-8")
    print(markdown(report, languages))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
