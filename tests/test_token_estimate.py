"""The token estimate against real tokenizer counts, per script: a recall cap must hold in every language.

The reference counts (``tests/fixtures/token_reference.json``) were made by ``benchmarks/token_reference.py``
with OpenAI's cl100k_base and o200k_base encodings; the estimate aims at cl100k_base, the hungrier of the two.
Characters / 4, the estimate before, counted Chinese, Japanese and Korean at a quarter of the real cost.
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import pytest

from openclaw_lossless.capture.text import descriptor_tokens
from openclaw_lossless.capture.token_estimate import estimate_tokens
from openclaw_lossless.recall import render
from tests.helpers import HashEmbedder, live_sidecar, make_settings

FIXTURE = Path(__file__).parent / "fixtures" / "token_reference.json"
REFERENCE = json.loads(FIXTURE.read_text(encoding="utf-8"))
TEXTS: list[dict[str, Any]] = REFERENCE["texts"]
SCRIPTS = sorted({text["script"] for text in TEXTS})
TOLERANCE = 0.25  # each text's estimate is within 25% of its cl100k_base count


def of_script(script: str) -> list[dict[str, Any]]:
    return [text for text in TEXTS if text["script"] == script]


def test_the_fixture_names_its_tokenizers_and_covers_the_scripts() -> None:
    assert set(REFERENCE["tokenizers"]) == {"cl100k_base", "o200k_base"}
    assert {"english", "code", "digits", "han", "japanese", "hangul", "cyrillic", "arabic", "emoji"} <= set(SCRIPTS)
    assert all(text["tokens"]["cl100k_base"] > 0 for text in TEXTS)


@pytest.mark.parametrize("script", SCRIPTS)
def test_estimate_is_within_tolerance_of_the_real_count(script: str) -> None:
    for text in of_script(script):
        reference = text["tokens"]["cl100k_base"]
        estimate = estimate_tokens(text["text"])
        assert abs(estimate - reference) <= TOLERANCE * reference, (script, estimate, reference, text["text"])


@pytest.mark.parametrize("script", ["han", "japanese", "hangul"])
def test_characters_over_four_was_far_under_for_cjk(script: str) -> None:
    """What the estimate replaced: a quarter of a token a character, a third or less of the real count."""
    for text in of_script(script):
        reference = text["tokens"]["cl100k_base"]
        assert math.ceil(len(text["text"]) / 4) < (1 - TOLERANCE) * reference


@pytest.mark.parametrize("script", SCRIPTS)
def test_estimate_never_falls_far_under_the_frugal_tokenizer(script: str) -> None:
    """o200k_base spends fewer tokens on most scripts; the estimate stays at or near its count, never far under."""
    for text in of_script(script):
        assert estimate_tokens(text["text"]) >= 0.9 * text["tokens"]["o200k_base"], text["text"]


def test_window_and_recall_count_a_chinese_message_at_its_real_cost() -> None:
    """The descriptor the window is cut by, and a recalled line, cost at least most of what the model spends."""
    text = max(of_script("han"), key=lambda t: len(t["text"]))
    reference = text["tokens"]["cl100k_base"]
    message = {"role": "user", "content": [{"type": "text", "text": text["text"]}]}
    assert descriptor_tokens(message) >= (1 - TOLERANCE) * reference + 4
    assert render.estimate_tokens(text["text"]) >= (1 - TOLERANCE) * reference


def test_parts_are_summed_before_rounding() -> None:
    """Text, tool-call arguments and a summary add up in hundredths: three short parts are not three tokens."""
    message = {
        "role": "assistant",
        "content": [{"type": "text", "text": "ok"}, {"type": "toolCall", "name": "t", "arguments": {"a": 1}}],
    }
    # "ok" = 2 light (0.4), '{"a":1}' = 1 light + 6 dense (4.4): 4.8 tokens -> 5, plus 4
    assert descriptor_tokens(message) == 9


def test_empty_and_astral_texts() -> None:
    assert estimate_tokens("") == 0
    assert estimate_tokens("😀") == estimate_tokens("\U00020000") == 3  # a high surrogate carries 2.5
    assert estimate_tokens("a\ud800") == 3  # a lone surrogate (possible in JSON) counts like the JS side does


def test_a_recall_block_of_cjk_text_stays_within_its_token_cap(tmp_path: Path) -> None:
    """What the user sees: Chinese, Japanese and Korean messages recalled under a 200-token cap cost about 200
    real tokens (cl100k_base), not three to four times that as under characters / 4."""
    texts = of_script("han") + of_script("japanese") + of_script("hangul")
    turns = [
        {
            "advancementKey": f"t{n}",
            "sessionId": "s-cjk",
            "sessionKey": "agent:main:main",
            "messages": [{"role": "user", "content": f"invoice {text['text']}", "timestamp": 1795321223884 + n}],
        }
        for n, text in enumerate(texts)
    ]
    cap = 200
    with live_sidecar(make_settings(tmp_path / "state"), HashEmbedder()) as server:
        for turn in turns:
            assert server.post("commit-turn", turn).json()["status"] == "committed"
        body = {
            "sessionId": "s-other",
            "sessionKey": "agent:main:other",
            "prompt": "invoice",
            "messages": [],
            "tokenBudget": 100_000,
            "config": {"recallTokenBudget": cap, "minSimilarity": 0, "neighbourRadius": 0, "retrievalCount": 50},
        }
        block = server.post("assemble", body).json()["systemPromptAddition"]
    recalled = [text for text in texts if text["text"] in block]
    assert len(recalled) >= 2, block
    # The block's real size: the reference counts of the recalled texts, plus the rest of the block (the frame,
    # dates, roles, citations: ASCII, whose estimate is itself within the tolerance of its real count).
    rest = block
    for text in recalled:
        rest = rest.replace(text["text"], "")
    real = sum(text["tokens"]["cl100k_base"] for text in recalled) + estimate_tokens(rest)
    assert real <= cap * (1 + TOLERANCE), (real, len(recalled))
