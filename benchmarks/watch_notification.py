"""How watch mode should learn that the host wrote a transcript: latency and CPU at idle of each way.

Each mechanism runs in a child process of its own watching one agent's ``openclaw-agent.sqlite`` (WAL mode,
held open by this process as a running OpenClaw holds it). The child first sits idle for ``--idle-s``
seconds and reports the CPU time it used; then this process commits ``--writes`` transcript rows at uneven
intervals and the child reports when it noticed each. Latency: notice time minus commit time.

Mechanisms: ``stat`` (the sizes and mtimes of the database and its WAL, what ``catchup.fingerprint`` reads,
every ``--interval-s``), ``data_version`` (``PRAGMA data_version`` on a connection held open, same interval),
and ``inotify`` (the watchdog library's inotify observer on the agent folder, no polling). Results go to
``docs/decisions/0200-watch-notification.md``. Usage: ``python -m benchmarks.watch_notification``.
"""

from __future__ import annotations

import argparse
import json
import random
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from benchmarks.machine import cpu

SCHEMA = "CREATE TABLE transcript_events (session_id TEXT, seq INTEGER, event_json TEXT, PRIMARY KEY (session_id, seq))"


def child(mechanism: str, database: Path, interval_s: float, idle_s: float) -> None:
    """Watch ``database``; print ``idle <cpu s>`` after the idle spell, then ``hit <epoch s>`` per change."""
    notice = _notifier(mechanism, database, interval_s)
    started, cpu0 = time.monotonic(), time.process_time()
    print("ready", flush=True)
    reported = False
    while True:
        changed = notice()
        if not reported and time.monotonic() - started >= idle_s:
            print(f"idle {time.process_time() - cpu0:.6f} {time.monotonic() - started:.3f}", flush=True)
            reported = True
        if changed and reported:
            print(f"hit {time.time():.6f}", flush=True)


def _notifier(mechanism: str, database: Path, interval_s: float) -> Any:
    if mechanism == "stat":
        from openclaw_lossless.history.catchup import fingerprint

        state, agent = database.parents[3], database.parents[1].name
        seen = [fingerprint(state, agent)]

        def by_stat() -> bool:
            time.sleep(interval_s)
            now = fingerprint(state, agent)
            changed, seen[0] = now != seen[0], now
            return changed

        return by_stat
    if mechanism == "data_version":
        conn = sqlite3.connect(f"file:{database}?mode=ro", uri=True)
        version = [conn.execute("PRAGMA data_version").fetchone()[0]]

        def by_version() -> bool:
            time.sleep(interval_s)
            now = conn.execute("PRAGMA data_version").fetchone()[0]
            changed, version[0] = now != version[0], now
            return bool(changed)

        return by_version
    import importlib
    import queue

    # Not a dependency: pip install watchdog to measure it (imported by name so the type check needs no stubs).
    handlers = importlib.import_module("watchdog.events")
    inotify = importlib.import_module("watchdog.observers.inotify")
    events: queue.Queue[float] = queue.Queue()

    def on_modified(_self: Any, event: Any) -> None:
        if not str(event.src_path).endswith("-shm"):
            events.put(time.time())

    handler = type("Handler", (handlers.FileSystemEventHandler,), {"on_modified": on_modified})()
    observer = inotify.InotifyObserver()
    observer.schedule(handler, str(database.parent), recursive=False)
    observer.start()

    def by_event() -> bool:
        try:
            events.get(timeout=1.0)
        except queue.Empty:
            return False
        while not events.empty():
            events.get_nowait()
        return True

    return by_event


def measure(mechanism: str, interval_s: float, idle_s: float, writes: int) -> dict[str, Any]:
    with tempfile.TemporaryDirectory() as tmp:
        database = Path(tmp) / "agents" / "main" / "agent" / "openclaw-agent.sqlite"
        database.parent.mkdir(parents=True)
        host = sqlite3.connect(database, isolation_level=None)
        host.execute("PRAGMA journal_mode = WAL")
        host.execute(SCHEMA)
        args = [sys.executable, "-m", "benchmarks.watch_notification", "--child", mechanism, "--database",
                str(database), "--interval-s", str(interval_s), "--idle-s", str(idle_s)]  # fmt: skip
        proc = subprocess.Popen(args, stdout=subprocess.PIPE, text=True)
        assert proc.stdout is not None
        try:
            assert proc.stdout.readline().strip() == "ready"
            _, cpu_s, wall_s = proc.stdout.readline().split()
            latencies = []
            rng = random.Random(7)
            for seq in range(writes):
                time.sleep(interval_s + rng.uniform(0.2, 0.8))
                host.execute("INSERT INTO transcript_events VALUES ('s', ?, ?)", (seq, json.dumps({"n": seq})))
                wrote = time.time()
                line = proc.stdout.readline().split()
                latencies.append(float(line[1]) - wrote)
        finally:
            proc.kill()
            proc.wait()
            host.close()
    ordered = sorted(latencies)
    return {
        "mechanism": mechanism,
        "intervalS": interval_s if mechanism != "inotify" else None,
        "idleCpuPercent": round(100 * float(cpu_s) / float(wall_s), 4),
        "latencyMsP50": round(1000 * statistics.median(ordered), 1),
        "latencyMsMax": round(1000 * ordered[-1], 1),
        "writes": writes,
    }


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--child")
    parser.add_argument("--database", type=Path)
    parser.add_argument("--interval-s", type=float, default=0.5)
    parser.add_argument("--idle-s", type=float, default=30.0)
    parser.add_argument("--writes", type=int, default=20)
    args = parser.parse_args()
    if args.child:
        child(args.child, args.database, args.interval_s, args.idle_s)
        return
    runs = [
        measure("stat", 0.5, args.idle_s, args.writes),
        measure("stat", 0.25, args.idle_s, args.writes),
        measure("data_version", 0.5, args.idle_s, args.writes),
        measure("inotify", 0.0, args.idle_s, args.writes),
    ]
    print(json.dumps({"cpu": cpu(), "runs": runs}, indent=2))


if __name__ == "__main__":
    main()
