"""Which servers a receiver accepts: from code, from a file, or from the environment.

Each server is a :class:`ServerConfig`: its name (the ``X-RVC-Server`` it signs with), one
secret or two during a rotation, and, for repair and reconciliation, the URL of its MCP
endpoint with the bearer token it wants (if any).

A file (``.toml``, ``.json``, or ``.yaml`` / ``.yml`` when pyyaml is installed) has the
shape of an ``mcp.yaml`` — one entry per server::

    [servers.sleeper]
    url = "http://127.0.0.1:9100/sse"      # its MCP endpoint (SSE: a path ending in /sse)
    secrets = ["s3cret", "n3xt"]           # or secret = "s3cret"; or secret_env = "VAR"
    token_env = "SLEEPER_TOKEN"            # or token = "…"; neither: no Authorization

The environment: ``RVC_RECEIVER_CONFIG`` names such a file; without it, ``RVC_SERVERS``
lists the names (``sleeper,navigation``) and each server ``NAME`` (upper-cased, each
character other than a letter or digit as ``_``) reads ``RVC_<NAME>_SECRET``,
``RVC_<NAME>_SECRET_NEXT`` (the second secret of a rotation), ``RVC_<NAME>_MCP_URL`` and
``RVC_<NAME>_MCP_TOKEN``.

Every error is a :class:`~robot_mcp_kit.ConfigurationError` naming the entry or variable
and what is valid; none quotes a secret or a token.
"""

from __future__ import annotations

import json
import os
import re
import tomllib
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final, Literal
from urllib.parse import urlsplit

from robot_mcp_kit._exceptions import ConfigurationError

__all__ = [
    "ENV_RECEIVER_CONFIG",
    "ENV_SERVERS",
    "ServerConfig",
    "Transport",
    "load_servers",
    "servers_from_env",
]

ENV_RECEIVER_CONFIG: Final = "RVC_RECEIVER_CONFIG"
"""Names a servers file (see the module docstring)."""
ENV_SERVERS: Final = "RVC_SERVERS"
"""Lists the server names, comma-separated, when no file is named."""

Transport = Literal["auto", "sse", "streamable-http"]
"""How to reach a server's MCP URL: ``auto`` is SSE for a path ending in ``/sse``, else
streamable HTTP."""

_NAME = re.compile(r"[\x21-\x7e]{1,100}")


@dataclass(frozen=True)
class ServerConfig:
    """One server the receiver accepts events from.

    Args:
        name: the server's name, as its ``X-RVC-Server`` header and its events' ``server``
            field say it: 1 to 100 printable ASCII characters, no space.
        secrets: its current secret, or its two secrets during a rotation (either
            verifies). A single string is taken as one secret.
        mcp_url: its MCP endpoint (``http(s)://…``), for repair (``get_task_events``),
            reconciliation (``list_tasks``, ``get_task``) and ``answer_task_input``. None:
            the receiver only takes what the server posts.
        token: the bearer token its MCP endpoint wants (sent as ``Authorization: Bearer
            …``), or None.
        transport: ``auto`` (SSE for a path ending in ``/sse``, else streamable HTTP),
            ``sse`` or ``streamable-http``.

    Raises:
        ConfigurationError: a bad name, no secret, an empty or non-text secret, a URL that
            is not ``http(s)://host…``, an unknown transport.
    """

    name: str
    secrets: tuple[str, ...]
    mcp_url: str | None = None
    token: str | None = field(default=None, repr=False)
    transport: Transport = "auto"

    def __post_init__(self) -> None:
        if not isinstance(self.name, str) or not _NAME.fullmatch(self.name):
            raise ConfigurationError(
                f"Server name {str(self.name)[:100]!r} is not usable: 1 to 100 printable ASCII "
                "characters without spaces (the X-RVC-Server it signs with)."
            )
        keys = (self.secrets,) if isinstance(self.secrets, str) else tuple(self.secrets or ())
        if not keys:
            raise ConfigurationError(f"Server {self.name!r} has no secret; give one (or two).")
        for key in keys:
            if not isinstance(key, str) or not key:
                raise ConfigurationError(
                    f"A secret of server {self.name!r} is empty or not text; every secret "
                    "must be a non-empty string."
                )
            try:
                key.encode("utf-8")
            except UnicodeEncodeError:
                raise ConfigurationError(
                    f"A secret of server {self.name!r} is not text that encodes as UTF-8."
                ) from None
        object.__setattr__(self, "secrets", keys)
        if self.mcp_url is not None:
            parts = urlsplit(self.mcp_url) if isinstance(self.mcp_url, str) else None
            if parts is None or parts.scheme not in ("http", "https") or not parts.netloc:
                shown = self.mcp_url[:100] if isinstance(self.mcp_url, str) else self.mcp_url
                raise ConfigurationError(
                    f"The MCP URL of server {self.name!r} must be http(s)://host[:port]/path, "
                    f"got {shown!r}."
                )
        if self.token is not None and (not isinstance(self.token, str) or not self.token):
            raise ConfigurationError(
                f"The token of server {self.name!r} must be a non-empty string, or None."
            )
        if self.transport not in ("auto", "sse", "streamable-http"):
            raise ConfigurationError(
                f"The transport of server {self.name!r} must be auto, sse or streamable-http, "
                f"got {self.transport!r}."
            )

    @property
    def resolved_transport(self) -> Literal["sse", "streamable-http"]:
        """The transport used for :attr:`mcp_url` (``auto`` resolved by its path)."""
        if self.transport != "auto":
            return self.transport
        path = urlsplit(self.mcp_url or "").path.rstrip("/")
        return "sse" if path.endswith("/sse") else "streamable-http"


def _env_infix(name: str) -> str:
    return re.sub(r"[^A-Z0-9]", "_", name.upper())


def servers_from_env(environ: Mapping[str, str] | None = None) -> list[ServerConfig]:
    """The servers the environment configures (see the module docstring).

    ``RVC_RECEIVER_CONFIG`` (a file) wins over ``RVC_SERVERS`` and the per-server variables.

    Raises:
        ConfigurationError: neither is set, a listed server has no secret, two names map
            to the same variables, or the file cannot be used.
    """
    env = os.environ if environ is None else environ
    path = env.get(ENV_RECEIVER_CONFIG, "").strip()
    if path:
        return load_servers(path, environ=env)
    listed = [n.strip() for n in env.get(ENV_SERVERS, "").split(",") if n.strip()]
    if not listed:
        raise ConfigurationError(
            f"No servers configured: set {ENV_RECEIVER_CONFIG} to a servers file, or "
            f"{ENV_SERVERS}=name[,name…] with RVC_<NAME>_SECRET for each."
        )
    servers: list[ServerConfig] = []
    infixes: dict[str, str] = {}
    for name in listed:
        infix = _env_infix(name)
        if infix in infixes:
            raise ConfigurationError(
                f"{ENV_SERVERS} names {infixes[infix]!r} and {name!r}, which read the same "
                f"variables (RVC_{infix}_*); rename one, or use a servers file."
            )
        infixes[infix] = name
        secret = env.get(f"RVC_{infix}_SECRET", "")
        if not secret:
            raise ConfigurationError(
                f"{ENV_SERVERS} lists {name!r} but RVC_{infix}_SECRET is unset or empty."
            )
        keys = [secret]
        nxt = env.get(f"RVC_{infix}_SECRET_NEXT", "")
        if nxt:
            keys.append(nxt)
        servers.append(
            ServerConfig(
                name,
                tuple(keys),
                mcp_url=env.get(f"RVC_{infix}_MCP_URL") or None,
                token=env.get(f"RVC_{infix}_MCP_TOKEN") or None,
            )
        )
    return servers


def _read_file(path: Path) -> Any:
    suffix = path.suffix.lower()
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise ConfigurationError(
            f"Cannot read the servers file {str(path)!r}: {exc.strerror or type(exc).__name__}."
        ) from None
    except UnicodeDecodeError:
        raise ConfigurationError(f"The servers file {str(path)!r} is not UTF-8 text.") from None
    try:
        if suffix == ".toml":
            return tomllib.loads(text)
        if suffix == ".json":
            return json.loads(text)
        if suffix in (".yaml", ".yml"):
            try:
                import yaml
            except ImportError:
                raise ConfigurationError(
                    f"The servers file {str(path)!r} is YAML, which needs pyyaml (pip install "
                    "pyyaml); or write it as .toml or .json."
                ) from None
            return yaml.safe_load(text)
    except (tomllib.TOMLDecodeError, json.JSONDecodeError) as exc:
        where = f"line {exc.lineno}" if isinstance(exc, json.JSONDecodeError) else "its syntax"
        raise ConfigurationError(
            f"The servers file {str(path)!r} is not valid {suffix[1:].upper()} ({where})."
        ) from None
    except Exception as exc:  # yaml.YAMLError, without importing yaml for the name
        if type(exc).__module__.startswith("yaml"):
            raise ConfigurationError(f"The servers file {str(path)!r} is not valid YAML.") from None
        raise
    raise ConfigurationError(
        f"The servers file {str(path)!r} must end in .toml, .json, .yaml or .yml."
    )


def _text(entry: Mapping[str, Any], key: str, where: str, env: Mapping[str, str]) -> str | None:
    """``entry[key]``, or the variable ``entry[key + '_env']`` names; None if neither."""
    value = entry.get(key)
    named = entry.get(f"{key}_env")
    if value is not None and named is not None:
        raise ConfigurationError(f"{where}: give {key} or {key}_env, not both.")
    if named is not None:
        if not isinstance(named, str) or not named:
            raise ConfigurationError(f"{where}.{key}_env must name an environment variable.")
        value = env.get(named)
        if not value:
            raise ConfigurationError(f"{where}.{key}_env names {named!r}, which is unset or empty.")
    if value is not None and (not isinstance(value, str) or not value):
        raise ConfigurationError(f"{where}.{key} must be a non-empty string.")
    return value


def load_servers(
    path: str | os.PathLike[str], *, environ: Mapping[str, str] | None = None
) -> list[ServerConfig]:
    """The servers of a file (``.toml``, ``.json``, ``.yaml``; see the module docstring).

    Raises:
        ConfigurationError: the file cannot be read or parsed, has no ``servers`` table, or
            an entry is unusable; the message names the file and the entry.
    """
    env = os.environ if environ is None else environ
    where_file = str(path)
    data = _read_file(Path(path))
    servers = data.get("servers") if isinstance(data, dict) else None
    if not isinstance(servers, dict) or not servers:
        raise ConfigurationError(
            f"The servers file {where_file!r} needs a 'servers' table of name -> "
            "{secret, url, token}."
        )
    found: list[ServerConfig] = []
    for name, entry in servers.items():
        where = f"{where_file}: servers.{name}"
        if not isinstance(entry, dict):
            raise ConfigurationError(f"{where} must be a table (secret, url, token).")
        keys: list[str] = []
        single = _text(entry, "secret", where, env)
        if single is not None:
            keys.append(single)
        listed = entry.get("secrets")
        if listed is not None:
            if not isinstance(listed, list) or not all(isinstance(k, str) and k for k in listed):
                raise ConfigurationError(f"{where}.secrets must be a list of non-empty strings.")
            keys.extend(listed)
        if not keys:
            raise ConfigurationError(f"{where} needs 'secret', 'secret_env' or 'secrets'.")
        transport = entry.get("transport", "auto")
        found.append(
            ServerConfig(
                str(name),
                tuple(keys),
                mcp_url=_text(entry, "url", where, env),
                token=_text(entry, "token", where, env),
                transport=transport,
            )
        )
    return found


def server_map(
    servers: Iterable[ServerConfig] | Mapping[str, ServerConfig],
) -> dict[str, ServerConfig]:
    """Servers by name; a name given twice is a :class:`ConfigurationError`."""
    items = servers.values() if isinstance(servers, Mapping) else servers
    by_name: dict[str, ServerConfig] = {}
    for server in items:
        if not isinstance(server, ServerConfig):
            raise ConfigurationError(
                f"servers must be ServerConfig entries, got {type(server).__name__}."
            )
        if server.name in by_name:
            raise ConfigurationError(f"Server {server.name!r} is configured twice.")
        by_name[server.name] = server
    if not by_name:
        raise ConfigurationError("A receiver needs at least one server.")
    return by_name
