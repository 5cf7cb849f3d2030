"""The memory server's configuration: environment variables only, validated once at start.

Every setting is read from the environment (memory spec §6, DESIGN §5); there is no config
file. :func:`load_settings` returns a frozen :class:`Settings` or raises
:class:`SettingsError` whose message is one line naming the variable, the bad value and
what is valid, so ``robot-mcp-memory`` can refuse to start without a traceback.
"""

from __future__ import annotations

import re
from enum import StrEnum
from pathlib import Path
from typing import Any

from pydantic import (
    AliasChoices,
    Field,
    SecretStr,
    ValidationError,
    ValidationInfo,
    field_validator,
)
from pydantic_settings import BaseSettings, SettingsConfigDict

from robot_mcp_memory._exceptions import (
    SettingsError,
    TokenMapError,
)
from robot_mcp_memory._limits import (
    MAX_ANSWER_BYTES,
    MAX_TRACE_QUERY_CHARS,
    REVISIONS_KEEP,
    ROBOT_BURST_S,
    ROBOT_MAX_CALLS,
    ROBOT_MAX_DOCUMENTS,
    ROBOT_MAX_QUEUED,
    ROBOT_TIME_SHARE,
    TRACE_QUERY_CHARS,
)
from robot_mcp_memory.tenant import ASCII_WHITESPACE, parse_robot_tokens

__all__ = [
    "DEFAULT_ADMIN_RESERVE",
    "DEFAULT_ROBOT_MAX_REQUESTS",
    "DEFAULT_ROBOT_MAX_SESSIONS",
    "DEFAULT_ROBOT_MAX_STREAMS",
    "ENV_VARS",
    "SearchMode",
    "Settings",
    "Transport",
    "load_settings",
]


class Transport(StrEnum):
    """How the server talks MCP."""

    STDIO = "stdio"  # one client on stdin/stdout; always unscoped, never gated
    SSE = "sse"  # HTTP + server-sent events on MCP_HOST:MCP_PORT (GET /sse, POST /messages/)
    STREAMABLE_HTTP = "streamable-http"  # HTTP on MCP_HOST:MCP_PORT at /mcp


class SearchMode(StrEnum):
    """How ``find_processes`` ranks (decision 0011)."""

    HYBRID = "hybrid"  # bm25 fused with the offline embedding model's cosine (the default)
    LEXICAL = "lexical"  # bm25 alone; the embedding model is never loaded


DEFAULT_ROBOT_MAX_STREAMS = 4
"""Long-lived streams per robot token: a brain holds one per session."""

DEFAULT_ROBOT_MAX_REQUESTS = 16
"""Requests in progress per robot token, streams included."""

DEFAULT_ROBOT_MAX_SESSIONS = 4
"""Streamable-HTTP sessions per robot token."""

DEFAULT_ADMIN_RESERVE = 16
"""Connection slots robot tokens never fill; at most a quarter of the cap when unset."""

# env var -> (field name, default shown in --help, meaning). The one table --help, the
# error messages and the docs read, so they cannot drift from each other.
ENV_VARS: dict[str, tuple[str, str, str]] = {
    "MCP_TRANSPORT": ("transport", "stdio", "stdio | sse | streamable-http"),
    "MCP_HOST": ("host", "127.0.0.1", "address the HTTP transports bind"),
    "MCP_PORT": ("port", "9103", "port of the HTTP transports (1-65535)"),
    "MEMORY_DATA_DIR": (
        "data_dir",
        "data/",
        "directory of index.db, lessons.db and memory.lock (the lock a running server holds)",
    ),
    "MEMORY_DATABASE_URL": (
        "database_url",
        "unset",
        "postgresql://user:pass@host/db (a libpq URL, unix-socket hosts included): keep "
        "everything in PostgreSQL instead of MEMORY_DATA_DIR (needs the 'postgres' extra)",
    ),
    "MEMORY_DATABASE_POOL_SIZE": (
        "database_pool_size",
        "10",
        "most PostgreSQL connections this process holds (2-1000)",
    ),
    "MEMORY_DATABASE_STATEMENT_TIMEOUT_S": (
        "database_statement_timeout_s",
        "15",
        "seconds one PostgreSQL statement may run before the database cancels it (0 < s <= 600)",
    ),
    "MEMORY_DATABASE_CONNECT_TIMEOUT_S": (
        "database_connect_timeout_s",
        "5",
        "seconds to wait for a PostgreSQL connection, at start and on each call (0 < s <= 120); "
        "a call that cannot get one answers 'unavailable'",
    ),
    "ROBOT_ID": ("robot_id", "unknown", "provenance written into saved documents"),
    "MEMORY_TOKEN": (
        "token",
        "unset",
        "bearer token (visible ASCII) required on the HTTP transports (unset: no auth, "
        "loopback/tailnet only)",
    ),
    "MEMORY_ROBOT_TOKENS": (
        "robot_tokens",
        "unset",
        "per-robot bearer tokens 'rap-1:<token>,rap-2:<token>' (each at least 16 characters); "
        "a robot token scopes its connection to that robot's group, MEMORY_TOKEN stays the admin",
    ),
    "MEMORY_ALLOWED_HOSTS": (
        "allowed_hosts",
        "unset",
        "comma-separated Host values clients use, e.g. brain-memory:9103 or brain-memory:*; "
        "turns on the Host/Origin (DNS-rebinding) check when bound beyond loopback",
    ),
    "MEMORY_MAX_CONNECTIONS": (
        "max_connections",
        "256",
        "most open HTTP connections, SSE streams included (4-65536); at the cap the "
        "connection idle longest without a request is dropped, else the new one is refused",
    ),
    "MEMORY_HEADER_TIMEOUT_S": (
        "header_timeout_s",
        "10",
        "seconds a connection may take to send a complete request head (0 < s <= 300); "
        "then it is closed",
    ),
    "MEMORY_ROBOT_MAX_DOCUMENTS": (
        "robot_max_documents",
        str(ROBOT_MAX_DOCUMENTS),
        "most documents one robot token may own (1-1000000); a save of one more answers "
        "too_large, updates are always accepted; the admin token is not counted",
    ),
    "MEMORY_ROBOT_MAX_STREAMS": (
        "robot_max_streams",
        str(DEFAULT_ROBOT_MAX_STREAMS),
        "long-lived streams (GET /sse, GET /mcp) one robot token may hold at once (1-1024); "
        "past it 429 with Retry-After",
    ),
    "MEMORY_ROBOT_MAX_REQUESTS": (
        "robot_max_requests",
        str(DEFAULT_ROBOT_MAX_REQUESTS),
        "requests one robot token may have in progress, streams included (1-65536, at least "
        "MEMORY_ROBOT_MAX_STREAMS); past it 429 with Retry-After",
    ),
    "MEMORY_ROBOT_MAX_SESSIONS": (
        "robot_max_sessions",
        str(DEFAULT_ROBOT_MAX_SESSIONS),
        "streamable-HTTP sessions one robot token may hold (1-1024); opening one more ends its "
        "least recently used idle session, or is refused with 429 when all are busy",
    ),
    "MEMORY_ADMIN_RESERVE": (
        "admin_reserve",
        f"{DEFAULT_ADMIN_RESERVE}, a quarter of MEMORY_MAX_CONNECTIONS below "
        f"{4 * DEFAULT_ADMIN_RESERVE}",
        "connection slots robot tokens together never make busy, kept for MEMORY_TOKEN "
        "(0 to less than MEMORY_MAX_CONNECTIONS); a robot request past them gets 429",
    ),
    "MEMORY_ROBOT_MAX_CALLS": (
        "robot_max_calls",
        str(ROBOT_MAX_CALLS),
        "tool calls one robot token runs at once in each of its two lanes, the document tools "
        "and the registry/lesson tools (1-64); its further calls wait their turn in its own "
        "queue, never delaying other robots; the admin is not limited",
    ),
    "MEMORY_ROBOT_MAX_QUEUED": (
        "robot_max_queued",
        str(ROBOT_MAX_QUEUED),
        "tool calls of one robot token that may wait in each lane (0-1024); past it a call answers "
        '{"error": "busy", "retry_after_s": n} at once, without running',
    ),
    "MEMORY_ROBOT_TIME_SHARE": (
        "robot_time_share",
        str(ROBOT_TIME_SHARE),
        "fraction of the time one robot token's calls may keep running, per lane, on average "
        f"(0.01-1; after a burst of {ROBOT_BURST_S:g} s of running time its next calls wait "
        "for their turn); 1 turns the pacing off",
    ),
    "MEMORY_MAX_ANSWER_BYTES": (
        "max_answer_bytes",
        str(MAX_ANSWER_BYTES),
        "bytes one find_processes / list_processes answer may take on the wire "
        "(65536-67108864); past it a find leaves further results' markdown out "
        "(get_process fetches them) and a list page stops early with next_offset",
    ),
    "MEMORY_TRACE_QUERY_CHARS": (
        "trace_query_chars",
        str(TRACE_QUERY_CHARS),
        f"leading characters of a find_processes query its trace span keeps (0-"
        f"{MAX_TRACE_QUERY_CHARS}; 0: none); documents and tokens never reach telemetry, "
        "which the standard OTEL_* variables turn on (docs/observability.md)",
    ),
    "MEMORY_REVISIONS_KEEP": (
        "revisions_keep",
        str(REVISIONS_KEEP),
        "earlier versions kept per process document (1-1000) for get_process(revision=) "
        "and revert_process; older ones are pruned at the next change",
    ),
    "MEMORY_SEARCH": (
        "search",
        "hybrid",
        "hybrid | lexical: bm25 fused with an offline embedding model's cosine, or bm25 alone "
        "(hybrid falls back to lexical, said once at startup, when the model is not installed)",
    ),
}
_FIELD_TO_ENV = {field: env for env, (field, _, _) in ENV_VARS.items()}


_VISIBLE_ASCII = re.compile(r"[!-~]+")  # 0x21-0x7e

_HOST_PATTERN = re.compile(r"(\[[0-9A-Fa-f:.]+\]|[A-Za-z0-9.-]+)(:(\*|[0-9]{1,5}))?")


class Settings(BaseSettings):
    """The server's settings, frozen after validation.

    Construct it with :func:`load_settings` (environment) or directly with field names in
    tests (``Settings(transport="sse", data_dir=tmp_path)``).
    """

    model_config = SettingsConfigDict(
        frozen=True,
        extra="ignore",
        case_sensitive=False,
        populate_by_name=True,
        env_file=None,
    )

    transport: Transport = Field(
        default=Transport.STDIO, validation_alias=AliasChoices("transport", "MCP_TRANSPORT")
    )
    host: str = Field(default="127.0.0.1", validation_alias=AliasChoices("host", "MCP_HOST"))
    port: int = Field(
        default=9103, ge=1, le=65535, validation_alias=AliasChoices("port", "MCP_PORT")
    )
    data_dir: Path = Field(
        default=Path("data"), validation_alias=AliasChoices("data_dir", "MEMORY_DATA_DIR")
    )
    database_url: SecretStr | None = Field(
        default=None, validation_alias=AliasChoices("database_url", "MEMORY_DATABASE_URL")
    )
    database_pool_size: int = Field(
        default=10,
        ge=2,
        le=1000,
        validation_alias=AliasChoices("database_pool_size", "MEMORY_DATABASE_POOL_SIZE"),
    )
    database_statement_timeout_s: float = Field(
        default=15.0,
        gt=0,
        le=600,
        validation_alias=AliasChoices(
            "database_statement_timeout_s", "MEMORY_DATABASE_STATEMENT_TIMEOUT_S"
        ),
    )
    database_connect_timeout_s: float = Field(
        default=5.0,
        gt=0,
        le=120,
        validation_alias=AliasChoices(
            "database_connect_timeout_s", "MEMORY_DATABASE_CONNECT_TIMEOUT_S"
        ),
    )
    robot_id: str = Field(
        default="unknown",
        min_length=1,
        max_length=100,
        pattern=r"^\S+$",
        validation_alias=AliasChoices("robot_id", "ROBOT_ID"),
    )
    token: SecretStr | None = Field(
        default=None, validation_alias=AliasChoices("token", "MEMORY_TOKEN")
    )
    robot_tokens: SecretStr | None = Field(
        default=None, validation_alias=AliasChoices("robot_tokens", "MEMORY_ROBOT_TOKENS")
    )
    allowed_hosts: str = Field(
        default="", validation_alias=AliasChoices("allowed_hosts", "MEMORY_ALLOWED_HOSTS")
    )
    max_connections: int = Field(
        default=256,
        ge=4,
        le=65536,
        validation_alias=AliasChoices("max_connections", "MEMORY_MAX_CONNECTIONS"),
    )
    header_timeout_s: float = Field(
        default=10.0,
        gt=0,
        le=300,
        allow_inf_nan=False,
        validation_alias=AliasChoices("header_timeout_s", "MEMORY_HEADER_TIMEOUT_S"),
    )
    robot_max_requests: int = Field(
        default=DEFAULT_ROBOT_MAX_REQUESTS,
        ge=1,
        le=65536,
        validation_alias=AliasChoices("robot_max_requests", "MEMORY_ROBOT_MAX_REQUESTS"),
    )
    robot_max_streams: int = Field(
        default=DEFAULT_ROBOT_MAX_STREAMS,
        ge=1,
        le=1024,
        validation_alias=AliasChoices("robot_max_streams", "MEMORY_ROBOT_MAX_STREAMS"),
    )
    robot_max_sessions: int = Field(
        default=DEFAULT_ROBOT_MAX_SESSIONS,
        ge=1,
        le=1024,
        validation_alias=AliasChoices("robot_max_sessions", "MEMORY_ROBOT_MAX_SESSIONS"),
    )
    admin_reserve: int | None = Field(
        default=None,
        ge=0,
        validation_alias=AliasChoices("admin_reserve", "MEMORY_ADMIN_RESERVE"),
    )

    robot_max_documents: int = Field(
        default=ROBOT_MAX_DOCUMENTS,
        ge=1,
        le=1_000_000,
        validation_alias=AliasChoices("robot_max_documents", "MEMORY_ROBOT_MAX_DOCUMENTS"),
    )
    robot_max_calls: int = Field(
        default=ROBOT_MAX_CALLS,
        ge=1,
        le=64,
        validation_alias=AliasChoices("robot_max_calls", "MEMORY_ROBOT_MAX_CALLS"),
    )
    robot_max_queued: int = Field(
        default=ROBOT_MAX_QUEUED,
        ge=0,
        le=1024,
        validation_alias=AliasChoices("robot_max_queued", "MEMORY_ROBOT_MAX_QUEUED"),
    )
    robot_time_share: float = Field(
        default=ROBOT_TIME_SHARE,
        ge=0.01,
        le=1.0,
        allow_inf_nan=False,
        validation_alias=AliasChoices("robot_time_share", "MEMORY_ROBOT_TIME_SHARE"),
    )
    max_answer_bytes: int = Field(
        default=MAX_ANSWER_BYTES,
        ge=64 * 1024,
        le=64 * 1024 * 1024,
        validation_alias=AliasChoices("max_answer_bytes", "MEMORY_MAX_ANSWER_BYTES"),
    )
    revisions_keep: int = Field(
        default=REVISIONS_KEEP,
        ge=1,
        le=1000,
        validation_alias=AliasChoices("revisions_keep", "MEMORY_REVISIONS_KEEP"),
    )
    trace_query_chars: int = Field(
        default=TRACE_QUERY_CHARS,
        ge=0,
        le=MAX_TRACE_QUERY_CHARS,
        validation_alias=AliasChoices("trace_query_chars", "MEMORY_TRACE_QUERY_CHARS"),
    )

    search: SearchMode = Field(
        default=SearchMode.HYBRID, validation_alias=AliasChoices("search", "MEMORY_SEARCH")
    )

    @field_validator("allowed_hosts")
    @classmethod
    def _hosts_are_host_port_patterns(cls, value: str) -> str:
        hosts = [h.strip() for h in value.split(",") if h.strip()]
        for host in hosts:
            if not _HOST_PATTERN.fullmatch(host):
                raise ValueError(
                    f"entry {host!r} is not host, host:port or host:* (no scheme, no path)"
                )
        return ",".join(hosts)

    @property
    def allowed_host_list(self) -> tuple[str, ...]:
        """``MEMORY_ALLOWED_HOSTS`` split into its entries; empty when unset."""
        return tuple(h for h in self.allowed_hosts.split(",") if h)

    @field_validator("transport", "search", mode="before")
    @classmethod
    def _normalise_transport(cls, value: Any) -> Any:
        return value.strip().lower() if isinstance(value, str) else value

    @field_validator("host")
    @classmethod
    def _host_not_blank(cls, value: str) -> str:
        value = value.strip()
        if not value:
            raise ValueError("must not be empty")
        return value

    @field_validator("token", mode="before")
    @classmethod
    def _blank_token_is_unset(cls, value: Any) -> Any:
        # `MEMORY_TOKEN=` in an EnvironmentFile means "no token", not "the empty token".
        # Only ASCII whitespace around it is dropped: str.strip() would also eat a stray
        # "\xa0" or "\x85" and start with a token the operator never wrote.
        if isinstance(value, str):
            value = value.strip(ASCII_WHITESPACE)
            if not value:
                return None
            if _VISIBLE_ASCII.fullmatch(value) is None:
                raise ValueError(
                    "must be visible ASCII characters only (no spaces, no non-breaking or "
                    "other Unicode spaces around or inside it)"
                )
        return value

    @field_validator("robot_max_streams")
    @classmethod
    def _streams_within_requests(cls, value: int, info: ValidationInfo) -> int:
        requests = info.data.get("robot_max_requests")
        if requests is not None and value > requests:
            raise ValueError(
                f"is more than MEMORY_ROBOT_MAX_REQUESTS={requests}; a stream is a request in "
                "progress, so raise MEMORY_ROBOT_MAX_REQUESTS too"
            )
        return value

    @field_validator("admin_reserve")
    @classmethod
    def _reserve_below_the_cap(cls, value: int | None, info: ValidationInfo) -> int | None:
        cap = info.data.get("max_connections")
        if value is not None and cap is not None and value >= cap:
            raise ValueError(
                f"must be less than MEMORY_MAX_CONNECTIONS={cap}, or robots get no connection "
                "at all"
            )
        return value

    @property
    def admin_reserve_slots(self) -> int:
        """``MEMORY_ADMIN_RESERVE``, or its default: 16, at most a quarter of the cap."""
        if self.admin_reserve is not None:
            return self.admin_reserve
        return min(DEFAULT_ADMIN_RESERVE, self.max_connections // 4)

    @field_validator("database_url")
    @classmethod
    def _database_url_is_postgresql(cls, value: SecretStr | None) -> SecretStr | None:
        if value is None or not value.get_secret_value().strip(ASCII_WHITESPACE):
            return None
        scheme = value.get_secret_value().strip(ASCII_WHITESPACE).split("://", 1)[0].lower()
        if scheme not in ("postgresql", "postgres"):
            raise ValueError(
                "MEMORY_DATABASE_URL must be a postgresql:// URL (got a URL of scheme "
                f"{scheme[:20]!r}); unset it to keep the store in MEMORY_DATA_DIR"
            )
        return SecretStr(value.get_secret_value().strip(ASCII_WHITESPACE))

    @field_validator("robot_tokens")
    @classmethod
    def _robot_tokens_parse(cls, value: SecretStr | None, info: ValidationInfo) -> SecretStr | None:
        if value is None or not value.get_secret_value().strip(ASCII_WHITESPACE):
            return None
        admin = info.data.get("token")
        try:
            parse_robot_tokens(
                value.get_secret_value(),
                admin_token=admin.get_secret_value() if admin is not None else None,
            )
        except TokenMapError as exc:
            raise ValueError(str(exc)) from None
        return value

    @property
    def robot_token_map(self) -> dict[str, str]:
        """``MEMORY_ROBOT_TOKENS`` as ``{token: robot}``; empty when unset."""
        if self.robot_tokens is None:
            return {}
        admin = self.token.get_secret_value() if self.token is not None else None
        return parse_robot_tokens(self.robot_tokens.get_secret_value(), admin_token=admin)

    @property
    def is_http(self) -> bool:
        """True for the HTTP transports (sse, streamable-http), where /healthz and auth apply."""
        return self.transport is not Transport.STDIO


def load_settings() -> Settings:
    """Read and validate the settings from the environment.

    Raises:
        SettingsError: one line naming the first invalid variable, its value and what is valid.
    """
    try:
        return Settings()
    except ValidationError as exc:
        raise _one_line(exc) from None


def _one_line(exc: ValidationError) -> SettingsError:
    err = exc.errors()[0]
    loc = str(err["loc"][0]) if err["loc"] else ""
    variable = _FIELD_TO_ENV.get(loc, loc.upper())
    value = err.get("input")
    secret = variable in ("MEMORY_TOKEN", "MEMORY_ROBOT_TOKENS", "MEMORY_DATABASE_URL")
    shown = "<hidden>" if secret else repr(value)
    meaning = ENV_VARS[variable][2] if variable in ENV_VARS else ""
    message = f"invalid {variable}={shown}: {err['msg']}"
    if meaning:
        message += f" ({variable}: {meaning})"
    return SettingsError(variable, message)
