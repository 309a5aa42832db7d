"""The status page's last hour and the recall page's recent turns, over real HTTP against the real app.

What a user would notice: a status page that shows no latency after turns ran, or old minutes that never
leave; a backlog chart that cannot say whether it drains; a recall page that shows only the last turn, or
shows the wrong turn's trace when an earlier one is chosen. The per-minute record is checked with an injected
clock (minutes roll over, an hour later they are gone) without waiting for the wall clock.
"""

from __future__ import annotations

import html
import re
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from openclaw_lossless.observe.activity import MAX_KEPT_RECALLS, RECALLS_PER_AGENT, Activity
from openclaw_lossless.observe.last_hour import BacklogWindow, step_of, step_value
from openclaw_lossless.observe.metrics import Metrics
from openclaw_lossless.recall.assemble import AssembleResult
from openclaw_lossless.sidecar import Sidecar
from tests.conversation import QUESTION, commit_body, conversation
from tests.helpers import HashEmbedder, LiveSidecar, live_sidecar, make_settings
from tests.test_ui import browser, log_in


class Clock:
    """A wall clock the test moves by hand."""

    def __init__(self, now: float = 1_800_000_000.0) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now


@pytest.fixture
def client(sidecar: LiveSidecar) -> Iterator[httpx.Client]:
    with browser(sidecar) as c:
        log_in(c, sidecar)
        yield c


def minute_rows(page: str, table_id: str) -> list[list[str]]:
    """The cells of each row of a minutes table on the page."""
    found = re.search(rf'<table id="{table_id}">(.*?)</table>', page, re.DOTALL)
    assert found, table_id
    body = found.group(1).split("<tbody>")[1]
    return [re.findall(r"<td>([^<]*)</td>", row) for row in body.split("</tr>") if "<td>" in row]


def test_minutes_roll_over_and_drop_out_after_an_hour() -> None:
    clock = Clock()
    metrics = Metrics(clock=clock)
    metrics.observe("assemble", 0.004)
    metrics.observe("assemble", 0.004)
    clock.now += 60
    metrics.observe("assemble", 0.020)
    minutes = metrics.last_hour()["assemble"]
    assert len(minutes) == 60
    assert [m.count for m in minutes[-2:]] == [2, 1]
    assert minutes[-1].start - minutes[-2].start == 60
    assert sum(m.count for m in minutes) == 3
    clock.now += 58 * 60  # the first minute is now the oldest of the hour
    assert metrics.last_hour()["assemble"][0].count == 2
    clock.now += 60  # and now it is older than an hour
    assert sum(m.count for m in metrics.last_hour()["assemble"]) == 1
    clock.now += 3600 - 60  # the slot of the second minute again, an hour on: it starts empty
    metrics.observe("assemble", 0.004)
    assert [m.count for m in metrics.last_hour()["assemble"] if m.count] == [1]
    assert metrics.latency()["assemble"].count == 4  # /stats still counts every call since the start


def test_a_minutes_percentiles_are_within_ten_percent() -> None:
    clock = Clock()
    metrics = Metrics(clock=clock)
    for _ in range(90):
        metrics.observe("commit-turn", 0.002)
    for _ in range(10):
        metrics.observe("commit-turn", 0.200)
    minute = metrics.last_hour()["commit-turn"][-1]
    assert minute.count == 100
    assert minute.p50_ms is not None and minute.p95_ms is not None
    assert abs(minute.p50_ms - 2.0) / 2.0 < 0.1
    assert abs(minute.p95_ms - 200.0) / 200.0 < 0.1
    assert metrics.last_hour()["search"][-1].p95_ms is None  # no call: no percentile, not 0
    for ms in (0.0, float("nan"), float("inf"), 1e12, 0.26, 5.0, 16_000.0):
        assert 0 <= step_of(ms) < 66
    for ms in (0.3, 1.0, 7.0, 90.0, 1500.0):
        assert abs(step_value(step_of(ms)) - ms) / ms < 0.1


def test_the_backlog_window_gives_the_drain_rate_between_samples() -> None:
    clock = Clock()
    window = BacklogWindow(clock)
    assert window.due()
    window.sample(100, 0)
    assert not window.due()
    clock.now += 120
    window.sample(40, 60)  # 60 embedded in two minutes
    minutes = window.minutes()
    assert [(m.backlog, m.drain_per_s) for m in minutes[-3:]] == [(100, None), (None, None), (40, 0.5)]
    assert window.due() is False
    clock.now += 60
    assert window.due()
    clock.now += 3600
    assert all(m.backlog is None for m in window.minutes())


def test_the_status_page_says_when_nothing_ran_in_the_last_hour(client: httpx.Client) -> None:
    page = client.get("/ui")
    assert page.status_code == 200
    assert 'id="latency-none"' in page.text
    assert "No assemble, commit-turn or search in the last hour." in page.text
    assert 'id="chart-latency-' not in page.text
    assert "style=" not in page.text  # the charts keep to the page's policy: no inline style


def test_the_status_page_charts_the_last_hours_calls(sidecar: LiveSidecar, client: httpx.Client) -> None:
    for turn in conversation(3):
        assert sidecar.post("commit-turn", commit_body(turn)).status_code == 200
    body = {"sessionId": "s-main", "sessionKey": "agent:main:main", "prompt": "zebra", "messages": []}
    for _ in range(2):
        assert sidecar.post("assemble", body | {"tokenBudget": 4000}).status_code == 200
    page = client.get("/ui").text
    assert 'id="latency-none"' not in page
    commits = minute_rows(page, "latency-commit-turn-minutes")
    assembles = minute_rows(page, "latency-assemble-minutes")
    calls = {name: sum(int(row[1]) for row in rows) for name, rows in (("commit", commits), ("assemble", assembles))}
    assert calls == {"commit": 3, "assemble": 2}  # the minute the page was read in (or the one before it)
    assert all(float(row[2]) <= float(row[3]) for row in commits)  # p50 <= p95
    chart = re.search(r'<svg class="chart" id="chart-latency-commit-turn".*?</svg>', page, re.DOTALL)
    assert chart
    assert 'role="img"' in chart.group(0)
    assert "<title" in chart.group(0) and "3 calls in" in chart.group(0)  # the text alternative says it too
    assert len(re.findall(r'<circle class="chart-dot series-p95"', chart.group(0))) == len(commits)
    assert 'id="chart-latency-search"' not in page
    assert "No call in the last hour: search." in page


def test_the_status_page_shows_the_backlog_over_the_hour(sidecar: LiveSidecar, client: httpx.Client) -> None:
    for turn in conversation(2):
        assert sidecar.post("commit-turn", commit_body(turn)).status_code == 200
    sidecar.wait_for_backlog()
    page = client.get("/ui").text
    rows = minute_rows(page, "backlog-minutes")
    assert rows and rows[0][1] == "0"  # the newest sample: drained
    assert re.search(r'<svg class="chart" id="chart-backlog"', page)
    assert re.search(r'<p id="backlog-trend">(Empty|Drained)', page)


def test_the_worker_samples_the_backlog_when_nobody_reads_the_status(tmp_path: Path) -> None:
    """The chart has a point for each minute the sidecar ran, not only for the minutes someone looked."""
    sidecar = Sidecar(make_settings(tmp_path / "state"), provider=HashEmbedder())
    try:
        recall = sidecar.settings.recall
        for n, turn in enumerate(conversation(2)):
            sidecar.ingest.commit_turn(
                f"t-{n}", "s-main", "agent:main:main", turn.messages, heartbeat=False, recall=recall
            )
        deadline = time.monotonic() + 30
        while (sampled := sidecar.metrics.backlog.minutes()[-1].backlog) is None:  # by the worker alone
            assert time.monotonic() < deadline, "the worker never sampled the backlog"
            time.sleep(0.05)
        assert 0 <= sampled <= 4  # before, during or after embedding the two turns' four messages
    finally:
        sidecar.close()


def assemble(sidecar: LiveSidecar, session: str, prompt: str) -> dict[str, Any]:
    body = {"sessionId": session, "sessionKey": f"agent:main:{session}", "prompt": prompt, "messages": []}
    answer = sidecar.post("assemble", body | {"tokenBudget": 8000})
    assert answer.status_code == 200
    result: dict[str, Any] = answer.json()
    return result


def block_of(page: str) -> str:
    found = re.search(r'<pre id="block"><code>(.*?)</code></pre>', page, re.DOTALL)
    assert found, "no Recalled Context block on the page"
    return html.unescape(found.group(1))


def kept_rows(page: str) -> set[int]:
    rows = re.findall(
        r'<tr class="candidate">\s*<td><a href="/ui/messages/(\d+)">msg:\d+</a></td>\s*<td>(\w+)</td>', page
    )
    return {int(message) for message, decision in rows if decision == "kept"}


@pytest.fixture
def narrow(tmp_path: Path) -> Iterator[tuple[LiveSidecar, httpx.Client]]:
    """A sidecar whose recall budget holds a few lines of its 24 turns, so each prompt recalls its own."""
    with live_sidecar(make_settings(tmp_path / "state", recall_token_budget=300), HashEmbedder()) as server:
        for turn in conversation(24):
            assert server.post("commit-turn", commit_body(turn)).status_code == 200
        server.wait_for_backlog()
        with browser(server) as c:
            log_in(c, server)
            yield server, c


def test_the_recall_page_lists_recent_turns_and_shows_an_earlier_ones_trace(
    narrow: tuple[LiveSidecar, httpx.Client],
) -> None:
    sidecar, client = narrow
    first = assemble(sidecar, "s-a", QUESTION)
    assemble(sidecar, "s-b", "Where are we with invoice rounding in the billing service?")
    final = assemble(sidecar, "s-c", "What about desk booking and parking permits for the office move?")
    last = client.get("/ui/recall", params={"agent": "main"})
    assert last.status_code == 200
    turns = re.findall(
        r'<tr class="turn">\s*<td><a href="([^"]+)"[^>]*>(\d+)</a></td>\s*<td>[^<]*</td><td>([^<]*)<', last.text
    )
    assert [session for _, _, session in turns] == ["s-c", "s-b", "s-a"]  # newest first, each with its session
    earliest_link = turns[-1][0].replace("&amp;", "&")
    earlier = client.get(earliest_link)
    assert earlier.status_code == 200
    assert block_of(earlier.text) == first["systemPromptAddition"]  # that turn's block, not the last one's
    assert block_of(last.text) == final["systemPromptAddition"] != first["systemPromptAddition"]
    assert kept_rows(earlier.text) == {i["id"] for i in first["recalled"] if i.get("neighbourOf") is None}
    assert kept_rows(earlier.text) != kept_rows(last.text)
    assert 'aria-current="true">' + turns[-1][1] in earlier.text
    unknown = client.get("/ui/recall", params={"agent": "main", "turn": "999999"})
    assert unknown.status_code == 404
    assert "no turn 999999 kept" in unknown.text
    assert client.get("/ui/recall", params={"agent": "main", "turn": "x"}).status_code == 422
    api = sidecar.client.get("/v1/agents/main/last-recall").json()["recall"]  # the API still answers the last
    assert api["sessionId"] == "s-c" and "turn" not in api


def test_each_agent_keeps_its_last_turns_within_the_bounds() -> None:
    activity = Activity()
    for n in range(RECALLS_PER_AGENT + 5):
        activity.assembled("main", f"s-{n}", AssembleResult(0, 0, n, f"block {n}"), float(n))
    kept = activity.recalls("main")
    assert len(kept) == RECALLS_PER_AGENT
    assert [r.turn for r in kept[:2]] == [RECALLS_PER_AGENT + 5, RECALLS_PER_AGENT + 4]  # newest first
    assert activity.agent("main")[2] is kept[0]
    agents = MAX_KEPT_RECALLS // RECALLS_PER_AGENT + 3  # more than the total allows at 20 each
    for n in range(agents * RECALLS_PER_AGENT):
        activity.assembled(f"agent-{n % agents}", "s", AssembleResult(0, 0, 0, ""), 1000.0 + n)
    per_agent = [len(activity.recalls(f"agent-{a}")) for a in range(agents)] + [len(activity.recalls("main"))]
    assert sum(per_agent) <= MAX_KEPT_RECALLS
    assert min(per_agent) >= 1  # every agent keeps its last: what /last-recall answers
