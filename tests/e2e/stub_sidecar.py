#!/usr/bin/env python3
"""A stand-in for the openclaw-lossless sidecar (stdlib only), for developing the plugin shim.

It speaks the sidecar's HTTP contract (plugin-manifest.json: token auth, one POST per hook, /healthz,
/v1/identity, /stats, /v1/sessions/{id}/messages) with an in-memory store, and appends every request it receives to
``<state-dir>/stub-requests.jsonl`` so the exact wire payloads of the shim can be inspected.

Same command line as the real one: ``stub_sidecar.py serve --host 127.0.0.1 --port P --state-dir DIR``.
The e2e harness uses it when ``LOSSLESS_E2E_SIDECAR=stub``.
"""

from __future__ import annotations

import argparse
import hashlib
import hmac
import json
import os
import re
import secrets
import socket
import socketserver
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlparse

JsonObj = dict[str, Any]
AGENT_KEY = re.compile(r"^agent:([A-Za-z0-9][A-Za-z0-9_.\-]{0,127}):")


def agent_of(session_key: Any) -> str:
    match = AGENT_KEY.match(session_key) if isinstance(session_key, str) else None
    return match.group(1) if match else "main"


def iso(epoch_s: float | None) -> str | None:
    if epoch_s is None:
        return None
    return time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(epoch_s)) + f".{int(epoch_s * 1000) % 1000:03d}Z"


class Store:
    """Just enough state to answer like the real sidecar: turns by key, messages by session."""

    def __init__(self, log_path: Path) -> None:
        self.lock = threading.Lock()
        self.log_path = log_path
        self.turns: dict[str, int] = {}
        self.sessions: dict[str, JsonObj] = {}
        self.messages: list[JsonObj] = []
        self.compactions: list[JsonObj] = []
        self.links: list[JsonObj] = []
        self.calls: dict[str, int] = {}
        self.last_commit: dict[str, float] = {}
        self.last_recall: dict[str, JsonObj] = {}

    def record(self, method: str, path: str, body: Any) -> None:
        with self.lock, self.log_path.open("a", encoding="utf-8") as handle:
            handle.write(json.dumps({"time": time.time(), "method": method, "path": path, "body": body}) + "\n")

    def session(self, session_id: str, session_key: str | None) -> JsonObj:
        entry = self.sessions.setdefault(session_id, {"sessionId": session_id, "sessionKey": session_key})
        if session_key and not entry.get("sessionKey"):
            entry["sessionKey"] = session_key
        return entry

    def add(self, session_id: str, session_key: str | None, messages: list[Any]) -> int:
        entry = self.session(session_id, session_key)
        for message in messages:
            self.messages.append(
                {
                    "id": len(self.messages) + 1,
                    "sessionId": session_id,
                    "agentId": agent_of(entry.get("sessionKey")),
                    "message": message,
                    "createdAt": time.time(),
                }
            )
        return len(messages)

    def agent_status(self, agent_id: str) -> tuple[int, JsonObj]:
        """GET /v1/agents/{id}/status, as the sidecar answers it (no embedder, no catch-up)."""
        sessions = [s for s in self.sessions.values() if agent_of(s.get("sessionKey")) == agent_id]
        recall = self.last_recall.get(agent_id)
        if not sessions and recall is None:
            return 404, {"error": {"code": "not_found", "message": f"no agent {agent_id!r} in the store"}}
        summary = None if recall is None else {k: v for k, v in recall.items() if k not in ("block", "trace")}
        return 200, {
            "agentId": agent_id,
            "version": "stub",
            "messages": sum(1 for m in self.messages if m["agentId"] == agent_id),
            "sessions": len(sessions),
            "lastCommitAt": iso(self.last_commit.get(agent_id)),
            "lastAssembleAt": None if recall is None else recall["at"],
            "lastRecall": summary,
            "backlog": 0,
            "embedder": {"active": None, "model": None, "ready": False, "reason": "stub: keyword matching only"},
            "catchUp": None,
        }

    def search(self, query: str, scope: str, k: int) -> list[JsonObj]:
        """Messages sharing a word of 5+ letters with the query, newest first, in an 'agent:<id>' or 'all' scope."""
        words = {w.lower().strip(".,?!") for w in query.split() if len(w) > 4}
        agent = scope.removeprefix("agent:") if scope.startswith("agent:") else None
        hits = [
            m
            for m in reversed(self.messages)
            if (agent is None or m["agentId"] == agent)
            and words & {w.lower().strip(".,?!") for w in text_of(m["message"]).split()}
        ]
        return [
            {
                "id": m["id"],
                "citation": f"msg:{m['id']}",
                "role": m["message"].get("role"),
                "createdAt": m["createdAt"],
                "sessionId": m["sessionId"],
                "agentId": m["agentId"],
                "text": text_of(m["message"]),
                "score": 1.0,
            }
            for m in hits[:k]
        ]


def text_of(message: Any) -> str:
    if not isinstance(message, dict):
        return ""
    content = message.get("content")
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "\n".join(str(b.get("text", "")) for b in content if isinstance(b, dict) and b.get("type") == "text")
    return str(message.get("summary") or "")


def handle_hook(store: Store, hook: str, body: JsonObj) -> tuple[int, JsonObj]:
    session_id = str(body.get("sessionId") or "")
    session_key = body.get("sessionKey")
    with store.lock:
        store.calls[hook] = store.calls.get(hook, 0) + 1
        if hook == "bootstrap":
            store.session(session_id, session_key)
            return 200, {"bootstrapped": True, "importedMessages": 0, "reason": "stub"}
        if hook == "assemble":
            descriptors = body.get("descriptors") or []
            prompt = str(body.get("prompt") or "")
            words = {w.lower().strip(".,?!") for w in prompt.split() if len(w) > 4}
            hits = [
                m for m in store.messages if words & {w.lower().strip(".,?!") for w in text_of(m["message"]).split()}
            ][:5]
            lines = [f"[stub | {m['message'].get('role')}]: {text_of(m['message'])[:200]}" for m in hits]
            addition = "## Recalled Context\n" + ("\n".join(lines) if lines else "(nothing recalled)")
            tokens = sum(int(d.get("tokens") or 0) for d in descriptors)
            store.last_recall[agent_of(session_key)] = {
                "at": iso(time.time()),
                "sessionId": session_id,
                "lines": len(hits),
                "hits": len(hits),
                "neighbours": 0,
                "estimatedTokens": tokens,
                "recallSkipped": None,
                "block": addition,
                "recalled": [{"id": m["id"], "citation": f"msg:{m['id']}"} for m in hits],
                "windowTokens": tokens,
                "lanes": ["keyword"],
                "decisions": {"kept": len(hits)} if hits else {},
                "trace": [
                    {"message_id": m["id"], "citation": f"msg:{m['id']}", "decision": "kept", "lanes": ["keyword"]}
                    for m in hits
                ],
            }
            return 200, {"windowStart": 0, "estimatedTokens": tokens, "systemPromptAddition": addition}
        if hook == "commit-turn":
            key = str(body.get("advancementKey") or "")
            if key in store.turns:
                return 200, {"status": "duplicate", "stored": 0}
            stored = store.add(session_id, session_key, list(body.get("messages") or []))
            store.turns[key] = stored
            store.last_commit[agent_of(store.session(session_id, session_key).get("sessionKey"))] = time.time()
            return 200, {"status": "committed", "stored": stored}
        if hook == "ingest":
            return 200, {"ingested": store.add(session_id, session_key, [body.get("message")]) == 1}
        if hook in ("ingest-batch", "after-turn"):
            return 200, {"ingestedCount": store.add(session_id, session_key, list(body.get("messages") or []))}
        if hook == "compact":
            store.compactions.append(body)
            return 200, {"recorded": True}
        if hook == "subagent-spawn":
            store.links.append(dict(body))
            return 200, {"spawnId": len(store.links)}
        if hook == "subagent-spawn/rollback":
            return 200, {"rolledBack": True}
        if hook == "subagent-ended":
            return 200, end_subagent(store, str(body.get("childSessionKey") or ""))
    return 404, {"error": {"code": "not_found", "message": f"no hook {hook}"}}


def end_subagent(store: Store, child_key: str) -> JsonObj:
    """Copy the child's last assistant answer into its parent's session, as the real sidecar does."""
    link = next((entry for entry in reversed(store.links) if entry.get("childSessionKey") == child_key), None)
    if link is None:
        return {"ended": False, "outcomesCopied": 0}
    by_key = {s.get("sessionKey"): sid for sid, s in store.sessions.items()}
    child_id, parent_id = by_key.get(child_key), by_key.get(link.get("parentSessionKey"))
    answers = [m for m in store.messages if m["sessionId"] == child_id and m["message"].get("role") == "assistant"]
    if parent_id is None or not answers:
        return {"ended": True, "outcomesCopied": 0}
    outcome = {"role": "assistant", "content": f"[subagent result] {text_of(answers[-1]['message'])}"}
    store.add(parent_id, link.get("parentSessionKey"), [outcome])
    return {"ended": True, "outcomesCopied": 1}


def make_handler(store: Store, token: str) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, format: str, *args: Any) -> None:
            return

        def reply(self, status: int, payload: JsonObj) -> None:
            data = json.dumps(payload).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def authorized(self) -> bool:
            if self.headers.get("Authorization") == f"Bearer {token}":
                return True
            self.reply(401, {"error": {"code": "unauthorized", "message": "missing or wrong bearer token"}})
            return False

        def do_GET(self) -> None:
            url = urlparse(self.path)
            if url.path == "/healthz":
                self.reply(200, {"status": "ok", "pid": os.getpid(), "stub": True})
                return
            if url.path == "/v1/identity":  # public, as the real one: proves the token without sending it
                challenge = parse_qs(url.query).get("challenge", [""])[0]
                if not re.fullmatch(r"[0-9a-fA-F]{32,128}", challenge):
                    self.reply(422, {"error": {"code": "invalid_request", "message": "challenge: 32 to 128 hex"}})
                    return
                message = f"openclaw-lossless identity v1\n{challenge}".encode()
                proof = hmac.new(token.encode(), message, hashlib.sha256).hexdigest()
                self.reply(200, {"service": "openclaw-lossless", "version": "stub", "pid": os.getpid(), "proof": proof})
                return
            if not self.authorized():
                return
            if url.path == "/stats":
                with store.lock:
                    self.reply(
                        200,
                        {
                            "messages": len(store.messages),
                            "sessions": len(store.sessions),
                            "turns": len(store.turns),
                            "compactions": len(store.compactions),
                            "subagents": len(store.links),
                            "stub": True,
                            "latency": {hook: {"count": n} for hook, n in store.calls.items()},
                        },
                    )
                return
            parts = url.path.strip("/").split("/")
            if len(parts) == 4 and parts[:2] == ["v1", "agents"] and parts[3] in ("status", "last-recall"):
                with store.lock:
                    status, answer = store.agent_status(parts[2])
                    if status == 200 and parts[3] == "last-recall":
                        answer = {"agentId": parts[2], "recall": store.last_recall.get(parts[2])}
                self.reply(status, answer)
                return
            if url.path == "/v1/search":
                query = parse_qs(url.query)
                with store.lock:
                    q, scope = query.get("q", [""])[0], query.get("scope", ["all"])[0]
                    hits = store.search(q, scope, int(query.get("k", ["10"])[0]))
                self.reply(200, {"hits": hits})
                return
            if len(parts) == 4 and parts[:2] == ["v1", "sessions"] and parts[3] == "messages":
                last = int(parse_qs(url.query).get("last", ["50"])[0])
                with store.lock:
                    rows = [m for m in store.messages if m["sessionId"] == parts[2]][-last:]
                    session = store.sessions.get(parts[2])
                if session is None:
                    self.reply(404, {"error": {"code": "not_found", "message": "no such session"}})
                else:
                    self.reply(200, {**session, "messages": rows})
                return
            self.reply(404, {"error": {"code": "not_found", "message": url.path}})

        def do_POST(self) -> None:
            length = int(self.headers.get("Content-Length") or 0)
            raw = self.rfile.read(length) if length else b""
            url = urlparse(self.path)
            try:
                body = json.loads(raw or b"{}")
            except json.JSONDecodeError:
                self.reply(422, {"error": {"code": "invalid_request", "message": "body is not JSON"}})
                return
            store.record("POST", url.path, body)
            if not self.authorized():
                return
            if not url.path.startswith("/v1/hooks/"):
                self.reply(404, {"error": {"code": "not_found", "message": url.path}})
                return
            status, payload = handle_hook(store, url.path.removeprefix("/v1/hooks/"), body)
            self.reply(status, payload)

    return Handler


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    sub = parser.add_subparsers(dest="command", required=True)
    serve = sub.add_parser("serve")
    serve.add_argument("--host", default="127.0.0.1")
    serve.add_argument("--port", type=int, default=8377)
    serve.add_argument("--state-dir", required=True)
    serve.add_argument("--watch", action="store_true")  # accepted like the real one; the stub watches nothing
    args = parser.parse_args()
    state = Path(args.state_dir)
    state.mkdir(parents=True, exist_ok=True)
    token_path = state / "token"
    if not token_path.exists():
        token_path.write_text(secrets.token_urlsafe(32))
        token_path.chmod(0o600)
    token = token_path.read_text().strip()
    handler = make_handler(Store(state / "stub-requests.jsonl"), token)
    server = ThreadingHTTPServer((args.host, args.port), handler)
    server.daemon_threads = True
    unix = serve_unix_socket(state / "sidecar.sock", handler)
    print(f"stub sidecar listening on {args.host}:{args.port}{f' and {unix}' if unix else ''}", flush=True)
    server.serve_forever()


class UnixHTTPServer(socketserver.ThreadingMixIn, socketserver.UnixStreamServer):
    daemon_threads = True


def serve_unix_socket(path: Path, handler: type[BaseHTTPRequestHandler]) -> Path | None:
    """Also listen on <state-dir>/sidecar.sock (0600), as ``serve`` does where the path fits; replace a stale one."""
    if not hasattr(socket, "AF_UNIX") or len(os.fsencode(path)) > 107:
        return None
    if path.exists():
        probe = socket.socket(socket.AF_UNIX)
        try:
            probe.connect(str(path))
            return None  # another live sidecar: leave it
        except OSError:
            path.unlink()
        finally:
            probe.close()
    server = UnixHTTPServer(str(path), handler)
    path.chmod(0o600)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return path


if __name__ == "__main__":
    main()
