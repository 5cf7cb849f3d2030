"""The kit's exceptions, in one place.

Hierarchy (each error also subclasses the builtin shown, the one the kit raised before
issue 13, so a caller catching that builtin keeps working)::

    RobotMcpKitError                 base of every error the kit raises on purpose
    ├── ConfigurationError           (ValueError) a bad setting or declaration, raised at
    │                                construction so a server fails fast
    ├── InvalidArgument              (ValueError) a call's argument is outside what is valid
    │   ├── InvalidPayload           (TypeError) a payload that is not one JSON document
    │   └── InvalidTrigger           a start's trigger is not as its type declares
    ├── SignatureError               an event's signature or timestamp did not verify
    ├── TaskManagerError             (RuntimeError) the task manager cannot start a task
    │   └── ManagerClosed            start() after aclose(): the server is shutting down
    ├── ServiceStartError            (RuntimeError) a child service (testing.ServiceProcess)
    │                                exited or was not ready in time
    ├── LessonError                  the lesson store (robot_mcp_kit.params)
    │   ├── LessonNotFound           (KeyError) an outcome for a lesson that does not exist
    │   └── InvalidLessonParams      (ValueError, TypeError) params not a JSON object
    └── StoreError                   the SQLite store machinery (robot_mcp_kit.store)
        ├── DeclarationError         (ValueError) a Table or Schema contradicts itself
        ├── UnknownTable             (KeyError) Schema.table() of an undeclared name
        ├── StoreUnreadable          the file is not a database this kit can open
        ├── StoreUnavailable         a database server cannot be reached now
        ├── SchemaTooNew             the file was written by a newer schema version
        ├── SchemaMismatch           the file holds tables the schema does not declare
        ├── MigrationFailed          a migration step raised; the file is left at its old version
        ├── PruneRefused             prune() was asked to delete from a non-RECORD table
        ├── FlushTimeout             (TimeoutError) flush() waited longer than its timeout
        ├── StoreClosed              the store was used after close()
        └── OutboxLocked             (RuntimeError) another process holds the durable outbox

Outside it, on purpose: ``TaskError`` (in :mod:`robot_mcp_kit.tasks`), which a task *body*
raises to fail its task (the kit catches it; it is the body's, not the kit's);
``TypeError`` for an argument of the wrong type (a payload that is not a dict, a server
object no framework built), as Python itself does; ``ImportError`` when the ``mcp``
extra is missing; ``TimeoutError`` from ``RecordingPoster.wait_for``, as from
``asyncio.timeout``.
"""

from __future__ import annotations

__all__ = [
    "ConfigurationError",
    "DeclarationError",
    "FlushTimeout",
    "InvalidArgument",
    "InvalidLessonParams",
    "InvalidPayload",
    "InvalidTrigger",
    "LessonError",
    "LessonNotFound",
    "ManagerClosed",
    "MigrationFailed",
    "OutboxLocked",
    "PruneRefused",
    "RobotMcpKitError",
    "SchemaMismatch",
    "SchemaTooNew",
    "ServiceStartError",
    "SignatureError",
    "StoreClosed",
    "StoreError",
    "StoreUnavailable",
    "StoreUnreadable",
    "TaskManagerError",
    "UnknownTable",
]


class RobotMcpKitError(Exception):
    """Base class of every error the kit raises on purpose."""


class ConfigurationError(RobotMcpKitError, ValueError):
    """A setting is missing or invalid; raised at construction so a server fails fast.

    .. versionchanged:: 0.1.0
       Also a ``ValueError`` (TaskManager's and RetryPolicy's bad settings raised one).
    """


class InvalidArgument(RobotMcpKitError, ValueError):
    """A call's argument is outside what is valid; the message says what is.

    .. versionadded:: 0.1.0
    """


class InvalidPayload(InvalidArgument, TypeError):
    """What a task handed the kit cannot be one JSON document within the limits.

    Raised where it enters (``ctx.progress``, ``ctx.emit``, ``ctx.fire_trigger``, the
    triggers given to ``start``; a body's result fails its task with this message), before
    anything is stored or sent. ``what`` names the value, ``path`` the key path inside it
    (``payload['pose'][2]``), ``reason`` what is wrong there. Also raised for a progress
    payload whose ``percent`` is JSON but not a number (``problem="is refused"``): the one
    key the contract gives a meaning (``progress_above``).
    """

    def __init__(
        self, what: str, path: str, reason: str, *, problem: str = "cannot be sent as JSON"
    ) -> None:
        super().__init__(f"The {what} {problem}: {path} {reason}.")
        self.what = what
        self.path = path
        self.reason = reason


class InvalidTrigger(InvalidArgument):
    """A trigger given to ``TaskManager.start`` is not what its type declares: no task starts.

    ``index`` is the trigger's position in the list (None when the list is at fault: more
    than ``MAX_TRIGGERS`` triggers, or over ``MAX_TRIGGERS_JSON_BYTES`` together), ``type``
    its ``type`` (None when it has none), ``field`` the field at fault (None when the trigger
    itself is: not an object, no string ``type``); the message names all three and what is
    valid (``trigger 0 (eta_below): "seconds" is missing; it must be a finite number > 0.``). A
    start tool registered with :func:`~robot_mcp_kit.fastmcp_ext.add_start_tool` answers
    it as ``{"error": "invalid", "detail": <the message>}``.
    """

    def __init__(
        self, message: str, *, index: int | None, type: str | None, field: str | None
    ) -> None:
        super().__init__(message)
        self.index = index
        self.type = type
        self.field = field


class TaskManagerError(RobotMcpKitError, RuntimeError):
    """The task manager cannot start a task (no running event loop, no free task id).

    ``TaskManager.start()`` raises it (and its other errors) as a subclass that is also
    the ``ToolError`` of each MCP framework loaded, so the client of a start tool that
    lets it escape reads the message (mcp 2.x shows no other exception's text).

    .. versionadded:: 0.1.0 (a bare ``RuntimeError`` before)
    """


class ManagerClosed(TaskManagerError):
    """``TaskManager.start()`` after ``aclose()``: the server is shutting down.

    .. versionadded:: 0.1.0 (a bare ``RuntimeError`` before)
    """


class LessonError(RobotMcpKitError):
    """Base class of the lesson store's errors (:mod:`robot_mcp_kit.params`)."""


class LessonNotFound(LessonError, KeyError):
    """An outcome for a lesson that was never recorded with params.

    A ``KeyError``, so ``str()`` quotes the message as ``KeyError`` does.
    """


class InvalidLessonParams(LessonError, ValueError, TypeError):
    """A lesson's params are not a JSON object (not a mapping, or not serialisable)."""


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


class DeclarationError(StoreError, ValueError):
    """A ``Table`` or ``Schema`` declaration contradicts itself; raised at construction."""


class UnknownTable(StoreError, KeyError):
    """``Schema.table(name)`` for a name the schema does not declare."""


class StoreUnreadable(StoreError):
    """The file exists but is not a database this kit can open (text, truncated, empty).

    ``remedy`` says what an operator can do (restore a backup, move the file aside).
    """

    def __init__(self, message: str, *, path: str | None = None, remedy: str = "") -> None:
        super().__init__(message, path=path)
        self.remedy = remedy


class StoreUnavailable(StoreError):
    """The database cannot be reached now (a server backend: refused, timed out, lost).

    Nothing was written by the call that met it. ``remedy`` says what an operator can do;
    the message never holds a password.
    """

    def __init__(self, message: str, *, path: str | None = None, remedy: str = "") -> None:
        super().__init__(message, path=path)
        self.remedy = remedy


class SchemaTooNew(StoreError):
    """The file's schema version is newer than this code knows; it is left untouched."""


class SchemaMismatch(StoreError):
    """The file holds a table the schema neither declares nor derives."""


class MigrationFailed(StoreError):
    """A migration step raised; the transaction was rolled back and the file kept its version."""


class PruneRefused(StoreError):
    """``prune()`` was asked to delete from a table that is not a declared RECORD."""


class FlushTimeout(StoreError, TimeoutError):
    """``flush()`` waited ``timeout_s`` and records were still unwritten."""


class StoreClosed(StoreError):
    """The store was used after ``close()``."""


class OutboxLocked(StoreError, RuntimeError):
    """Another process holds the durable outbox file; this one was refused at start.

    One outbox file serves one process: two would each send the other's pending events
    and report the other's running tasks ``INTERRUPTED``. The holder keeps an exclusive
    lock on ``<outbox>.lock`` while its file is open; the OS releases it when the holder
    exits, however it exits.

    Attributes: ``path`` (the outbox file), ``lock_path`` (the lock file),
    ``holder_pid`` and ``holder_host`` (what the holder wrote in the lock file; None when
    unreadable). Also a ``RuntimeError``, like the kit's other refusals to start.
    """

    def __init__(
        self,
        message: str,
        *,
        path: str,
        lock_path: str,
        holder_pid: int | None,
        holder_host: str | None,
    ) -> None:
        super().__init__(message, path=path)
        self.lock_path = lock_path
        self.holder_pid = holder_pid
        self.holder_host = holder_host


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
