"""What an operator meets: a foreign program on the sidecar's port, ``doctor`` on the real state, ``/lossless``.

Each scenario takes the ``Run`` and returns its evidence; an exception is recorded as the scenario's error.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import threading
import uuid
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

from tests.e2e import fake_model
from tests.e2e.gateway import DEGRADED_LINE, FACT_PROBE, MAIN_KEY, JsonObj, Run
from tests.e2e.loopback import free_port, wait_until
from tests.e2e.transcripts import converged, plain_text

HELD_LINE = "is held by another program"
COMMAND_MESSAGES = ("/lossless", "/lossless why", "/lossless search staging database password")


class ForeignServer:
    """A plain HTTP server (not ours) on the sidecar's port: it logs every request and answers HTML errors."""

    def __init__(self, port: int) -> None:
        self.requests: list[JsonObj] = []
        log = self.requests

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, format: str, *args: Any) -> None:
                return

            def record(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                body = self.rfile.read(length) if length else b""
                log.append(
                    {
                        "method": self.command,
                        "path": self.path,
                        "headers": sorted(self.headers.keys()),
                        "authorization": "Authorization" in self.headers,
                        "bodyBytes": len(body),
                    }
                )

            def do_GET(self) -> None:
                self.record()
                self.send_error(404, "File not found")

            def do_POST(self) -> None:
                self.record()
                self.send_error(501, "Unsupported method ('POST')")

        self.server = ThreadingHTTPServer(("127.0.0.1", port), Handler)
        self.server.daemon_threads = True
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


def stop_plugin_sidecar(run: Run) -> JsonObj:
    """Between gateways: the gateway stops; the sidecar its plugin started (still up) is stopped too."""
    run.stop_gateway()
    pid = run.kill_sidecar()
    return {"stoppedPid": pid, "portFree": wait_until(lambda: run.sidecar_pid() == 0, timeout=10)}


def scenario_foreign_port(run: Run) -> JsonObj:
    """No sidecar, a foreign HTTP server on its port: it gets no hook and no token; turns complete; a clear log.

    The gateway restarts with autoStart off (so the foreign program is the only thing on the port); it stays so
    for the by-hand outages that follow.
    """
    stopped = stop_plugin_sidecar(run)
    foreign = ForeignServer(run.sidecar_port)
    try:
        mark = len(run.gateway_log_text())
        run.restart_gateway(autoStart=False)
        turns = [run.turn("Is anyone home on that port?").view()]
        wait_until(lambda: bool(run.log_lines_since(mark, HELD_LINE)), timeout=10)
    finally:
        foreign.close()
    return {
        "stopped": stopped,
        "foreignPort": run.sidecar_port,
        "foreignPid": os.getpid(),
        "foreignRequests": foreign.requests,
        "turns": turns,
        "heldLines": run.log_lines_since(mark, HELD_LINE),
        "losslessLines": run.log_lines_since(mark, "[lossless]"),
        "degradedLines": run.log_lines_since(mark, DEGRADED_LINE),
    }


# -- doctor --------------------------------------------------------------------------------------------------


def doctor_json(run: Run, state: Path) -> JsonObj:
    """``openclaw-lossless doctor --json`` against the OpenClaw state dir ``state`` and this run's store."""
    env = {**run.env, "OPENCLAW_STATE_DIR": str(state), "OPENCLAW_CONFIG_PATH": str(state / "openclaw.json")}
    cli = str(run.venv_bin / "openclaw-lossless")
    command = [cli, "doctor", "--json", "--openclaw-state", str(state), "--state-dir", str(run.state_dir)]
    done = subprocess.run(command, env=env, capture_output=True, text=True, timeout=180, check=False)
    try:
        parsed: Any = json.loads(done.stdout)
    except json.JSONDecodeError:
        parsed = None
    tails = {"stdoutTail": done.stdout[-1500:], "stderrTail": done.stderr[-1500:]}
    return {"rc": done.returncode, "result": parsed, **tails}


def misconfigured(run: Run, name: str, change: Any, *, json5: bool = False) -> Path:
    """A copy of the real OpenClaw state dir whose config has one change; everything else links to the real one."""
    real = run.home / ".openclaw"
    case = run.workdir / "doctor-cases" / name
    shutil.rmtree(case, ignore_errors=True)
    case.mkdir(parents=True)
    for entry in real.iterdir():
        if entry.name != "openclaw.json":
            (case / entry.name).symlink_to(entry)
    config = json.loads((real / "openclaw.json").read_text())
    change(config)
    text = json.dumps(config, indent=2)
    if json5:  # the way people write it: a comment, unquoted keys would do too, and a trailing comma
        text = "// edited by hand\n" + text[:-2] + ",\n}"
    (case / "openclaw.json").write_text(text)
    return case


def lossless_entry(config: JsonObj) -> JsonObj:
    entry: JsonObj = config["plugins"]["entries"]["lossless"]
    return entry


def scenario_doctor(run: Run) -> JsonObj:
    """``doctor`` on the state the real gateway wrote: as it is, then with each misconfiguration a user makes.

    The wrong port is paired with autoStart off: with it on, nothing on that port is fine (the plugin starts its
    sidecar there), and doctor says so as a note. "As it is" means at rest: the host writes a turn's messages
    to its transcript as the turn runs and hands them to the engine when it ends, so a turn still running (the
    parent's follow-up to a subagent's announcement) is a gap until then. The run waits for every host message
    to be stored (the audit's verdict, at most a minute) before asking doctor; a message never stored still
    fails, by doctor's finding."""
    wrong_port = free_port()
    bare, wrong_url = f"127.0.0.1:{run.sidecar_port}", f"http://127.0.0.1:{wrong_port}"
    cases: dict[str, Any] = {
        "slotLegacy": lambda c: c["plugins"]["slots"].__setitem__("contextEngine", "legacy"),
        "entryDisabled": lambda c: lossless_entry(c).__setitem__("enabled", False),
        "urlNoScheme": lambda c: lossless_entry(c)["config"].__setitem__("sidecarUrl", bare),
        "urlWrongPort": lambda c: lossless_entry(c)["config"].update(sidecarUrl=wrong_url, autoStart=False),
    }
    with run.timed("doctorAtRest"):
        at_rest = run.sidecar_mode == "stub" or wait_until(lambda: converged(run.audit()), timeout=60, interval=2)
    result: JsonObj = {"atRest": at_rest, "healthy": doctor_json(run, run.home / ".openclaw")}
    result |= {"wrongPort": wrong_port, "bareUrl": bare}
    for name, change in cases.items():
        result[name] = doctor_json(run, misconfigured(run, name, change, json5=name == "slotLegacy"))
    return result


def doctor_now(run: Run, label: str) -> JsonObj:
    """``doctor`` on the real state as it is at this moment (used during and after an outage)."""
    return {"label": label, **doctor_json(run, run.home / ".openclaw")}


# -- /lossless -----------------------------------------------------------------------------------------------


def last_user_text(request: JsonObj) -> str:
    """The text of the last user message a person wrote in a logged model request (not host-injected context)."""
    users = [m["text"] for m in request["messages"] if m["role"] == "user"]
    real = [text for text in users if not any(marker in text for marker in fake_model.INTERNAL_MARKERS)]
    return str(real[-1]) if real else ""


def chat_send(run: Run, message: str) -> JsonObj:
    """``message`` sent as the Control UI sends it (``chat.send``), and the session's last messages once the
    answer to it is there (or after a minute)."""
    run.new_requests()
    params = {"sessionKey": MAIN_KEY, "message": message, "idempotencyKey": str(uuid.uuid4())}
    last: list[JsonObj] = []

    def answered() -> bool:
        history = run.gateway_call("chat.history", {"sessionKey": MAIN_KEY, "limit": 4})
        rows = history.get("messages") if isinstance(history, dict) else None
        last[:] = [{"role": m.get("role"), "text": plain_text(m)} for m in rows or [] if isinstance(m, dict)]
        typed = [i for i, m in enumerate(last) if m["role"] == "user" and m["text"] == message]
        return bool(typed) and any(m["role"] == "assistant" for m in last[typed[-1] + 1 :])

    try:
        sent = run.gateway_call("chat.send", params)
        wait_until(answered, timeout=60, interval=1)
    except RuntimeError as error:
        return {"message": message, "error": repr(error), "modelRequests": []}
    # A model request for the command has it as its last user message; others (the host's own heartbeat runs,
    # which may fall in the same seconds and carry the command in their history) are kept apart.
    requests = run.new_requests()
    mine = [r for r in requests if message in last_user_text(r)]
    others = [r["reply"]["kind"] for r in requests if r not in mine]
    kinds = [r["reply"]["kind"] for r in mine]
    return {"message": message, "sent": sent, "last": last, "modelRequests": kinds, "otherModelRequests": others}


def scenario_chat_command(run: Run) -> JsonObj:
    """``/lossless``, ``/lossless why`` and ``/lossless search`` typed into the chat as the Control UI sends them
    (``chat.send``; the gateway's ``agent`` method, behind ``openclaw agent``, does not run plugin commands and
    hands the text to the model) answer without the model: the model requests made meanwhile are recorded."""
    return {"answers": [chat_send(run, message) for message in COMMAND_MESSAGES], "searchProbe": FACT_PROBE}
