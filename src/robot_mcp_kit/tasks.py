"""TaskManager, TaskContext, TaskError: the server side of the Async Task Contract.

(Kit spec §4.2, DESIGN §3.)

A long-running tool calls :meth:`TaskManager.start` with an async *body*; ``start``
returns a :class:`~robot_mcp_kit.models.TaskInfo` in state ``running`` at once and the body
runs as an asyncio task. The body reports through the :class:`TaskContext` it is handed
(``progress``, ``fire_trigger``, ``emit``); each report becomes a
:class:`~robot_mcp_kit.models.TaskEvent` handed to the manager's :class:`EventSink`
(normally an :class:`~robot_mcp_kit.events.EventPoster`). When the body ends:

=============================  ==============  ==========================================
body                           state           event
=============================  ==============  ==========================================
returns a dict                 ``succeeded``   ``task_done`` ``{"result": <dict>}``
raises :class:`TaskError`      ``failed``      ``task_failed`` (a ``TaskFailure``)
raises ``CancelledError``      ``cancelled``   none
raises anything else           ``failed``      ``task_failed``, ``error_code="INTERNAL"``
returns something not a dict   ``failed``      ``task_failed``, ``error_code="INTERNAL"``
=============================  ==============  ==========================================

The ``INTERNAL`` failure of an unexpected exception says ``str(exc)``, or only the
exception's type with ``TaskManager(internal_error_detail="type")``; the log has both.

Input: a body may ask for an answer before it goes on (``await ctx.request_input(message,
schema=...)``, contract §11). The task stays ``running``; the request is announced as an
``input_required`` event and listed by :meth:`TaskManager.pending_inputs`; the first answer
(:meth:`TaskManager.answer_input`, from the ``answer_task_input`` tool or a host's
``tasks/update`` through :class:`~robot_mcp_kit.native_tasks.NativeTasks`) is announced as
``input_answered`` and returned to the body as an :class:`~robot_mcp_kit.models.InputAnswer`.

Ordering: ``seq`` is per task, starts at 1 and is allocated under the manager's lock
immediately before the event is handed to the sink, still under the lock, so the sink
receives one task's events in ``seq`` order with no gaps.

Triggers are dicts with a ``type`` (``docs/contract.md`` §8). The manager implements only
``progress_above`` itself (evaluated in :meth:`TaskContext.progress`); every other type is
the server's business. Because the manager cannot know which types a server implements,
the server declares them with ``known_trigger_types`` (on the manager, or per
:meth:`TaskManager.start` call; the per-call value wins): names, for the contract's
documented types (:data:`CONTRACT_TRIGGER_TYPES`: ``eta_below``, ``zone_entered``) and
types without fields to check, or :class:`TriggerType` s declaring a type's fields
(:class:`NumberField`, :class:`TextField`). When a task starts, a trigger that is not an
object with a string ``type``, or one of a known type whose fields are not as declared,
refuses the start (:class:`~robot_mcp_kit.InvalidTrigger`, naming the trigger's index, its
type and the field; nothing starts), so a body reads ``t["seconds"]`` without a guard; so
do more than :data:`MAX_TRIGGERS` triggers (32) or over :data:`MAX_TRIGGERS_JSON_BYTES`
(8 KiB) of them. A trigger whose type is not known is ignored with one WARNING. With
``known_trigger_types=None`` (the default) the manager does not judge type names and
checks the documented types' fields.

Retained events (for ``get_task_events``, gap repair): the manager keeps each task's
last ``max_events_per_task`` events (default 256) and at most ``max_events_retained``
(default 10 000) over all tasks, the oldest forgotten first; :meth:`TaskManager.events`
answers them after a given ``seq``, at most ``limit`` (default and cap 200) per call.

Task journal: when the poster has a durable outbox
(``EventPoster(outbox=...)``), the manager journals its tasks in the same file. At
construction it reads the journal back: finished tasks answer ``get_task`` again (within
``max_finished_retained``), their retained events answer ``get_task_events``, and each
task journalled as ``running`` — the process died under it — becomes ``failed`` with
``error_code="INTERRUPTED"``, ``recoverable=True``, and a ``task_failed`` event with the
task's next ``seq`` goes out before anything new. A shutdown through :meth:`aclose`
journals nothing for the tasks it cancels, so they too are reported ``INTERRUPTED`` by the
next start (nobody had asked for their cancellation).

Task ownership (contract §13): a task belongs to the :class:`Principal` whose request
started it (:func:`current_principal` at :meth:`TaskManager.start`: the access token's
client, issuer and subject; :data:`ANONYMOUS` without authentication), whichever face the
request came through. The manager's read and drive methods take the asking principal as
``caller=`` (the task tools pass the request's): another principal's task is answered as
an unknown id (None), and ``list`` leaves it out. The client ids in
``TaskManager(task_admins=...)`` see and drive every task. ``caller=None`` is the server's
own code, which sees every task. The owner is journalled with the task, so it holds after
a restart with an outbox.

Nothing here imports ``mcp``; logging goes to the stdlib logger ``robot_mcp_kit.tasks`` as
event names with key-value fields (``trigger_ignored task_id='nav-1a2b3c' ...``).
"""

from __future__ import annotations

from robot_mcp_kit._principal import ANONYMOUS, Principal, current_principal
from robot_mcp_kit._task_context import TaskBody, TaskContext, TaskError
from robot_mcp_kit._task_journal import INTERRUPTED
from robot_mcp_kit._task_manager import (
    DEFAULT_CANCEL_GRACE_S,
    DEFAULT_INTERNAL_ERROR_DETAIL,
    DEFAULT_MAX_EVENTS_PER_TASK,
    DEFAULT_MAX_EVENTS_RETAINED,
    DEFAULT_MAX_FINISHED_RETAINED,
    EVENTS_PAGE_MAX,
    EventSink,
    InternalErrorDetail,
    TaskManager,
    new_task_id,
)
from robot_mcp_kit._triggers import (
    CONTRACT_TRIGGER_TYPES,
    GENERIC_TRIGGER_TYPES,
    MAX_TRIGGERS,
    MAX_TRIGGERS_JSON_BYTES,
    NumberField,
    TextField,
    TriggerField,
    TriggerType,
)

__all__ = [
    "ANONYMOUS",
    "CONTRACT_TRIGGER_TYPES",
    "DEFAULT_CANCEL_GRACE_S",
    "DEFAULT_INTERNAL_ERROR_DETAIL",
    "DEFAULT_MAX_EVENTS_PER_TASK",
    "DEFAULT_MAX_EVENTS_RETAINED",
    "DEFAULT_MAX_FINISHED_RETAINED",
    "EVENTS_PAGE_MAX",
    "GENERIC_TRIGGER_TYPES",
    "INTERRUPTED",
    "MAX_TRIGGERS",
    "MAX_TRIGGERS_JSON_BYTES",
    "EventSink",
    "InternalErrorDetail",
    "NumberField",
    "Principal",
    "TaskBody",
    "TaskContext",
    "TaskError",
    "TaskManager",
    "TextField",
    "TriggerField",
    "TriggerType",
    "current_principal",
    "new_task_id",
]
