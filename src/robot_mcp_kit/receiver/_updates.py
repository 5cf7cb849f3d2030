"""What the brain's handler is given: :class:`TaskUpdate`, and the handler's shape.

Each task's updates reach the handler one at a time and in ``seq`` order: its events
(posted, or fetched to repair a gap), then, when the server's word is all there is, one
synthetic update (the state it reports, the seqs it can no longer give, or that it no
longer knows the task). See :class:`~robot_mcp_kit.receiver.Receiver` for what "once"
means when the handler fails or the process dies.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum
from typing import Literal, Protocol

from robot_mcp_kit.models import TaskEvent, TaskInfo

__all__ = ["Handler", "TaskUpdate", "UpdateKind", "UpdateSource"]


class UpdateKind(StrEnum):
    """What a :class:`TaskUpdate` tells the handler."""

    EVENT = "event"  # one of the task's events (``event``), in seq order
    STATE = "state"  # the server reports a state no event carried (``info``), e.g. cancelled
    GAP = "gap"  # seqs ``missing`` that will never come: not retained, or waited out
    LOST = "lost"  # the server no longer knows the task (it restarted without its outbox)


UpdateSource = Literal["post", "repair", "reconcile"]
"""How the receiver learnt it: a signed POST, ``get_task_events`` after a gap, or the
reconciliation poll (``list_tasks``, ``get_task``, ``get_task_events``)."""


@dataclass(frozen=True, slots=True)
class TaskUpdate:
    """One update of one task, handed to the handler.

    Attributes:
        kind: see :class:`UpdateKind`.
        server: the server's name (its ``X-RVC-Server``).
        task_id: the task.
        seq: EVENT: the event's seq; GAP: the last missing seq; STATE and LOST: the last
            seq delivered before it (0: none).
        event: the :class:`~robot_mcp_kit.TaskEvent` (EVENT only).
        info: the task as the server reported it (STATE only).
        missing: GAP only: the first and last seq that will never come.
        source: how the receiver learnt it (see :data:`UpdateSource`).
        redelivered: True when this update may have reached the handler before: the
            handler raised on an earlier attempt, or the process stopped while it could
            have been running it. False means it has not.
        attempt: 1 for the first call with this update, 2 after the handler raised once…
    """

    kind: UpdateKind
    server: str
    task_id: str
    seq: int
    event: TaskEvent | None = None
    info: TaskInfo | None = None
    missing: tuple[int, int] | None = None
    source: UpdateSource = "post"
    redelivered: bool = False
    attempt: int = 1

    @property
    def key(self) -> str:
        """A stable idempotency key: the same for every delivery of this update.

        ``<server>/<task_id>/<seq>`` for an event (a repaired copy of an event has its
        key); ``<server>/<task_id>/gap/<first>-<last>``, ``…/state/<state>`` and
        ``…/lost`` for the others. A handler whose effects must happen exactly once
        stores the key with them, in the same transaction, under a unique constraint.
        """
        base = f"{self.server}/{self.task_id}"
        if self.kind is UpdateKind.EVENT:
            return f"{base}/{self.seq}"
        if self.kind is UpdateKind.GAP and self.missing is not None:
            return f"{base}/gap/{self.missing[0]}-{self.missing[1]}"
        if self.kind is UpdateKind.STATE and self.info is not None:
            return f"{base}/state/{self.info.state.value}"
        return f"{base}/{self.kind.value}"

    @property
    def type(self) -> str:
        """The event's type for an EVENT, else the kind (``state``, ``gap``, ``lost``)."""
        return self.event.type if self.event is not None else self.kind.value

    def describe(self) -> str:
        """One line for a log or a terminal: ``sleeper slee-1a2b3c #3 progress``."""
        head = f"{self.server} {self.task_id}"
        if self.kind is UpdateKind.EVENT:
            return f"{head} #{self.seq} {self.type}"
        if self.kind is UpdateKind.GAP and self.missing is not None:
            return f"{head} gap #{self.missing[0]}..#{self.missing[1]} (never coming)"
        if self.kind is UpdateKind.STATE and self.info is not None:
            return f"{head} state {self.info.state.value} (from the server)"
        return f"{head} lost (the server no longer knows it)"


class Handler(Protocol):
    """The brain's handler: ``async def handle(update: TaskUpdate) -> None``.

    Called with each task's updates one at a time, in ``seq`` order; different tasks'
    updates run concurrently (up to the receiver's ``max_concurrent_handlers``). Return
    when the update is handled: the receiver then records it as delivered and never
    hands it over again. Raise to have it handed over again (``redelivered``, after a
    pause that doubles up to ``handler_retry_max_s``); the task's later updates wait.
    """

    async def __call__(self, update: TaskUpdate, /) -> None: ...
