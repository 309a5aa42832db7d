"""A fake OpenAI-compatible chat model for the end-to-end test (stdlib only).

It streams SSE chat completions on 127.0.0.1 and appends every request it receives (system prompt,
messages, tool names) to a JSONL file: that file is what the test asserts on, since it shows exactly
what the real OpenClaw host sent the model.

Replies:
- the host's compaction prompt (it asks for a structured summary with exact headings) -> a summary that
  carries every ``## `` heading the prompt asked for, in order, and no fact of the conversation;
- a user message holding SPAWN_TRIGGER, when the ``sessions_spawn`` tool is offered and was not called
  yet in this turn -> a ``sessions_spawn`` tool call whose task holds CHILD_TRIGGER;
- a request whose last user message holds CHILD_TRIGGER (the child run) -> CHILD_OUTCOME;
- a user message holding STATUS_TRIGGER, when the host's ``session_status`` tool is offered and was not called
  yet in this turn -> a ``session_status`` tool call (a tool of the host's own, which works with no sidecar);
  once its result is in the request -> a short acknowledgement (kind ``checked``);
- a user message holding SEARCH_TRIGGER, when the plugin's ``lossless_search`` tool is offered and was not
  called yet in this turn -> a ``lossless_search`` tool call for SEARCH_QUERY; once its result is in the
  request -> a short acknowledgement (kind ``searched``);
- anything else -> a short, fact-free acknowledgement (so a fact lives only in the user message that
  stated it).

Run: ``python fake_model.py --port P --log requests.jsonl`` (prints ``ready <port>`` when listening).
"""

from __future__ import annotations

import argparse
import json
import re
import sys
import threading
import time
import uuid
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

SPAWN_TRIGGER = "DELEGATE-TO-CHILD"
CHILD_TRIGGER = "CHILD-TASK"
SEARCH_TRIGGER = "LOOK-IT-UP"
STATUS_TRIGGER = "CHECK-THE-STATUS"
SEARCH_QUERY = "staging database password rotation"
CHILD_OUTCOME = "Child report: the lighthouse inventory lists exactly seven brass lanterns in the east shed."
COMPACTION_MARKERS = (
    "structured context checkpoint summary",
    "these exact section headings",
    "incorporate into the existing summary",
    "PREFIX of a turn that was too large",
)
_HEADING = re.compile(r"^(##+ [^\[\n]+?)\s*$", re.MULTILINE)

JsonObj = dict[str, Any]


def message_text(message: JsonObj) -> str:
    """The plain text of one chat message (string content or text parts)."""
    content = message.get("content")
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "\n".join(
            str(part.get("text", "")) for part in content if isinstance(part, dict) and part.get("type") == "text"
        )
    return ""


def system_prompt(messages: list[JsonObj]) -> str:
    return "\n\n".join(message_text(m) for m in messages if m.get("role") in ("system", "developer"))


def is_compaction_request(messages: list[JsonObj]) -> bool:
    text = "\n".join(message_text(m) for m in messages[-3:])
    return any(marker in text for marker in COMPACTION_MARKERS)


def compaction_summary(messages: list[JsonObj]) -> str:
    """A canned summary holding every heading the prompt asks for, in the prompt's order."""
    prompt = "\n".join(message_text(m) for m in messages if m.get("role") in ("user", "system", "developer"))
    # The instruction text is the tail of the request; headings quoted there are the required ones.
    headings: list[str] = []
    for match in _HEADING.finditer(prompt):
        heading = match.group(1).strip()
        if heading not in headings:
            headings.append(heading)
    if not headings:
        headings = ["## Goal", "## Progress", "## Next Steps"]
    return "\n\n".join(f"{heading}\n- (none)" for heading in headings)


INTERNAL_MARKERS = (
    "<<<BEGIN_OPENCLAW_INTERNAL_CONTEXT>>>",
    "[[OPENCLAW_INTERNAL_CONTEXT_BEGIN]]",
    "[Inter-session message]",
)


def is_real_user(message: JsonObj) -> bool:
    """A user message a person wrote (the host also sends internal-context and inter-session ones)."""
    return message.get("role") == "user" and not any(marker in message_text(message) for marker in INTERNAL_MARKERS)


def tool_names(body: JsonObj) -> list[str]:
    names = []
    for tool in body.get("tools") or []:
        function = tool.get("function") if isinstance(tool, dict) else None
        if isinstance(function, dict) and isinstance(function.get("name"), str):
            names.append(function["name"])
    return names


def choose_reply(body: JsonObj) -> JsonObj:
    """Decide the reply: {"kind", "text"} or {"kind", "tool_call": {"name", "arguments"}}."""
    messages: list[JsonObj] = body.get("messages") or []
    if is_compaction_request(messages):
        return {"kind": "compaction", "text": compaction_summary(messages)}
    users = [m for m in messages if m.get("role") == "user"]
    # A child run starts from the task the parent gave it (the host wraps it in a [Subagent Context] message).
    if users and CHILD_TRIGGER in message_text(users[0]):
        return {"kind": "child", "text": CHILD_OUTCOME}
    real = [i for i, m in enumerate(messages) if is_real_user(m)]
    last_real = real[-1] if real else -1
    if last_real >= 0 and SPAWN_TRIGGER in message_text(messages[last_real]):
        called = any(m.get("role") == "assistant" and m.get("tool_calls") for m in messages[last_real:])
        if not called and "sessions_spawn" in tool_names(body):
            task = f"{CHILD_TRIGGER}: count the brass lanterns in the lighthouse east shed and report back."
            return {"kind": "spawn", "tool_call": {"name": "sessions_spawn", "arguments": {"task": task}}}
        return {"kind": "spawned", "text": "I delegated that to a child session; its report will follow."}
    if last_real >= 0 and STATUS_TRIGGER in message_text(messages[last_real]):
        called = any(m.get("role") == "assistant" and m.get("tool_calls") for m in messages[last_real:])
        if not called and "session_status" in tool_names(body):
            return {"kind": "status", "tool_call": {"name": "session_status", "arguments": {}}}
        return {"kind": "checked", "text": "I checked the session status."}
    if last_real >= 0 and SEARCH_TRIGGER in message_text(messages[last_real]):
        called = any(m.get("role") == "assistant" and m.get("tool_calls") for m in messages[last_real:])
        if not called and "lossless_search" in tool_names(body):
            arguments = {"query": SEARCH_QUERY, "k": 3}
            return {"kind": "search", "tool_call": {"name": "lossless_search", "arguments": arguments}}
        return {"kind": "searched", "text": "I looked it up in the lossless history."}
    return {"kind": "ack", "text": f"Acknowledged ({len(messages)} messages seen)."}


class FakeModel:
    def __init__(self, log_path: str) -> None:
        self.log_path = log_path
        self.lock = threading.Lock()
        self.count = 0

    def record(self, body: JsonObj, reply: JsonObj) -> None:
        messages = body.get("messages") or []
        entry = {
            "seq": self.count,
            "time": time.time(),
            "model": body.get("model"),
            "stream": body.get("stream"),
            "system": system_prompt(messages),
            "messages": [
                {
                    "role": m.get("role"),
                    "text": message_text(m),
                    **({"tool_calls": m["tool_calls"]} if m.get("tool_calls") else {}),
                    **({"tool_call_id": m["tool_call_id"]} if m.get("tool_call_id") else {}),
                }
                for m in messages
            ],
            "tools": tool_names(body),
            # The output budget the host asked for: a host squeezed by an over-long prompt asks for 1.
            "maxTokens": body.get("max_completion_tokens") or body.get("max_tokens"),
            "reply": reply,
        }
        with self.lock:
            self.count += 1
            with open(self.log_path, "a", encoding="utf-8") as handle:
                handle.write(json.dumps(entry) + "\n")


def sse_chunks(model: str, reply: JsonObj) -> list[JsonObj]:
    """The chat.completion.chunk events of one streamed reply."""
    base = {
        "id": f"chatcmpl-{uuid.uuid4().hex[:12]}",
        "object": "chat.completion.chunk",
        "created": int(time.time()),
        "model": model,
    }
    chunks: list[JsonObj] = [{**base, "choices": [{"index": 0, "delta": {"role": "assistant", "content": ""}}]}]
    if "tool_call" in reply:
        call = reply["tool_call"]
        delta = {
            "tool_calls": [
                {
                    "index": 0,
                    "id": f"call_{uuid.uuid4().hex[:10]}",
                    "type": "function",
                    "function": {"name": call["name"], "arguments": json.dumps(call["arguments"])},
                }
            ]
        }
        chunks.append({**base, "choices": [{"index": 0, "delta": delta}]})
        finish = "tool_calls"
    else:
        text: str = reply["text"]
        # A few pieces, so the host's stream assembly is exercised.
        step = max(1, len(text) // 3)
        for start in range(0, len(text), step):
            chunks.append({**base, "choices": [{"index": 0, "delta": {"content": text[start : start + step]}}]})
        finish = "stop"
    chunks.append(
        {
            **base,
            "choices": [{"index": 0, "delta": {}, "finish_reason": finish}],
            "usage": {"prompt_tokens": 100, "completion_tokens": 20, "total_tokens": 120},
        }
    )
    return chunks


def make_handler(state: FakeModel) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, format: str, *args: Any) -> None:
            return

        def send_json(self, status: int, payload: JsonObj) -> None:
            data = json.dumps(payload).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def do_GET(self) -> None:
            if self.path.rstrip("/").endswith("/models"):
                self.send_json(200, {"object": "list", "data": [{"id": "fake-model", "object": "model"}]})
            elif self.path == "/healthz":
                self.send_json(200, {"status": "ok", "requests": state.count})
            else:
                self.send_json(404, {"error": {"message": "not found"}})

        def do_POST(self) -> None:
            length = int(self.headers.get("Content-Length") or 0)
            raw = self.rfile.read(length) if length else b"{}"
            try:
                body = json.loads(raw or b"{}")
            except json.JSONDecodeError:
                self.send_json(400, {"error": {"message": "bad json"}})
                return
            if not self.path.rstrip("/").endswith("/chat/completions"):
                self.send_json(404, {"error": {"message": f"unsupported path {self.path}"}})
                return
            reply = choose_reply(body)
            state.record(body, reply)
            REPLIES.wait(timeout=120)  # held by hold_replies(): the request is logged, its answer waits
            model = str(body.get("model") or "fake-model")
            if body.get("stream"):
                self.stream(model, reply)
            else:
                self.send_json(200, self.completion(model, reply))

        def stream(self, model: str, reply: JsonObj) -> None:
            self.send_response(200)
            self.send_header("Content-Type", "text/event-stream")
            self.send_header("Cache-Control", "no-cache")
            self.send_header("Connection", "close")
            self.end_headers()
            for chunk in sse_chunks(model, reply):
                self.wfile.write(f"data: {json.dumps(chunk)}\n\n".encode())
                self.wfile.flush()
            self.wfile.write(b"data: [DONE]\n\n")
            self.wfile.flush()
            self.close_connection = True

        def completion(self, model: str, reply: JsonObj) -> JsonObj:
            message: JsonObj = {"role": "assistant", "content": reply.get("text")}
            finish = "stop"
            if "tool_call" in reply:
                call = reply["tool_call"]
                message = {
                    "role": "assistant",
                    "content": None,
                    "tool_calls": [
                        {
                            "id": f"call_{uuid.uuid4().hex[:10]}",
                            "type": "function",
                            "function": {"name": call["name"], "arguments": json.dumps(call["arguments"])},
                        }
                    ],
                }
                finish = "tool_calls"
            return {
                "id": f"chatcmpl-{uuid.uuid4().hex[:12]}",
                "object": "chat.completion",
                "created": int(time.time()),
                "model": model,
                "choices": [{"index": 0, "message": message, "finish_reason": finish}],
                "usage": {"prompt_tokens": 100, "completion_tokens": 20, "total_tokens": 120},
            }

    return Handler


# Set: replies flow. Cleared by hold_replies(): each request is logged at once and answered only on release,
# so a driver in the same process can act between the host's model call and its commit of the turn.
REPLIES = threading.Event()
REPLIES.set()


def hold_replies() -> None:
    REPLIES.clear()


def release_replies() -> None:
    REPLIES.set()


def serve(port: int, log_path: str) -> ThreadingHTTPServer:
    """Start the server in a daemon thread; returns it (its port is server_address[1])."""
    server = ThreadingHTTPServer(("127.0.0.1", port), make_handler(FakeModel(log_path)))
    server.daemon_threads = True
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--port", type=int, default=0)
    parser.add_argument("--log", required=True)
    args = parser.parse_args()
    server = serve(args.port, args.log)
    print(f"ready {server.server_address[1]}", flush=True)
    try:
        threading.Event().wait()
    except KeyboardInterrupt:
        server.shutdown()
    sys.exit(0)


if __name__ == "__main__":
    main()
