"""Every error the memory server raises on purpose, under one base.

Each also subclasses the builtin it stands for, so ``except ValueError`` (or
``RuntimeError``) catches it::

    MemoryServerError
    ├── DocError (ValueError)            a process document failed to parse or validate
    │   ├── DocTooLarge                  ... because it is over its size limit
    │   └── RevisionConflict             ... because it changed since the revision the caller read
    ├── FleetError (ValueError)          a fleet or lesson request cannot be done
    ├── DamagedRow                       a stored row cannot be read back as a document
    ├── WriteConflict                    a write met a record the store keeps unique
    │   └── MissingReference             ... or named one that does not exist
    ├── ToolFailure                      an expected tool failure, answered as JSON
    ├── Busy                             a tenant's calls fill its share; this one is not run
    ├── SettingsError (ValueError)       a setting (an environment variable) is invalid
    ├── TokenMapError (ValueError)       MEMORY_ROBOT_TOKENS is malformed
    ├── EmbedderUnavailable (RuntimeError)  the embedding model cannot be loaded
    └── OperationRefused (RuntimeError)  an operator command (backup, restore, dump, load)
        │                                cannot be done; nothing was changed
        └── StoreInUse                   ... because a running server holds the data dir

The package root exports them all (the two operator-command errors:
:mod:`robot_mcp_memory.operations`); how each becomes a tool answer is
:func:`robot_mcp_memory.tools.answer_for`. Each carries its context as attributes and says in its
message what is wrong and what is valid. Programming errors (a bad argument to a
constructor, say ``TokenAuth({"": ...})``) stay plain ``ValueError``: they are bugs, not
answers.
"""

from __future__ import annotations

from typing import Any, Literal

from robot_mcp_memory._limits import MAX_DOC_BYTES

__all__ = [
    "Busy",
    "DamagedRow",
    "DocError",
    "DocTooLarge",
    "EmbedderUnavailable",
    "ErrorCode",
    "FleetError",
    "MemoryServerError",
    "MissingReference",
    "OperationRefused",
    "RevisionConflict",
    "SettingsError",
    "StoreInUse",
    "TokenMapError",
    "ToolFailure",
    "WriteConflict",
    "quote",
]


def quote(text: str) -> str:
    """``text`` quoted for a message: repr, cut to 80 characters."""
    shown = repr(text)
    return shown if len(shown) <= 80 else shown[:77] + "..."


class MemoryServerError(Exception):
    """The base of every error the memory server raises on purpose."""


class DocError(MemoryServerError, ValueError):
    """A process document failed to parse or validate.

    Attributes:
        field: the frontmatter field at fault, or ``"frontmatter"`` / ``"body"`` /
            ``"document"`` for the document's structure (``"id"`` for a save conflict).
        reason: a short code (see :class:`~robot_mcp_memory.processes.ProcessDoc`), e.g.
            ``"invalid_slug"``.

    ``str(error)`` is a sentence naming the field, quoting the bad value and saying what
    is valid.
    """

    def __init__(self, field: str, reason: str, message: str) -> None:
        super().__init__(message)
        self.field = field
        self.reason = reason

    def __repr__(self) -> str:
        return f"{type(self).__name__}(field={self.field!r}, reason={self.reason!r}, {str(self)!r})"


class DocTooLarge(DocError):
    """A document exceeds a limit: its size, its distinct words, or its robot's document count.

    ``size`` is what the client sent (or would bring the count to), ``limit`` the limit,
    both in ``unit`` (UTF-8 bytes unless said otherwise); ``detail`` replaces the default
    sentence when the limit needs its own words (what to do, which setting).
    """

    def __init__(
        self,
        size: int,
        limit: int = MAX_DOC_BYTES,
        *,
        field: str = "document",
        unit: str = "bytes",
        detail: str | None = None,
    ) -> None:
        if detail is None:
            detail = f"the {field} is {size} {unit}; the limit is {limit} {unit}"
            if unit == "bytes":
                detail += f" ({limit // 1024} KiB)"
        super().__init__(field, "too_large", detail)
        self.size = size
        self.limit = limit
        self.unit = unit


class RevisionConflict(DocError):
    """A save named the revision it edits, and the stored document is no longer at it.

    ``id`` is the document; ``expected`` the revision the caller named (0: "the id must be
    new"); ``current`` the stored one, None when the document no longer exists. Nothing
    was written.
    """

    def __init__(self, id: str, expected: int, current: int | None) -> None:
        if current is None:
            detail = (
                f"process {quote(id)} does not exist any more (it was deleted or merged since "
                f"revision {expected}); nothing was saved. Read the current state with "
                "find_processes, or save without expected_revision to create it anew"
            )
        else:
            detail = (
                f"process {quote(id)} is at revision {current}, not {expected}: it changed "
                "since you read it and nothing was saved. get_process it again, apply your "
                f"change to revision {current}, and save with expected_revision={current}"
            )
        super().__init__("expected_revision", "conflict", detail)
        self.id = id
        self.expected = expected
        self.current = current


ErrorCode = Literal["invalid", "not_found", "conflict"]
"""The codes of :class:`FleetError`."""


class FleetError(MemoryServerError, ValueError):
    """A fleet (or lesson) request that cannot be done, and why, in one sentence.

    Attributes:
        code: ``invalid`` (a bad argument), ``not_found`` (an unknown robot or group) or
            ``conflict`` (a group that still has robots cannot be deleted).
        field: the argument at fault for ``invalid`` (e.g. ``"meta"``), else None.
        detail: the message: names the thing, quotes the bad value, says what is valid.
    """

    def __init__(self, code: ErrorCode, detail: str, *, field: str | None = None) -> None:
        super().__init__(detail)
        self.code: ErrorCode = code
        self.field = field
        self.detail = detail

    def to_dict(self) -> dict[str, Any]:
        """``{"error": code, "detail": text}`` plus ``field`` when there is one."""
        out: dict[str, Any] = {"error": self.code, "detail": self.detail}
        if self.field is not None:
            out["field"] = self.field
        return out


class DamagedRow(MemoryServerError):
    """A stored row cannot be read back as a document even after repair.

    ``id`` names it. Searches and lists leave such a row out; an admin can delete it.
    """

    def __init__(self, id: str) -> None:
        super().__init__(
            f"process {id!r} is stored damaged and cannot be read; delete it with "
            "delete_process and save it again"
        )
        self.id = id


class WriteConflict(MemoryServerError):
    """A write met a record the store keeps unique (another writer's, just committed); the
    write did not happen.

    Raised by the backends in place of their drivers' integrity errors, so nothing above
    them knows a driver. ``str(error)`` names the table.
    """


class MissingReference(WriteConflict):
    """A write named a record that does not exist (a robot's group, say); the write did
    not happen."""


class ToolFailure(MemoryServerError):
    """An expected tool failure, answered as ``{"error": code, "detail": detail, **extra}``.

    ``detail`` is always a sentence of ours, never an exception's text.
    """

    def __init__(self, code: str, detail: str, **extra: Any) -> None:
        super().__init__(detail)
        self.code = code
        self.detail = detail
        self.extra = extra

    def payload(self) -> dict[str, Any]:
        """The JSON object the client receives."""
        return {"error": self.code, "detail": self.detail, **self.extra}

    @classmethod
    def forbidden(cls, detail: str) -> ToolFailure:
        """The caller's tenant may not do this; ``detail`` says why."""
        return cls("forbidden", detail)

    @classmethod
    def not_found(cls, id: str) -> ToolFailure:
        """A process that is missing *or out of the caller's scope* (the same answer)."""
        return cls("not_found", f"no process with id {quote(id)}")

    @classmethod
    def too_large(
        cls, field: str, size: int, limit: int, *, unit: str = "bytes", detail: str | None = None
    ) -> ToolFailure:
        """The one ``too_large`` failure: the field, the size the client sent, the limit and
        their unit (``bytes`` unless said otherwise)."""
        return cls(
            "too_large",
            detail or f"the {field} is {size} {unit}; the limit is {limit} {unit}",
            field=field,
            size=size,
            limit=limit,
            unit=unit,
        )

    @classmethod
    def invalid(cls, field: str, detail: str) -> ToolFailure:
        """An argument is invalid; ``field`` names it."""
        return cls("invalid", detail, field=field)


class Busy(MemoryServerError):
    """A tenant already runs and queues as many calls as its share allows; this one is
    refused without running.

    Attributes:
        key: whose share it is (the tenant's name, e.g. ``"robot:rap-1"``).
        running: its calls running now.
        waiting: its calls waiting now.
        retry_after_s: whole seconds after which a retry is likely to be admitted (>= 1).
    """

    def __init__(self, key: str, running: int, waiting: int, retry_after_s: int) -> None:
        super().__init__(
            f"{key} has {running} calls running and {waiting} waiting, its whole share; "
            f"retry after about {retry_after_s} s"
        )
        self.key = key
        self.running = running
        self.waiting = waiting
        self.retry_after_s = retry_after_s


class SettingsError(MemoryServerError, ValueError):
    """A setting is invalid; ``variable`` names the environment variable, str() is one line."""

    def __init__(self, variable: str, message: str) -> None:
        super().__init__(message)
        self.variable = variable


class TokenMapError(MemoryServerError, ValueError):
    """``MEMORY_ROBOT_TOKENS`` is malformed; the message names the bad entry (never a token)."""


class EmbedderUnavailable(MemoryServerError, RuntimeError):
    """The embedding model cannot be loaded (package not installed, weights missing).

    ``reason`` is one sentence for the operator; the server then serves lexical results.
    """

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


class OperationRefused(MemoryServerError, RuntimeError):
    """An operator command (``backup``, ``restore``, ``dump``, ``load``) cannot be done.

    str() is one sentence naming what was wrong and what to do; nothing was changed (a
    half-made destination is removed before this is raised). ``path`` is the file or
    directory concerned.
    """

    def __init__(self, message: str, *, path: str | None = None) -> None:
        super().__init__(message)
        self.path = path


class StoreInUse(OperationRefused):
    """The data directory is held by a running server (its lock file is taken).

    ``holder`` is what the lock file says about its holder (``pid=… host=…``), or None.
    """

    def __init__(self, message: str, *, path: str | None = None, holder: str | None = None):
        super().__init__(message, path=path)
        self.holder = holder
