"""The kit's exceptions, in one place.

Hierarchy::

    RobotMcpKitError                 base of everything the kit raises on purpose
    ├── ConfigurationError           bad or missing settings, raised at construction (fail fast)
    ├── SignatureError               an event's signature or timestamp did not verify
    └── StoreError                   the SQLite store machinery (robot_mcp_kit.store)
        ├── StoreUnreadable          the file is not a database this kit can open
        ├── SchemaTooNew             the file was written by a newer schema version
        ├── SchemaMismatch           the file holds tables the schema does not declare
        ├── MigrationFailed          a migration step raised; the file is left at its old version
        ├── PruneRefused             prune() was asked to delete from a non-RECORD table
        └── StoreClosed              the store was used after close()

``TaskError`` (raised by task bodies to fail a task) lives in :mod:`robot_mcp_kit.tasks`
because it is part of the task-body API rather than an error of the kit itself.
"""

from __future__ import annotations

__all__ = [
    "ConfigurationError",
    "MigrationFailed",
    "PruneRefused",
    "RobotMcpKitError",
    "SchemaMismatch",
    "SchemaTooNew",
    "ServiceStartError",
    "SignatureError",
    "StoreClosed",
    "StoreError",
    "StoreUnreadable",
]


class RobotMcpKitError(Exception):
    """Base class of every error the kit raises on purpose."""


class ConfigurationError(RobotMcpKitError):
    """A setting is missing or invalid; raised at construction so a server fails fast."""


class SignatureError(RobotMcpKitError):
    """An event did not verify.

    ``reason`` is a :class:`~robot_mcp_kit.signing.SignatureReason` (a ``str`` enum:
    ``malformed_signature``, ``bad_signature``, ``malformed_timestamp``,
    ``stale_timestamp``, ``future_timestamp``, ``unusable_secret``,
    ``malformed_webhook_id``); the message is a sentence for humans.
    """

    def __init__(self, reason: str, message: str) -> None:
        super().__init__(message)
        self.reason = reason


class StoreError(RobotMcpKitError):
    """Base class of the SQLite store machinery's errors; ``path`` names the file."""

    def __init__(self, message: str, *, path: str | None = None) -> None:
        super().__init__(message)
        self.path = path


class StoreUnreadable(StoreError):
    """The file exists but is not a database this kit can open (text, truncated, empty)."""


class SchemaTooNew(StoreError):
    """The file's schema version is newer than this code knows; it is left untouched."""


class SchemaMismatch(StoreError):
    """The file holds a table the schema neither declares nor derives."""


class MigrationFailed(StoreError):
    """A migration step raised; the transaction was rolled back and the file kept its version."""


class PruneRefused(StoreError):
    """``prune()`` was asked to delete from a table that is not a declared RECORD."""


class StoreClosed(StoreError):
    """The store was used after ``close()``."""


class ServiceStartError(RobotMcpKitError, RuntimeError):
    """A child service (:class:`~robot_mcp_kit.testing.ServiceProcess`) exited or was not
    ready in time; the message ends with its last output lines.

    Attributes: ``service`` (its name), ``returncode`` (the exit status, None if it was
    still running when the wait gave up) and ``output`` (its last output lines). Also a
    ``RuntimeError``, as it was before it joined the kit's hierarchy.
    """

    def __init__(
        self,
        message: str,
        *,
        service: str | None = None,
        returncode: int | None = None,
        output: str = "",
    ) -> None:
        super().__init__(message)
        self.service = service
        self.returncode = returncode
        self.output = output
