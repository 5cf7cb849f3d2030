"""What the receiver suite drives and how: :class:`ReceiverConfig`, built from the options.

The receiver under test is given by the URL of its ``POST /api/agent/events`` endpoint and
is configured (by its owner, before the run) to verify ``--server-name`` with ``--secret``
and, during a rotation, with ``--second-secret`` as well.
"""

from __future__ import annotations

from dataclasses import dataclass

from robot_mcp_conformance._config import DEFAULT_SECRET, DEFAULT_SERVER_NAME
from robot_mcp_conformance._exceptions import ConfigError

__all__ = [
    "DEFAULT_MAX_BODY_BYTES",
    "DEFAULT_TIME_BUDGET_S",
    "DEFAULT_TIMING_PAIRS",
    "MAX_TIMING_PAIRS",
    "ReceiverConfig",
]

DEFAULT_TIME_BUDGET_S = 5.0
"""How long a receiver may take to answer one event (contract §5.4): half the kit poster's
10 s attempt deadline, so an answer in budget never times the poster out."""

DEFAULT_MAX_BODY_BYTES = 1_048_576
"""The receiver's body limit the suite assumes (contract §4.4; fake_rvc's default)."""

DEFAULT_TIMING_PAIRS = 40
"""Pairs of wrong signatures the timing check sends (0: the check is not run)."""

MAX_TIMING_PAIRS = 2000

MIN_REQUEST_TIMEOUT_S = 30.0
"""The least the suite waits for any one answer (it waits 3 x the budget if that is more):
a receiver slower than its budget still gets its other clauses judged."""


def _number(option: str, text: str | float | None, default: float) -> float:
    if text is None or text == "":
        return default
    try:
        value = float(text)
    except ValueError:
        raise ConfigError(f"{option} must be a number, got {text!r}.") from None
    if not value > 0 or value != value or value == float("inf"):
        raise ConfigError(f"{option} must be a positive number, got {text!r}.")
    return value


def _count(option: str, text: str | int | None, default: int, lowest: int, highest: int) -> int:
    if text is None or text == "":
        return default
    try:
        value = int(text)
    except ValueError:
        raise ConfigError(f"{option} must be a whole number, got {text!r}.") from None
    if not lowest <= value <= highest:
        raise ConfigError(f"{option} must be {lowest}-{highest}, got {value}.")
    return value


def _url(option: str, text: str | None) -> str | None:
    url = (text or "").strip() or None
    if url is not None and not url.startswith(("http://", "https://")):
        raise ConfigError(f"{option} must be an http:// or https:// URL, got {url!r}.")
    return url


@dataclass(frozen=True)
class ReceiverConfig:
    """The receiver under test and the limits it is held to."""

    url: str
    """The receiver's events endpoint, e.g. ``http://127.0.0.1:8000/api/agent/events``."""
    secret: str
    server_name: str
    second_secret: str | None = None
    """The server's other current secret during a rotation; None: rotation is not checked."""
    inspect_url: str | None = None
    """The optional inspection hook (contract §5.5); None: its clauses are not checked."""
    time_budget_s: float = DEFAULT_TIME_BUDGET_S
    max_body_bytes: int = DEFAULT_MAX_BODY_BYTES
    timing_pairs: int = DEFAULT_TIMING_PAIRS

    @classmethod
    def build(
        cls,
        *,
        url: str | None,
        secret: str | None = None,
        server_name: str | None = None,
        second_secret: str | None = None,
        inspect_url: str | None = None,
        time_budget_s: str | float | None = None,
        max_body_bytes: str | int | None = None,
        timing_pairs: str | int | None = None,
    ) -> ReceiverConfig:
        """Validate the raw option values and fill in the documented defaults.

        Raises:
            ConfigError: a missing or malformed option, with what is valid.
        """
        target = _url("--receiver-url", url)
        if target is None:
            raise ConfigError(
                "no receiver to test: give the URL of its events endpoint, e.g. "
                "robot-mcp-conformance receiver http://127.0.0.1:8000/api/agent/events "
                "(pytest: --receiver-url URL)."
            )
        key = secret or DEFAULT_SECRET
        second = second_secret or None
        if second is not None and second == key:
            raise ConfigError("--second-secret must differ from --secret (a rotation has two).")
        name = (server_name or "").strip() or DEFAULT_SERVER_NAME
        if not name.isascii() or not name.isprintable():
            raise ConfigError(f"--server-name must be printable ASCII, got {name!r}.")
        return cls(
            url=target,
            secret=key,
            server_name=name,
            second_secret=second,
            inspect_url=_url("--inspect-url", inspect_url),
            time_budget_s=_number("--time-budget", time_budget_s, DEFAULT_TIME_BUDGET_S),
            max_body_bytes=_count(
                "--max-body-bytes", max_body_bytes, DEFAULT_MAX_BODY_BYTES, 1024, 256 * 1_048_576
            ),
            timing_pairs=_count(
                "--timing-pairs", timing_pairs, DEFAULT_TIMING_PAIRS, 0, MAX_TIMING_PAIRS
            ),
        )

    @property
    def request_timeout_s(self) -> float:
        """How long the suite waits for one answer before calling it no answer."""
        return max(MIN_REQUEST_TIMEOUT_S, 3 * self.time_budget_s)

    def describe_target(self) -> str:
        """One line naming the receiver under test."""
        hook = f", hook {self.inspect_url}" if self.inspect_url else ", no inspection hook"
        return f"{self.url} (X-RVC-Server {self.server_name!r}{hook})"
