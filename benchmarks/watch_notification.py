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
import threading
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
        from openclaw_lossless.transcripts.catchup import fingerprint

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
            hits: list[float] = []
            reader = threading.Thread(target=_collect, args=(proc.stdout, hits), daemon=True)
            reader.start()
            latencies = []
            rng = random.Random(7)
            for seq in range(writes):
                time.sleep(interval_s + rng.uniform(0.2, 0.8))
                wrote = time.time()  # just before the commit (an autocommit INSERT: well under a millisecond)
                host.execute("INSERT INTO transcript_events VALUES ('s', ?, ?)", (seq, json.dumps({"n": seq})))
                deadline = time.monotonic() + 5
                while not (after := [hit for hit in hits if hit >= wrote]) and time.monotonic() < deadline:
                    time.sleep(0.005)
                latencies.append(min(after) - wrote)
                time.sleep(0.3)  # let the change's trailing events (WAL, checkpoint) pass before the next
                hits.clear()
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


def _collect(stream: Any, hits: list[float]) -> None:
    for line in stream:
        parts = line.split()
        if parts and parts[0] == "hit":
            hits.append(float(parts[1]))


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--child")
    parser.add_argument("--database", type=Path)
    parser.add_argument("--interval-s", type=float, default=0.5)
    parser.add_argument("--idle-s", type=float, default=30.0)
    parser.add_argument("--writes", type=int, default=20)
    parser.add_argument("--serve", action="store_true", help="measure the real serve --watch instead")
    args = parser.parse_args()
    if args.serve:
        print(json.dumps({"cpu": cpu(), "runs": [serve_figures(3, args.idle_s, args.writes)]}, indent=2))
        return
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


def serve_figures(agents: int, idle_s: float, turns: int) -> dict[str, Any]:
    """The real ``openclaw-lossless serve --watch``: its CPU at idle over ``idle_s`` with ``agents`` agents of
    history, then the time from a turn's commit in the host's database to its messages being stored."""
    import os
    import socket

    import httpx

    with tempfile.TemporaryDirectory() as tmp:
        openclaw, state = Path(tmp) / "openclaw", Path(tmp) / "store"
        hosts = [_agent_database(openclaw, f"agent{n}") for n in range(agents)]
        for n, host in enumerate(hosts):
            for turn in range(50):
                _turn(host, f"s{n}", f"history turn {turn}")
        with socket.socket() as probe:
            probe.bind(("127.0.0.1", 0))
            port = probe.getsockname()[1]
        env = {**os.environ, "OPENCLAW_STATE_DIR": str(openclaw), "LOSSLESS_EMBEDDING_PROVIDER": "none"}
        args = ["openclaw-lossless", "serve", "--watch", "--port", str(port), "--state-dir", str(state),
                "--log-level", "warning"]  # fmt: skip
        proc = subprocess.Popen(args, env=env)
        try:
            client = httpx.Client(base_url=f"http://127.0.0.1:{port}", timeout=10)
            token = _wait_for_token(state)
            client.headers["Authorization"] = f"Bearer {token}"
            _wait_stored(client, "s0", 100, time.time() + 60)
            time.sleep(3)  # the first looks' settle re-reads are over
            cpu0, wall0 = _cpu_seconds(proc.pid), time.monotonic()
            time.sleep(idle_s)
            idle_cpu = (_cpu_seconds(proc.pid) - cpu0) / (time.monotonic() - wall0)
            latencies = []
            rng = random.Random(7)
            for turn in range(turns):
                time.sleep(rng.uniform(0.5, 1.5))
                wrote = time.time()
                _turn(hosts[0], "s0", f"new turn {turn}")
                latencies.append(_wait_stored(client, "s0", 102 + 2 * turn, wrote + 30) - wrote)
        finally:
            proc.terminate()
            proc.wait(30)
            for host in hosts:
                host.close()
    ordered = sorted(latencies)
    return {
        "mechanism": "serve --watch (stat, 0.5 s)",
        "agents": agents,
        "idleCpuPercent": round(100 * idle_cpu, 3),
        "turnStoredMsP50": round(1000 * statistics.median(ordered), 1),
        "turnStoredMsMax": round(1000 * ordered[-1], 1),
        "turns": turns,
    }


def _agent_database(openclaw: Path, agent: str) -> sqlite3.Connection:
    path = openclaw / "agents" / agent / "agent" / "openclaw-agent.sqlite"
    path.parent.mkdir(parents=True)
    conn = sqlite3.connect(path, isolation_level=None)
    conn.execute("PRAGMA journal_mode = WAL")
    conn.execute("CREATE TABLE transcript_events (session_id TEXT, seq INTEGER, event_json TEXT, created_at INTEGER,"
                 " PRIMARY KEY (session_id, seq))")  # fmt: skip
    conn.execute("CREATE TABLE session_windows (session_id TEXT PRIMARY KEY, session_key TEXT, created_at INTEGER)")
    return conn


def _turn(conn: sqlite3.Connection, session: str, text: str) -> None:
    """One turn as the host commits it: the user's entry and the reply's, one transaction."""
    now = int(time.time() * 1000)
    conn.execute("INSERT OR IGNORE INTO session_windows VALUES (?, ?, ?)", (session, f"agent:x:{session}", now))
    seq = conn.execute("SELECT coalesce(max(seq), 0) FROM transcript_events WHERE session_id = ?", (session,))
    first = int(seq.fetchone()[0]) + 1
    rows = []
    for offset, role in enumerate(("user", "assistant")):
        message = {"role": role, "content": [{"type": "text", "text": f"{role}: {text}"}], "timestamp": now + offset}
        entry = {"type": "message", "id": f"{session}-{first + offset}", "message": message}
        rows.append((session, first + offset, json.dumps(entry), now))
    conn.execute("BEGIN")
    conn.executemany("INSERT INTO transcript_events VALUES (?, ?, ?, ?)", rows)
    conn.execute("COMMIT")


def _wait_for_token(state: Path) -> str:
    deadline = time.time() + 60
    while time.time() < deadline:
        try:
            return (state / "token").read_text().strip()
        except OSError:
            time.sleep(0.1)
    raise RuntimeError("the sidecar wrote no token")


def _wait_stored(client: Any, session: str, count: int, deadline: float) -> float:
    """When the session held ``count`` messages (epoch s)."""
    while time.time() < deadline:
        try:
            response = client.get(f"/v1/sessions/{session}/messages", params={"last": 1000})
            if response.status_code == 200 and len(response.json()["messages"]) >= count:
                return time.time()
        except _transport_errors():
            pass
        time.sleep(0.01)
    raise RuntimeError(f"session {session} never held {count} messages")


def _transport_errors() -> tuple[type[Exception], ...]:
    import httpx

    return (httpx.TransportError,)


def _cpu_seconds(pid: int) -> float:
    import os

    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


if __name__ == "__main__":
    main()
