"""How each command's answer reads for a person (``--json`` prints the same data as it is).

Used by the CLI, the MCP server and the web UI alike, so it sits below all three (beside the wire models);
kept apart from the command wiring so ``cli/main.py`` says what each command does and this module how it
looks. Each function takes the data the command would print with ``--json``.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

MB = 1024 * 1024


def when(epoch: float) -> str:
    return datetime.fromtimestamp(epoch, UTC).strftime("%Y-%m-%d %H:%M UTC")


def hits(data: dict[str, Any]) -> str:
    if not data["hits"]:
        return "no matches"
    lines = []
    for hit in data["hits"]:
        text = " ".join(hit["text"].split())
        lines.append(
            f"[{hit['citation']}] {when(hit['createdAt'])} {hit['role']} in {hit['sessionId']} "
            f"(score {hit['score']:.3f})\n    {text[:300]}"
        )
    return "\n".join(lines)


def lanes_missed(answer: dict[str, Any]) -> str | None:
    """What a search's answer lacks because a lane it asked for gave nothing (``None``: nothing is missing).

    Said so that no hits is never read as nothing matching when the keyword lane ran out of time (a new
    process's first queries on a large store, a loaded server) or the vector lane could not run. ``skipped``
    says which (``Found``); an answer without it (an older sidecar's) gets no note.
    """
    skipped = answer.get("skipped")
    if skipped == "deadline":  # every lane asked for: both, or the keyword lane of a keyword search
        return (
            "the search ran out of time (LOSSLESS_ASSEMBLE_DEADLINE_MS) before a lane answered: no hits here"
            " does not mean nothing matches; ask again"
        )
    if skipped == "keyword_deadline":
        return (
            "the keyword lane ran out of time (LOSSLESS_ASSEMBLE_DEADLINE_MS) and gave no hits: these are the"
            " vector lane's alone; ask again"
        )
    if skipped == "vector_unavailable":
        return (
            "the vector lane gave nothing (the embedding model is unavailable or did not embed the query in"
            " time): any hits here are keyword matches alone, and none does not mean nothing matches"
        )
    return None


def conversation(data: dict[str, Any], title: str = "Conversation") -> str:
    lines = [f"# {title} {data['sessionId']} (agent {data['agentId']})", ""]
    for message in data["messages"]:
        lines += [
            f"**{message['role']}** — {when(message['createdAt'])} [{message['citation']}]",
            "",
            message["text"],
            "",
        ]
    return "\n".join(lines)


def cited(data: dict[str, Any]) -> str:
    """A citation in its place: the neighbours before and after it, the cited message marked."""
    lines = [f"# {data['message']['citation']} in session {data['sessionId']} (agent {data['agentId']})", ""]
    for message in [*data["before"], data["message"], *data["after"]]:
        mark = " <- cited" if message["id"] == data["message"]["id"] else ""
        lines += [
            f"**{message['role']}** — {when(message['createdAt'])} [{message['citation']}]{mark}",
            "",
            message["text"],
            "",
        ]
    return "\n".join(lines)


def snapshot(data: dict[str, Any]) -> str:
    return conversation(data, f"Snapshot {data['name']} of conversation")


def snapshots(data: dict[str, Any]) -> str:
    rows = []
    for snap in data["snapshots"]:
        kind = " (automatic)" if snap["automatic"] else ""
        rows.append(
            f"{snap['name']}  {snap['sessionId']}  msg:{snap['lastMessageId']}  {when(snap['createdAt'])}{kind}"
        )
    return "\n".join(rows) or "no snapshots"


def counts(data: dict[str, Any]) -> str:
    return ", ".join(f"{k.replace('_', ' ')}: {v}" for k, v in data.items() if not isinstance(v, list | dict))


def forget(data: dict[str, Any]) -> str:
    rows = []
    for item in data["messages"]:
        where = " (archived)" if item["archived"] else ""
        rows.append(
            f"{item['citation']}  {when(item['createdAt'])}  {item['role']}  {item['sessionId']}{where}"
            f"  {item['excerpt']}"
        )
        if item.get("text") is not None:
            rows.append("    " + item["text"].replace("\n", "\n    "))
    verb = "would forget" if data["dryRun"] else "forgot"
    count = data["forgotten"]
    rows.append(f"{verb} {count} message{'' if count == 1 else 's'} ({data['archived']} of them archived)")
    return "\n".join(rows)


def findings(data: dict[str, Any]) -> str:
    """``ok``, ``BAD``, ``skip`` (not checked: nothing to check here), or ``note``: fine, but with something
    worth doing (a large backlog) and how."""
    lines = []
    for f in data["findings"]:
        mark = "BAD " if not f["ok"] else "skip" if f.get("skipped") else "note" if f["fix"] else "ok  "
        lines.append(f"{mark} {f['check']}: {f['detail']}" + (f"\n     fix: {f['fix']}" if f["fix"] else ""))
    return "\n".join(lines)


def rescan(data: dict[str, Any]) -> str:
    verb = "would change" if data["dryRun"] else "changed"
    if not data["changed"]:
        return "nothing to change: everything stored already passes the current redaction rules"
    places = ", ".join(f"{place} {count}" for place, count in sorted(data["places"].items()))
    kinds = ", ".join(f"{kind} {count}" for kind, count in sorted(data["kinds"].items(), key=lambda kv: -kv[1]))
    lines = [f"{verb}: {places}", f"placeholders by kind: {kinds or 'none'}"]
    if not data["dryRun"] and data["requeued"]:
        lines.append(f"{data['requeued']} messages queued to be embedded again from their redacted text")
    if data.get("resumed"):
        lines.append("(continued an interrupted rescan; the counts include its earlier part)")
    return "\n".join(lines)


def pack(data: dict[str, Any]) -> str:
    """The block as the agent would read it, then (with ``--trace``) every candidate's scores and fate."""
    lines = [data["block"] or "nothing relevant found"]
    trace = data.get("trace")
    if trace is not None:
        candidates = trace.get("candidates") or []
        lines += ["", f"trace: {len(candidates)} candidates for {trace.get('query')!r}"]
        lines += [_candidate(c) for c in candidates]
    return "\n".join(lines)


def _candidate(candidate: dict[str, Any]) -> str:
    def part(name: str, *keys: str) -> str:
        value = next((candidate[k] for k in keys if candidate.get(k) is not None), None)
        return f" {name} {value:.3f}" if isinstance(value, int | float) else ""

    lanes = ",".join(candidate.get("lanes") or []) or "-"
    return (
        f"  {candidate.get('citation')}  {candidate.get('decision')}  score {candidate.get('score', 0):.3f}"
        + part("similarity", "similarity")
        + part("cosine", "cosine")
        + part("keyword", "keyword")
        + part("recency", "recency")
        + part("weight", "weight")
        + f"  lanes {lanes}"
    )


def stats(data: dict[str, Any]) -> str:
    """What ``stats`` promises: counts, sizes, backlog, the embedder and latencies, one subject a line."""
    database, archive = data.get("database") or {}, data.get("archive") or {}
    limit = database.get("maxDbSizeMb")
    lines = [
        f"store: {database.get('path')} (version {data.get('version')})",
        f"size: {_mb(database.get('bytes'))} on disk, {_mb(database.get('usedBytes'))} used;"
        f" limit {'none' if not limit else f'{limit} MB'}",
        f"messages: {data['messages']} in {data['sessions']} sessions of {data['agents']} agents;"
        f" {data['turns']} turns, {data['compactions']} compactions ({data['compactionFailures']} failed),"
        f" {data['snapshots']} snapshots, {data['subagents']} subagent links, {data['forgotten']} forgotten",
        f"archive: {archive.get('archivedMessages', 0)} messages in {archive.get('archives', 0)} files",
        f"vectors: {_vectors(data)}; backlog {data['backlog']} to embed",
        "embedder: " + _embedder(data.get("embedder") or {}),
        *_latencies(data.get("latency") or {}),
    ]
    return "\n".join(lines)


def _mb(size: object) -> str:
    return f"{size / MB:.1f} MB" if isinstance(size, int | float) else "unknown"


def _vectors(data: dict[str, Any]) -> str:
    view = data.get("vectorIndex")
    if view is None:
        return "not loaded (the file was opened without an embedder: keyword search only)"
    return f"{data['vectors']}" + ("" if view.get("loaded") else " (index still loading)")


def _embedder(view: dict[str, Any]) -> str:
    if view.get("active"):
        described = f"{view['active']} {view.get('model')}"
        if view.get("variant"):
            described += f" ({view['variant']})"
        if view.get("dimension"):
            described += f", {view['dimension']} dimensions"
        return described + ("" if view.get("ready") else f", not ready: {view.get('reason')}")
    if view.get("configured") == "none":
        return "none: search and recall use keywords only"
    return f"{view.get('configured')} unavailable, keywords only: {view.get('reason')}"


def _latencies(report: dict[str, dict[str, float]]) -> list[str]:
    if not report:
        return ["latency: nothing measured yet (latencies are the running sidecar's, since its start)"]
    lines = ["latency (ms since start):"]
    for op, values in sorted(report.items()):
        lines.append(
            f"  {op}: p50 {values['p50Ms']:.1f}, p95 {values['p95Ms']:.1f}, p99 {values['p99Ms']:.1f}"
            f" ({int(values['count'])} calls)"
        )
    return lines
