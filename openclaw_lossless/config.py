"""Settings: the one place that reads the environment.

``Settings`` is built once (by the CLI or the app factory) and passed down; nothing else reads ``os.environ``.
The six seed settings keep the seed plugin's meaning and defaults; the plugin may override the per-turn ones
per request (``RecallOverrides``), which never changes the process-wide values.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import AliasChoices, BaseModel, ConfigDict, Field, SecretStr, field_validator
from pydantic_settings import BaseSettings, NoDecode, SettingsConfigDict

RecallScope = Literal["agent", "session"]
MIN_TOKEN_CHARS = 16  # an empty or short token would make the bearer check guessable
ProviderName = Literal["local", "openai-compatible", "none"]

DATABASE_URL_SCHEMES = ("postgresql://", "postgres://")


def openclaw_state_dir(env: dict[str, str] | None = None) -> Path:
    """OpenClaw's own state directory, resolved the way OpenClaw resolves it."""
    env = dict(os.environ) if env is None else env
    if env.get("OPENCLAW_STATE_DIR"):
        return Path(env["OPENCLAW_STATE_DIR"])
    home = env.get("OPENCLAW_HOME") or env.get("HOME") or str(Path.home())
    return Path(home) / ".openclaw"


def claude_projects_dir(env: dict[str, str] | None = None) -> Path:
    """Where Claude Code keeps its session transcripts: ``$CLAUDE_CONFIG_DIR/projects``, else ``~/.claude/projects``."""
    env = dict(os.environ) if env is None else env
    base = env.get("CLAUDE_CONFIG_DIR") or str(Path(env.get("HOME") or Path.home()) / ".claude")
    return Path(base) / "projects"


def _default_state_dir() -> Path:
    return openclaw_state_dir() / "plugins" / "lossless"


def _default_model_dir() -> Path:
    cache = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(cache) / "openclaw-lossless" / "models"


class RecallSettings(BaseModel):
    """The knobs of one assembly: the seed's settings that matter per turn, the recall scope, and three knobs
    the LoCoMo benchmark earned (``benchmarks/results/locomo.md``): a recency floor, so months-old facts are
    not buried under the 168 h half-life; neighbours of each hit, because the answer often sits a turn or two
    from the turn whose words match; and a token cap on the recalled block, so those neighbours cost a bounded
    share of the prompt.
    """

    model_config = ConfigDict(frozen=True)

    retrieval_count: int = Field(20, ge=0, le=200)
    window_share: float = Field(0.6, gt=0, le=1)
    recency_decay_hours: float = Field(168.0, gt=0)
    skip_heartbeats: bool = True
    min_similarity: float = Field(0.3, ge=0, le=1)
    recall_scope: RecallScope = "agent"
    recency_floor: float = Field(0.9, ge=0, le=1)
    neighbour_radius: int = Field(2, ge=0, le=10)
    recall_token_budget: int = Field(2000, ge=0)
    recall_duplicate_cosine: float = Field(1.0, ge=0, le=1)  # 1: off (recall/assemble.py, near-duplicates)
    recall_time_boost: float = Field(0.2, ge=0, le=1)  # a match of the question's time: score × (1 + this)
    memory_file_share: float = Field(0.3, ge=0, le=1)  # of the recalled block's room, at most, for memory files


class RecallOverrides(BaseModel):
    """Per-request overrides sent by the plugin from the user's ``plugins.entries.lossless.config``."""

    model_config = ConfigDict(extra="forbid", populate_by_name=True)

    retrieval_count: int | None = Field(None, ge=0, le=200, alias="retrievalCount")
    window_share: float | None = Field(None, gt=0, le=1, alias="windowShare")
    recency_decay_hours: float | None = Field(None, gt=0, alias="recencyDecayHours")
    skip_heartbeats: bool | None = Field(None, alias="skipHeartbeats")
    min_similarity: float | None = Field(None, ge=0, le=1, alias="minSimilarity")
    recall_scope: RecallScope | None = Field(None, alias="recallScope")
    recency_floor: float | None = Field(None, ge=0, le=1, alias="recencyFloor")
    neighbour_radius: int | None = Field(None, ge=0, le=10, alias="neighbourRadius")
    recall_token_budget: int | None = Field(None, ge=0, alias="recallTokenBudget")
    memory_file_share: float | None = Field(None, ge=0, le=1, alias="memoryFileShare")

    def apply(self, base: RecallSettings) -> RecallSettings:
        changes = self.model_dump(exclude_none=True)
        return base.model_copy(update=changes) if changes else base


class Settings(BaseSettings):
    """Process-wide configuration; env vars are ``LOSSLESS_<FIELD>`` unless an alias says otherwise."""

    model_config = SettingsConfigDict(env_prefix="LOSSLESS_", extra="ignore", populate_by_name=True)

    host: str = "127.0.0.1"
    port: int = Field(8377, ge=0, le=65535)
    allow_remote: bool = False
    metrics_port: int | None = Field(None, ge=0, le=65535)  # /metrics without the token there (prometheus.py)
    metrics_host: str = "127.0.0.1"
    state_dir: Path = Field(default_factory=_default_state_dir)
    openclaw_state: Path = Field(default_factory=lambda: openclaw_state_dir())
    db_path: Path | None = None
    # A PostgreSQL server instead of the SQLite file (``store/backend.py``): postgresql://user:pass@host/db.
    # Secret, because the URL may carry a password: never logged, never shown.
    database_url: SecretStr | None = None
    database_schema: str = Field("lossless", pattern=r"^[a-z_][a-z0-9_]{0,62}$")
    database_connections: int = Field(24, ge=16, le=200)  # this sidecar's share of the server's max_connections
    token: SecretStr | None = None
    max_body_bytes: int = Field(16 * 1024 * 1024, ge=1024)

    retrieval_count: int = Field(20, ge=0, le=200)
    window_share: float = Field(0.6, gt=0, le=1)
    recency_decay_hours: float = Field(168.0, gt=0)
    skip_heartbeats: bool = True
    max_db_size_mb: float = Field(500.0, ge=0)
    min_similarity: float = Field(0.3, ge=0, le=1)
    recall_scope: RecallScope = "agent"
    recency_floor: float = Field(0.9, ge=0, le=1)
    neighbour_radius: int = Field(2, ge=0, le=10)
    recall_token_budget: int = Field(2000, ge=0)
    recall_duplicate_cosine: float = Field(1.0, ge=0, le=1)
    recall_time_boost: float = Field(0.2, ge=0, le=1)
    # Workspace memory files (memory_files/, docs/workspace-memory.md): indexed at start and every interval
    # (0: at start only), and given at most this share of the recalled block's room.
    memory_files: bool = True
    memory_files_interval_s: float = Field(30.0, ge=0, le=86_400)
    memory_file_share: float = Field(0.3, ge=0, le=1)
    openclaw_config: Path | None = Field(
        None, validation_alias=AliasChoices("OPENCLAW_CONFIG_PATH", "LOSSLESS_OPENCLAW_CONFIG")
    )
    openclaw_workspace: Path | None = Field(
        None, validation_alias=AliasChoices("OPENCLAW_WORKSPACE_DIR", "LOSSLESS_OPENCLAW_WORKSPACE")
    )
    default_token_budget: int = Field(100_000, ge=1)
    assemble_deadline_ms: int = Field(400, ge=10)
    query_embed_deadline_ms: int = Field(250, ge=1)
    recalled_text_chars: int = Field(1200, ge=80)
    keyword_term_limit: int = Field(5000, ge=0)

    embedding_provider: ProviderName = "local"
    model_dir: Path = Field(default_factory=_default_model_dir)
    local_variant: Literal["fp32", "int8"] = "int8"
    # which local model (docs/languages.md): switching re-embeds the store from the backlog
    local_model: Literal["all-MiniLM-L6-v2", "multilingual-e5-small"] = "all-MiniLM-L6-v2"
    embed_threads: int = Field(1, ge=1, le=64)
    embed_batch_size: int = Field(32, ge=1, le=1024)
    drain_threads: int = Field(2, ge=1, le=64)
    vector_shortlist: int = Field(10000, ge=1, le=1_000_000)
    openai_api_key: SecretStr | None = Field(
        None, validation_alias=AliasChoices("OPENAI_API_KEY", "LOSSLESS_OPENAI_API_KEY")
    )
    embedding_model: str = Field(
        "text-embedding-3-small", validation_alias=AliasChoices("EMBEDDING_MODEL", "LOSSLESS_EMBEDDING_MODEL")
    )
    embedding_base_url: str = Field(
        "https://api.openai.com/v1",
        validation_alias=AliasChoices("EMBEDDING_BASE_URL", "LOSSLESS_EMBEDDING_BASE_URL"),
    )
    embedding_dimensions: int | None = Field(
        None, ge=1, validation_alias=AliasChoices("EMBEDDING_DIMENSIONS", "LOSSLESS_EMBEDDING_DIMENSIONS")
    )
    embedding_timeout_s: float = Field(10.0, gt=0)
    embedding_retry_after_max_s: float = Field(60.0, ge=0, le=86_400)
    synchronous: Literal["FULL", "NORMAL"] = "FULL"
    redact_originals: bool = True
    redact_patterns: list[str] = Field(default_factory=list)
    injected_blocks: list[str] = Field(default_factory=list)  # capture/injected.py: extra shapes, built-ins off
    include_thinking: bool = False
    catch_up: bool = True
    catch_up_interval_s: float = Field(15.0, ge=0, le=3600)  # 0: no periodic check (transcripts/catchup.py)
    # Watch mode (docs/watch-mode.md): every agent's transcripts, all sessions, looked at every watch_interval_s.
    watch: bool = False
    watch_interval_s: float = Field(0.5, gt=0, le=60)  # docs/decisions/0200-watch-notification.md
    claude_code: bool = False  # watch mode also reads Claude Code's transcripts (transcripts/claude_code.py)
    claude_code_dir: Path = Field(default_factory=lambda: claude_projects_dir())
    include_sessions: Annotated[list[str], NoDecode] = Field(default_factory=list)
    exclude_sessions: Annotated[list[str], NoDecode] = Field(default_factory=list)

    @field_validator("include_sessions", "exclude_sessions", mode="before")
    @classmethod
    def _patterns(cls, value: Any) -> Any:
        """Comma-separated in the environment (``agent:*:cron:*,agent:main:group:*``); a list when built in code."""
        from openclaw_lossless.selection import parse_patterns

        return parse_patterns(value) if isinstance(value, str | list | tuple) else value

    @field_validator("injected_blocks")
    @classmethod
    def _injected_shapes(cls, entries: list[str]) -> list[str]:
        """Refused at start with what to fix: an unknown built-in, a bad tag name or regular expression."""
        from openclaw_lossless.capture.injected import InjectedText

        InjectedText.from_entries(entries)
        return entries

    @field_validator("database_url")
    @classmethod
    def _database_url(cls, url: SecretStr | None) -> SecretStr | None:
        value = url.get_secret_value().strip() if url is not None else ""
        if not value:
            return None
        if not value.startswith(DATABASE_URL_SCHEMES):
            raise ValueError("must start with postgresql:// (or be unset: the store is then the SQLite file)")
        return SecretStr(value)

    @field_validator("token")
    @classmethod
    def _strong_token(cls, token: SecretStr | None) -> SecretStr | None:
        value = None if token is None else token.get_secret_value()
        if value is not None and (len(value) < MIN_TOKEN_CHARS or any(ch.isspace() for ch in value)):
            raise ValueError(
                f"must be at least {MIN_TOKEN_CHARS} characters without spaces (or unset: one is generated)"
            )
        return token

    @property
    def database_path(self) -> Path:
        return self.db_path or self.state_dir / "lossless.sqlite"

    @property
    def token_path(self) -> Path:
        return self.state_dir / "token"

    @property
    def archive_dir(self) -> Path:
        return self.state_dir / "archive"

    @property
    def recall(self) -> RecallSettings:
        return RecallSettings(
            retrieval_count=self.retrieval_count,
            window_share=self.window_share,
            recency_decay_hours=self.recency_decay_hours,
            skip_heartbeats=self.skip_heartbeats,
            min_similarity=self.min_similarity,
            recall_scope=self.recall_scope,
            recency_floor=self.recency_floor,
            neighbour_radius=self.neighbour_radius,
            recall_token_budget=self.recall_token_budget,
            recall_duplicate_cosine=self.recall_duplicate_cosine,
            recall_time_boost=self.recall_time_boost,
            memory_file_share=self.memory_file_share,
        )
