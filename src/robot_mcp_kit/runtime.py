"""TaskRuntime: one way to build, start and close a server's poster and task manager.

::

    runtime = TaskRuntime("navigation", known_trigger_types=["eta_below"])
    register_task_tools(mcp, runtime.manager)   # at import: the tools need the manager

    async def main() -> None:
        async with runtime:                     # starts the poster
            await mcp.run_stdio_async()
        # here: running tasks were cancelled, then the poster's grace ran out

    runtime.run(main)                           # or asyncio.run(main()) yourself

Wrap the call that serves (``mcp.run_*_async()``, ``uvicorn.Server.serve()``), not a
framework's ``lifespan=``: some frameworks run a lifespan per session, and the runtime runs
once per process.

The order is the one the kit's contracts need: the poster is built before the manager (a
manager built on a poster with a durable outbox reads its task journal at construction);
on entry the poster starts (events a previous process left pending, and the
``INTERRUPTED`` reports of its running tasks, go out before anything new); on exit the
manager closes first (running tasks are cancelled while the poster still delivers), then
the poster (its close grace, then the outbox file).
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Collection, Mapping
from typing import Any, Generic, Protocol, TypeVar, overload, runtime_checkable

from robot_mcp_kit import _exceptions
from robot_mcp_kit.events import EventPoster
from robot_mcp_kit.tasks import EventSink, TaskManager, TriggerType

__all__ = ["RuntimeSink", "TaskRuntime"]


@runtime_checkable
class RuntimeSink(EventSink, Protocol):
    """An :class:`~robot_mcp_kit.tasks.EventSink` a runtime starts and closes.

    :class:`~robot_mcp_kit.events.EventPoster` and
    :class:`~robot_mcp_kit.testing.RecordingPoster` are ones.
    """

    async def start(self) -> None:
        """Start delivering (called on entry)."""
        ...

    async def aclose(self) -> None:
        """Deliver what is left within a grace, then stop (called on exit, last)."""
        ...


_Sink = TypeVar("_Sink", bound=RuntimeSink)


class TaskRuntime(Generic[_Sink]):
    """Builds a poster and a task manager, starts them, and closes them in order.

    Args:
        server_name: the server's name, for the poster and the manager.
        poster: the sink; by default an :class:`~robot_mcp_kit.events.EventPoster` for
            ``server_name`` configured from the environment (``RVC_CALLBACK_URL``,
            ``RVC_EVENT_SECRET``, ``RVC_OUTBOX``). Pass one to configure it yourself.
        known_trigger_types: the manager's (see :mod:`robot_mcp_kit.tasks`).
        task_admins: the OAuth client ids whose callers see and drive every task (the
            manager's ``task_admins``: the brain reconciling tasks a host started
            natively); every other authenticated caller sees only its own tasks.
        manager_options: further keyword arguments of
            :class:`~robot_mcp_kit.tasks.TaskManager` (``max_finished_retained``, ...).

    Raises:
        ConfigurationError: the poster's or the manager's configuration is invalid.
        OutboxLocked: the default poster's outbox file (``RVC_OUTBOX``) is held by another
            process.
        robot_mcp_kit.store.StoreError: that file cannot be opened (damaged, too new).

    All of them are :class:`~robot_mcp_kit.RobotMcpKitError` s with a one-line message:
    ``except RobotMcpKitError as exc: sys.exit(f"myserver: {exc}")`` around the
    construction is how ``examples/sleeper.py`` refuses to start without a traceback.

    Both are built here, so that tools can be registered on :attr:`manager` at import
    time; nothing runs until ``async with``. A runtime runs once: after its exit the
    manager is closed, and entering again raises
    :class:`~robot_mcp_kit.ManagerClosed`.
    """

    @overload
    def __init__(
        self: TaskRuntime[EventPoster],
        server_name: str,
        *,
        poster: None = None,
        known_trigger_types: Collection[str | TriggerType] | None = None,
        task_admins: Collection[str] = (),
        manager_options: Mapping[str, Any] | None = None,
    ) -> None: ...

    @overload
    def __init__(
        self,
        server_name: str,
        *,
        poster: _Sink,
        known_trigger_types: Collection[str | TriggerType] | None = None,
        task_admins: Collection[str] = (),
        manager_options: Mapping[str, Any] | None = None,
    ) -> None: ...

    def __init__(
        self,
        server_name: str,
        *,
        poster: Any = None,
        known_trigger_types: Collection[str | TriggerType] | None = None,
        task_admins: Collection[str] = (),
        manager_options: Mapping[str, Any] | None = None,
    ) -> None:
        self.server_name = server_name
        sink: Any = poster if poster is not None else EventPoster(server_name)
        self.poster: _Sink = sink
        try:
            self.manager = TaskManager(
                server_name,
                self.poster,
                known_trigger_types=known_trigger_types,
                task_admins=task_admins,
                **dict(manager_options or {}),
            )
        except BaseException:
            if poster is None:  # ours: do not leave its outbox file open
                sink.close_unstarted()
            raise
        self._entered = False

    def __repr__(self) -> str:
        return f"<TaskRuntime {self.server_name!r} {self.manager!r} {self.poster!r}>"

    async def __aenter__(self) -> TaskRuntime[_Sink]:
        """Start the poster; on a failure close both, then raise it."""
        if self._entered:
            raise _exceptions.ManagerClosed(
                f"TaskRuntime for {self.server_name!r} already ran; build a new one."
            )
        self._entered = True
        try:
            await self.poster.start()
        except BaseException:
            await self.aclose()
            raise
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.aclose()

    async def aclose(self) -> None:
        """Close the manager (cancel running tasks), then the poster. Idempotent.

        The poster is closed even when closing the manager raised.
        """
        try:
            await self.manager.aclose()
        finally:
            await self.poster.aclose()

    def run(self, main: Callable[[], Awaitable[None]]) -> None:
        """From a synchronous entry point: ``asyncio.run`` ``main()`` inside the runtime."""

        async def _main() -> None:
            async with self:
                await main()

        asyncio.run(_main())
