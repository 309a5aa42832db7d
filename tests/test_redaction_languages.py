"""Passwords, PINs and codes given in a sentence are redacted in nine languages, and ordinary sentences of
those languages, many about passwords without giving one, stay as they are; through the real app, a Chinese,
Japanese, Korean, Russian or Arabic password never reaches the database, the keyword index or the embedder."""

from __future__ import annotations

from pathlib import Path

import pytest

from openclaw_lossless.capture.redact import build_redactor
from tests.helpers import HashEmbedder, live_sidecar, make_settings, stored_bytes
from tests.redaction_corpus import Case, present
from tests.redaction_languages import LANGUAGES, ORDINARY, secret_cases

REDACTOR = build_redactor()
CASES = secret_cases()


def test_every_language_has_its_sentences() -> None:
    assert {case.shape.split(":")[0] for case in CASES} == set(LANGUAGES) == set(ORDINARY)
    assert all(len(texts) >= 19 for texts in ORDINARY.values())


@pytest.mark.parametrize("case", CASES, ids=[case.shape for case in CASES])
def test_a_secret_given_in_a_sentence_is_gone(case: Case) -> None:
    out = REDACTOR.redact(case.text)
    assert not present(case.secret, out), out
    assert "[REDACTED:" in out
    assert REDACTOR.redact(out) == out


@pytest.mark.parametrize("language", sorted(ORDINARY))
def test_ordinary_sentences_stay_as_they_are(language: str) -> None:
    changed = [(text, out) for text in ORDINARY[language] if (out := REDACTOR.redact(text)) != text]
    assert changed == []


@pytest.mark.parametrize(
    ("text", "kept"),
    [
        ("パスワードはKiwi#2291です", "パスワードは[REDACTED:password]です"),  # the particle stays
        ("비밀번호는 Kiwi#2291입니다.", "비밀번호는 [REDACTED:password]입니다."),
        ("wifi密码是Kiwi#2291。", "wifi密码是[REDACTED:password]。"),
        ("пароль от вайфая Kiwi#2291, если что", "пароль от вайфая [REDACTED:password], если что"),
    ],
)
def test_the_words_around_the_secret_stay_readable(text: str, kept: str) -> None:
    assert REDACTOR.redact(text) == kept


def test_no_secret_of_any_language_reaches_the_database_index_or_embedder(tmp_path: Path) -> None:
    embedder = HashEmbedder()
    settings = make_settings(tmp_path / "state")
    messages = [
        {"role": "user", "content": case.text, "timestamp": 1_767_225_600_000 + n} for n, case in enumerate(CASES)
    ]
    with live_sidecar(settings, embedder) as sidecar:
        body = {"sessionId": "s-lang", "sessionKey": "agent:main:lang", "advancementKey": "t1"}
        assert sidecar.post("commit-turn", body | {"messages": messages}).json()["stored"] == len(CASES)
        sidecar.wait_for_backlog()
        raw = stored_bytes(settings).decode("latin-1")
        listed = sidecar.client.get("/v1/sessions/s-lang/messages", params={"last": 1000}).text
    leaked = [case.shape for case in CASES if present(case.secret, raw) or present(case.secret, listed)]
    assert not leaked
    assert not [case.shape for case in CASES if present(case.secret, "\n".join(embedder.texts))]
    assert "[REDACTED:password]" in listed
