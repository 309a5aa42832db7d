"""Capture: what of a host message becomes searchable, when it happened, how notable it is, and which secrets
never reach the index, the vectors, the search results or a recalled block."""

from __future__ import annotations

import hashlib
import json
import re
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from openclaw_lossless.capture import importance
from openclaw_lossless.capture.records import CaptureOptions, capture, message_time
from openclaw_lossless.capture.redact import build_redactor
from openclaw_lossless.capture.text import (
    INDEX_TOOL_RESULT_CHARS,
    descriptor_tokens,
    searchable_text,
    window_key,
)
from openclaw_lossless.errors import BadRequest
from tests.helpers import (
    HashEmbedder,
    LiveSidecar,
    assert_error,
    db_fingerprint,
    keyword_rows,
    live_sidecar,
    make_settings,
    stored_bytes,
)

NEW_YEAR_2026 = 1767225600.0  # 2026-01-01T00:00:00Z
OPTIONS = CaptureOptions(redactor=build_redactor())


# -- searchable text ------------------------------------------------------------------------------------------


def test_string_content_is_the_text() -> None:
    assert searchable_text({"role": "user", "content": "where is the staging database?"}) == (
        "where is the staging database?"
    )


def test_text_blocks_are_joined_in_order() -> None:
    message = {
        "role": "assistant",
        "content": [{"type": "text", "text": "First, the plan."}, {"type": "text", "text": "Then, the steps."}],
    }
    assert searchable_text(message) == "First, the plan.\nThen, the steps."


def test_tool_call_is_rendered_with_its_name_and_arguments() -> None:
    message = {
        "role": "assistant",
        "content": [
            {"type": "text", "text": "Let me look."},
            {"type": "toolCall", "id": "call_1", "name": "read_file", "arguments": {"path": "/etc/hosts", "lines": 20}},
        ],
    }
    text = searchable_text(message)
    assert text.startswith("Let me look.\n")
    assert "[tool call read_file]" in text
    arguments = json.loads(text.split("[tool call read_file] ", 1)[1])
    assert arguments == {"path": "/etc/hosts", "lines": 20}


def test_tool_result_is_prefixed_with_the_tool_name() -> None:
    message = {
        "role": "toolResult",
        "toolCallId": "call_1",
        "toolName": "read_file",
        "content": [{"type": "text", "text": "127.0.0.1 localhost"}],
    }
    assert searchable_text(message) == "[tool result read_file] 127.0.0.1 localhost"


def test_long_tool_result_is_truncated_for_the_index() -> None:
    output = "x" * 9990 + "TAIL-MARK!"
    message = {"role": "toolResult", "toolName": "exec", "content": [{"type": "text", "text": output}]}
    text = searchable_text(message)
    assert text.startswith("[tool result exec] xxx")
    assert "TAIL-MARK" not in text
    assert len(text) < INDEX_TOOL_RESULT_CHARS + 100
    assert "truncated" in text


def test_image_becomes_a_placeholder_without_its_data() -> None:
    data = "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNk" * 20
    message = {
        "role": "user",
        "content": [
            {"type": "text", "text": "what is in this screenshot?"},
            {"type": "image", "data": data, "mimeType": "image/png"},
        ],
    }
    text = searchable_text(message)
    assert text == "what is in this screenshot?\n[image image/png]"
    assert "iVBOR" not in text


def test_thinking_is_left_out_by_default_and_kept_when_asked() -> None:
    message = {
        "role": "assistant",
        "content": [
            {"type": "thinking", "thinking": "the user probably means the blue widget"},
            {"type": "text", "text": "Here is the widget."},
        ],
    }
    assert searchable_text(message) == "Here is the widget."
    assert "blue widget" in searchable_text(message, include_thinking=True)
    assert "blue widget" not in capture(message, OPTIONS).text
    with_thinking = CaptureOptions(redactor=build_redactor(), include_thinking=True)
    assert "blue widget" in capture(message, with_thinking).text


def test_tool_result_is_stored_whole_but_indexed_truncated(sidecar: LiveSidecar) -> None:
    output = "".join(f"line {i:05d} of the build log\n" for i in range(400))[:9990] + "BUILD-DONE"
    assert len(output) == 10_000
    tool_result = {
        "role": "toolResult",
        "toolCallId": "call_9",
        "toolName": "exec",
        "content": [{"type": "text", "text": output}],
        "timestamp": 1767225600000,
    }
    body = {"sessionId": "s-build", "sessionKey": "agent:main:build", "advancementKey": "t1", "messages": [tool_result]}
    assert sidecar.post("commit-turn", body).json()["stored"] == 1

    stored = sidecar.client.get("/v1/sessions/s-build/messages").json()["messages"]
    assert len(stored) == 1
    assert stored[0]["original"]["content"][0]["text"] == output
    assert stored[0]["text"].startswith("[tool result exec] line 00000 of the build log")
    assert "BUILD-DONE" not in stored[0]["text"]
    assert len(stored[0]["text"]) < INDEX_TOOL_RESULT_CHARS + 100


# -- timestamps -----------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "timestamp",
    [1767225600000, 1767225600000.0, 1767225600, "2026-01-01T00:00:00Z", "2026-01-01T00:00:00.000Z"],
    ids=["ms-int", "ms-float", "seconds", "iso-z", "iso-z-millis"],
)
def test_timestamp_forms_all_mean_the_same_instant(timestamp: Any) -> None:
    record = capture({"role": "user", "content": "hi there", "timestamp": timestamp}, OPTIONS, now=1.0)
    assert record.created_at == NEW_YEAR_2026


def test_missing_or_unreadable_timestamp_means_now() -> None:
    now = 1_800_000_000.5
    assert capture({"role": "user", "content": "hi"}, OPTIONS, now=now).created_at == now
    assert message_time("next tuesday", now) == now
    assert message_time(True, now) == now
    assert message_time(None, None) > NEW_YEAR_2026 - 365 * 86400


# -- window keys and descriptor tokens -------------------------------------------------------------------------


def test_window_key_is_the_manifest_formula() -> None:
    message: dict[str, Any] = {
        "role": "user",
        "content": [{"type": "text", "text": "a"}, {"type": "text", "text": "b"}],
    }
    message["timestamp"] = 1767225600123
    expected = hashlib.sha256(b"user\n1767225600123\na\nb").hexdigest()
    assert window_key(message) == expected


def test_window_key_is_stable_and_tells_messages_apart() -> None:
    base = {"role": "user", "content": "deploy to staging", "timestamp": 1767225600000}
    assert window_key(base) == window_key(json.loads(json.dumps(base)))
    assert window_key(base) != window_key(base | {"timestamp": 1767225600001})
    assert window_key(base) != window_key(base | {"content": "deploy to production"})
    assert window_key(base) != window_key(base | {"role": "assistant"})


@pytest.mark.parametrize("timestamp", [float("inf"), float("-inf"), float("nan")], ids=["inf", "-inf", "nan"])
def test_non_finite_timestamp_counts_as_absent_in_the_window_key(timestamp: float) -> None:
    message = {"role": "user", "content": "hi"}
    assert window_key(message | {"timestamp": timestamp}) == window_key(message)


def test_huge_timestamp_is_not_an_internal_error(sidecar: LiveSidecar) -> None:
    message = '{"role": "user", "content": "hi", "timestamp": 1e400}'
    raw = f'{{"sessionId": "s-inf", "advancementKey": "t1", "messages": [{message}]}}'
    response = sidecar.client.post("/v1/hooks/commit-turn", content=raw, headers={"content-type": "application/json"})
    assert response.status_code in (200, 422), response.text


def test_descriptor_tokens_count_text_and_tool_arguments() -> None:
    # ASCII letters cost a fifth of a token, punctuation 0.7 (token_estimate.py), rounded up, plus 4.
    assert descriptor_tokens({"role": "user", "content": "x" * 40}) == 12
    assert descriptor_tokens({"role": "user", "content": "x" * 41}) == 13
    call = {"role": "assistant", "content": [{"type": "toolCall", "name": "ls", "arguments": {"path": "/var/log"}}]}
    assert descriptor_tokens(call) == 9 + 4  # '{"path":"/var/log"}': 10 letters (2.0) + 9 punctuation (6.3)
    assert descriptor_tokens({"role": "user", "content": []}) == 4


# -- rejection ------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("message", [42, "hello", None, ["role", "user"]], ids=["int", "str", "null", "list"])
def test_capture_rejects_non_objects(message: Any) -> None:
    with pytest.raises(BadRequest, match="JSON object"):
        capture(message, OPTIONS)


@pytest.mark.parametrize("message", [{"content": "hi"}, {"role": "", "content": "hi"}, {"role": 7, "content": "hi"}])
def test_capture_rejects_a_missing_role(message: dict[str, Any]) -> None:
    with pytest.raises(BadRequest, match="role"):
        capture(message, OPTIONS)


def test_a_bad_message_rejects_its_whole_turn(sidecar: LiveSidecar) -> None:
    good = {"role": "user", "content": "this one is fine"}
    sidecar.post("commit-turn", {"sessionId": "s0", "advancementKey": "t0", "messages": [good]})
    before = db_fingerprint(sidecar.settings)
    body = {"sessionId": "s1", "advancementKey": "t1", "messages": [good, {"content": "no role"}]}
    assert_error(sidecar.post("commit-turn", body), 422, "invalid_request")
    assert_error(sidecar.post("commit-turn", body | {"messages": [good, 42]}), 422, "invalid_request")
    assert db_fingerprint(sidecar.settings) == before


# -- importance -----------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("role", "text"),
    [
        ("user", "Remember that the staging database lives on port 5433."),
        ("user", "We decided to use Postgres instead of MySQL for the billing service."),
        ("assistant", "Decision: we will go with Postgres for billing."),
    ],
)
def test_notable_messages_grade_must_remember(role: str, text: str) -> None:
    grade = importance.grade(role, text)
    assert grade.score >= importance.MUST_REMEMBER
    assert grade.label == "must_remember"


@pytest.mark.parametrize("text", ["ok thanks", "ok", "Thanks!", "got it.", "   "])
def test_acknowledgements_grade_ignore(text: str) -> None:
    assert importance.grade("user", text).label == "ignore"


def test_small_talk_grades_below_a_real_question() -> None:
    question = importance.grade("user", "how do I configure the database connection pool")
    assert importance.grade("user", "ok thanks").score < question.score


def test_importance_shows_in_the_stored_message(sidecar: LiveSidecar) -> None:
    messages = [
        {"role": "user", "content": "Remember that the staging database lives on port 5433.", "timestamp": 1},
        {"role": "user", "content": "ok thanks", "timestamp": 2},
    ]
    sidecar.post("commit-turn", {"sessionId": "s-imp", "advancementKey": "t", "messages": messages})
    stored = sidecar.client.get("/v1/sessions/s-imp/messages").json()["messages"]
    assert [m["importanceLabel"] for m in stored] == ["must_remember", "ignore"]
    assert stored[0]["importance"] > stored[1]["importance"]


@given(role=st.sampled_from(["user", "assistant", "toolResult", "custom", "weird"]), text=st.text(max_size=400))
def test_grade_is_deterministic_and_bounded(role: str, text: str) -> None:
    first = importance.grade(role, text)
    assert first == importance.grade(role, text)
    assert 0.0 <= first.score <= 1.0
    assert first.label == importance.label_for(first.score)


@given(
    words=st.lists(
        st.sampled_from(
            [
                "remember",
                "we decided",
                "I prefer",
                "deadline",
                "password",
                "fixed",
                "2026-01-01",
                "Monday",
                "42",
                "Postgres",
                "actually",
                "note that",
            ]
        ),
        max_size=30,
    )
)
def test_grade_of_many_signals_never_exceeds_one(words: list[str]) -> None:
    assert 0.0 <= importance.grade("user", " ".join(words)).score <= 1.0


# -- redaction ------------------------------------------------------------------------------------------------

CUSTOM_PATTERN = r"ACME-\d{8}"
PEM_BODY = "MIIEowIBAAKCAQEA7xQkq0W2b1X9Yv3ZqM8o0rR4tL6Ua5fH2nD3kP9sJ1vC8eG0"

# (kind, how it appears in a conversation, the secret part that must never survive)
PLANTED: list[tuple[str, str, str]] = [
    ("openai_key", "my key is sk-A1b2C3d4E5f6G7h8I9j0K1l2M3n4O5p6Q7r8S9t0UvWx", "A1b2C3d4E5f6G7h8I9j0K1l2M3n4"),
    ("openai_key", "project key sk-proj-Zq9Xw8Vu7Ts6Rq5Po4Nm3Lk2Ji1Hg0FeDcBa", "Zq9Xw8Vu7Ts6Rq5Po4Nm3Lk2Ji1"),
    ("anthropic_key", "claude: sk-ant-api03-Qw3rTy7uIo9pAs2dFg4hJk6lZx8cVb1nM5", "Qw3rTy7uIo9pAs2dFg4hJk6lZx8"),
    ("github_token", "use ghp_R4nd0mT0k3nV4lu3F0rG1tHubAcc3ss0K", "R4nd0mT0k3nV4lu3F0rG1tHubAcc3ss"),
    (
        "github_token",
        "pat github_pat_11ABCDEFG0123456789_abcdefghijklmnopqrstuvwxyzABCDEFGHIJ",
        "abcdefghijklmnopqrstuvwxyzABCDEFGHIJ",
    ),
    ("gitlab_token", "gitlab glpat-Xy7Zq2Wp9Lm4Nk8Jh3Gf", "Xy7Zq2Wp9Lm4Nk8Jh3Gf"),
    ("aws_access_key", "access key id AKIAIOSFODNN7EXAMPLE in the config", "AKIAIOSFODNN7EXAMPLE"),
    (
        "aws_secret_key",
        "aws_secret_access_key = wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY",
        "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY",
    ),
    ("google_api_key", "maps AIzaSyB7x9K2mQ4vL8nR3tW6yZ1aC5eG0hJ2kM4 works", "SyB7x9K2mQ4vL8nR3tW6yZ1aC5eG0hJ"),
    ("slack_token", "bot token xoxb-123456789012-1234567890123-AbCdEfGhIjKlMnOpQrStUvWx", "AbCdEfGhIjKlMnOpQrStUvWx"),
    (
        "slack_webhook",
        "post to https://hooks.slack.com/services/T0ABCDEF1/B0GHIJKL2/Zz9Yy8Xx7Ww6Vv5Uu4Tt3Ss2",
        "Zz9Yy8Xx7Ww6Vv5Uu4Tt3Ss2",
    ),
    ("stripe_key", "stripe sk_live_51HqLy2CkQ7rT9vWx3Zb8Nm4P", "51HqLy2CkQ7rT9vWx3Zb8Nm4P"),
    ("huggingface_token", "hf token hf_QpWoEiRuTyAlSkDjFhGzMxNcBv1234567890", "QpWoEiRuTyAlSkDjFhGzMxNcBv12345"),
    ("npm_token", "npmrc npm_a1B2c3D4e5F6g7H8i9J0k1L2m3N4o5P6q7R8", "a1B2c3D4e5F6g7H8i9J0k1L2m3N4o5P6q7R8"),
    (
        "sendgrid_key",
        "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",
        "TwL2iGABf9DHoTf-09kqeF8tAmbihYzrnopKc",
    ),
    (
        "jwt",
        "session eyJhbGciOiJIUzI1NiIsInR5cCI6IkpXVCJ9.eyJzdWIiOiIxMjM0NTY3ODkwIn0."
        "dozjgNryP4J3jVmNHl0w5N_XgL0n3I9PlFUP0THsR8U",
        "dozjgNryP4J3jVmNHl0w5N_XgL0n3I9PlFUP0THsR8U",
    ),
    ("bearer_token", "curl -H 'Authorization: Bearer 9f8e7d6c5b4a3928QwErTy1706f5e4d3'", "9f8e7d6c5b4a3928QwErTy1706"),
    ("private_key", f"-----BEGIN RSA PRIVATE KEY-----\n{PEM_BODY}\n-----END RSA PRIVATE KEY-----", PEM_BODY),
    ("url_password", "DATABASE_URL=postgres://admin:Tr0ub4dorXyzzy77@db.internal:5432/app", "Tr0ub4dorXyzzy77"),
    ("secret_assignment", "set password=CorrectHorseBattery9 in the env", "CorrectHorseBattery9"),
    ("secret_assignment", "config api_key: qWeRtYuIoP0987654321zxcv", "qWeRtYuIoP0987654321zxcv"),
    (
        "telegram_token",
        "bot 123456789:AAHdqTcvCH1vGWJxfSeofSAs0K5PALDsawZ via BotFather",
        "HdqTcvCH1vGWJxfSeofSAs0K5PAL",
    ),
    ("twilio_key", "twilio SK0123456789abcdef0123456789abcdef", "0123456789abcdef0123456789abcdef"),
    ("custom", "internal ticket key ACME-48151623 for the vault", "ACME-48151623"),
]
NOT_SECRETS = [
    "the password rotates every Tuesday",
    "keys from OpenAI start with sk- and are long",
    "fixed in commit 3f786850e387550fdab836ed7e6dc881de23001b on main",
    "the api key lives in the vault, ask Dana",
    "she was the bearer of bad news",
    "see https://docs.example.com/guide#section-2 for the token budget",
    "ratio 16:9 at 1920x1080, port 8080",
]


def _redactor() -> Any:
    return build_redactor([CUSTOM_PATTERN])


@pytest.mark.parametrize(("kind", "text", "secret"), PLANTED, ids=[f"{k}-{i}" for i, (k, _, _) in enumerate(PLANTED)])
def test_each_kind_of_secret_is_replaced_by_its_placeholder(kind: str, text: str, secret: str) -> None:
    out = _redactor().redact(text)
    assert secret not in out
    assert f"[REDACTED:{kind}]" in out


def test_redaction_keeps_the_words_around_a_secret() -> None:
    out = _redactor().redact("use ghp_R4nd0mT0k3nV4lu3F0rG1tHubAcc3ss0K for the deploy bot")
    assert out == "use [REDACTED:github_token] for the deploy bot"
    assert (
        _redactor().redact("set password=CorrectHorseBattery9 now") == "set password=[REDACTED:secret_assignment] now"
    )


@pytest.mark.parametrize("text", NOT_SECRETS)
def test_ordinary_text_is_left_alone(text: str) -> None:
    assert _redactor().redact(text) == text


def test_redact_value_keeps_the_shape_of_a_message() -> None:
    message = {"role": "user", "timestamp": 5, "content": [{"type": "text", "text": PLANTED[3][1]}]}
    out = _redactor().redact_value(message)
    assert out == {"role": "user", "timestamp": 5, "content": [{"type": "text", "text": "use [REDACTED:github_token]"}]}


@pytest.mark.parametrize(
    ("text", "secret"),
    [("api_key: dGhpc2lzYXNlY3JldGtleQ==", "dGhpc2lzYXNlY3JldGtleQ"), ("password=hunter2:extra", "hunter2")],
)
def test_assignment_with_separator_in_the_value_leaks_nothing(text: str, secret: str) -> None:
    assert secret not in _redactor().redact(text)


def test_assignment_of_a_typed_key_gives_one_well_formed_placeholder() -> None:
    out = _redactor().redact("api_key=sk-A1b2C3d4E5f6G7h8I9j0K1l2M3n4O5p6Q7r8")
    assert "[REDACTED:[REDACTED" not in out
    assert out.count("[") == out.count("]") == 1


# -- redaction, end to end ------------------------------------------------------------------------------------

CANARY = "quokkapineapple"


def _secret_turn() -> list[dict[str, Any]]:
    lines = "\n".join(text for _, text, _ in PLANTED)
    return [
        {"role": "user", "content": f"{CANARY} here are all my credentials:\n{lines}", "timestamp": 1767225600000},
        {
            "role": "assistant",
            "content": [{"type": "text", "text": f"Noted the {CANARY} credentials."}],
            "timestamp": 1767225601000,
        },
        {
            "role": "toolResult",
            "toolName": "cat_env",
            "content": [{"type": "text", "text": f"{CANARY} env dump\n{lines}"}],
            "timestamp": 1767225602000,
        },
    ]


def _assert_no_secret(text: str) -> None:
    for _, _, secret in PLANTED:
        assert secret not in text, secret


def test_no_secret_reaches_the_database_index_search_or_recall(tmp_path: Path) -> None:
    embedder = HashEmbedder()
    settings = make_settings(tmp_path / "state", redact_patterns=[CUSTOM_PATTERN])
    with live_sidecar(settings, embedder) as sidecar:
        body = {"sessionId": "s-keys", "sessionKey": "agent:main:keys", "advancementKey": "t1"}
        assert sidecar.post("commit-turn", body | {"messages": _secret_turn()}).json()["stored"] == 3
        sidecar.wait_for_backlog()
        raw = stored_bytes(settings)
        assert CANARY.encode() in raw  # the turn is there ...
        for _, _, secret in PLANTED:  # ... and none of its secrets, in any case
            assert secret.lower().encode() not in raw.lower(), secret

        assert len(keyword_rows(settings, CANARY)) == 3
        for _, _, secret in PLANTED:
            assert keyword_rows(settings, secret) == [], secret

        _assert_no_secret("\n".join(embedder.texts))
        assert any(CANARY in text for text in embedder.texts)

        hits = sidecar.client.get("/v1/search", params={"q": f"{CANARY} credentials", "k": 10}).json()["hits"]
        assert len(hits) == 3
        _assert_no_secret(json.dumps(hits))
        assert "[REDACTED:github_token]" in json.dumps(hits)

        stored = sidecar.client.get("/v1/sessions/s-keys/messages").json()
        _assert_no_secret(json.dumps(stored))

        assembled = sidecar.post(
            "assemble",
            {
                "sessionId": "s-other",
                "sessionKey": "agent:main:other",
                "messages": [{"role": "user", "content": "hello"}],
                "prompt": f"what were the {CANARY} credentials again?",
                "config": {"minSimilarity": 0.0},
            },
        ).json()
        addition = assembled["systemPromptAddition"]
        assert CANARY in addition
        assert len(assembled["recalled"]) == 3
        _assert_no_secret(addition)
        _assert_no_secret(json.dumps(assembled))


def test_secret_in_tool_call_arguments_never_reaches_the_database(sidecar: LiveSidecar) -> None:
    secret = "correct-horse-battery-staple-91"  # noqa: S105
    call = {
        "role": "assistant",
        "content": [{"type": "toolCall", "id": "c1", "name": "db_login", "arguments": {"password": secret}}],
    }
    sidecar.post("commit-turn", {"sessionId": "s-args", "advancementKey": "t1", "messages": [call]})
    stored = sidecar.client.get("/v1/sessions/s-args/messages").json()["messages"]
    assert secret not in stored[0]["text"]
    assert secret not in json.dumps(stored[0]["original"])
    raw = stored_bytes(sidecar.settings)
    assert b"db_login" in raw and secret.encode() not in raw


def test_originals_keep_secrets_only_when_the_operator_says_so(tmp_path: Path) -> None:
    settings = make_settings(tmp_path / "state", redact_originals=False)
    with live_sidecar(settings, HashEmbedder()) as sidecar:
        message = {"role": "user", "content": PLANTED[3][1]}
        sidecar.post("commit-turn", {"sessionId": "s-raw", "advancementKey": "t1", "messages": [message]})
        stored = sidecar.client.get("/v1/sessions/s-raw/messages").json()["messages"][0]
        assert stored["original"]["content"] == PLANTED[3][1]
        assert re.fullmatch(r"use \[REDACTED:github_token\]", stored["text"])
