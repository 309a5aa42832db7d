"""The benchmarks' shared parts (benchmarks/harness.py, the LoCoMo data and scoring) say what their figures say.

Every p95 in the results and the README goes through ``harness.percentile``; every LoCoMo any-hit and all-hit
through ``locomo_scoring``. These pin both on inputs small enough to check by hand.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from benchmarks.harness import SidecarProcess, percentile
from benchmarks.locomo_data import load_conversations, spread
from benchmarks.locomo_replay import Outcome
from benchmarks.locomo_scoring import Record, rates, summarise

SAMPLE = Path(__file__).resolve().parents[1] / "benchmarks" / "fixtures" / "locomo-format-sample.json"


def test_a_percentile_is_a_measured_value_unless_interpolation_is_asked_for() -> None:
    times = [float(n) for n in range(1, 21)]  # 1..20
    assert percentile(times, 50) == 10.0
    assert percentile(times, 95) == 19.0  # the 19th of 20, not 19.05
    assert percentile(list(reversed(times)), 99) == 20.0
    assert percentile([], 95) == 0.0
    for q in (50, 95, 99):
        assert percentile(times, q, interpolate=True) == pytest.approx(float(np.percentile(times, q)))
    assert percentile(times, 95, interpolate=True) != percentile(times, 95)


def test_a_benchmark_sidecar_measures_the_defaults_not_the_callers_settings(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("LOSSLESS_RECALL_TIME_BOOST", "0.9")
    state = tmp_path / "state"
    benchmark = SidecarProcess(state, env={"LOSSLESS_SYNCHRONOUS": "NORMAL"}, clean_env=True)
    test = SidecarProcess(state)
    assert "LOSSLESS_RECALL_TIME_BOOST" not in benchmark.env
    assert test.env["LOSSLESS_RECALL_TIME_BOOST"] == "0.9"
    assert benchmark.env["LOSSLESS_SYNCHRONOUS"] == "NORMAL"
    for server in (benchmark, test):  # never the user's own OpenClaw transcripts
        assert server.env["LOSSLESS_OPENCLAW_STATE"] == str(tmp_path / "openclaw-state")
        assert server.env["LOSSLESS_STATE_DIR"] == str(state)
        assert server.url == f"http://127.0.0.1:{server.port}"


def test_locomo_questions_are_scored_on_their_evidence_turns() -> None:
    [conversation] = load_conversations(SAMPLE)
    assert conversation.skipped["adversarial"] == 1
    assert len(conversation.questions) == 8
    assert [q.index for q in spread(conversation.questions, 3)] == [0, 2, 5]
    multi_hop = next(q for q in conversation.questions if q.evidence == {"D2:2", "D2:4"})
    dia = {1: "D2:2", 2: "D2:4", 3: "D1:1"}
    one = Record(multi_hop, {"m": Outcome(ranked=[3, 1, 2], block=[1, 3], tokens=10)}, dia)
    both = Record(multi_hop, {"m": Outcome(ranked=[1, 2], block=[1, 2], tokens=12)}, dia)
    neither = Record(multi_hop, {"m": Outcome(ranked=[3], block=[3], tokens=5)}, dia)
    figures = rates([one, both, neither], "m", audited=False)
    assert (figures["n"], figures["any"], figures["all"]) == (3, round(2 / 3, 4), round(1 / 3, 4))
    assert (figures["any@5"], figures["all@5"]) == (round(2 / 3, 4), round(2 / 3, 4))
    assert summarise([one], "m", audited=False)["byCategory"]["multi-hop"]["all"] == 0.0
