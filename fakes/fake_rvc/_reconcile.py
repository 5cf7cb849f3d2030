"""Reconciliation: ask a server ``list_tasks`` and keep the states it answers (issue 19).

The receiver learns of a task from its events, and some tasks post none: one cancelled
before its first event never posts anything (a cancel emits no event, contract §7), and a
cancelled task's last event is a ``progress``. A brain learns those states the way the
contract says it must, by polling (``list_tasks``, kit spec §6.3: push is the
optimisation, poll is the truth). fake_rvc does the same for the servers it has an MCP URL
for (repair mode, ``create_app(repair_urls=...)``): ``POST /api/fake/reconcile`` polls
once, and ``create_app(reconcile_every_s=S)`` / ``fake-rvc --reconcile-every S`` polls in
the background. Each state goes to :meth:`fake_rvc.Recorder.record_task_states`, and so
to the live page, which then shows the task, events or not, with its state.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections.abc import Mapping
from typing import Any

from fake_rvc._exceptions import RepairError
from fake_rvc._recorder import Recorder
from fake_rvc._repair import open_transport
from robot_mcp_kit.log import get_logger

__all__ = ["Reconciler"]

_log = get_logger("fake_rvc")

_CALL_TIMEOUT_S = 15.0


class Reconciler:
    """Polls ``list_tasks`` on each configured server. Use from the app's event loop only.

    Args:
        urls: server name (``X-RVC-Server``) → that server's MCP URL (``/sse``: SSE,
            anything else streamable HTTP).
        recorder: where the answered states are stored.
    """

    def __init__(self, urls: Mapping[str, str], recorder: Recorder) -> None:
        self.urls = dict(urls)
        self.recorder = recorder
        self.failures = 0
        self._loop_task: asyncio.Task[None] | None = None

    def __repr__(self) -> str:
        return f"<Reconciler servers={sorted(self.urls)} failures={self.failures}>"

    async def reconcile(self) -> dict[str, dict[str, Any]]:
        """Poll every server once; return, per server, what came of it.

        ``{"tasks": N, "changed": M}`` when the server answered, ``{"error": "failed",
        "detail": ...}`` when it did not (the reason is in the ``reconcile_failed`` log
        line, never in the answer). Never raises for a server's failure.
        """
        names = sorted(self.urls)
        results = await asyncio.gather(*(self._poll(name) for name in names))
        return dict(zip(names, results, strict=True))

    async def _poll(self, server: str) -> dict[str, Any]:
        url = self.urls[server]
        try:
            async with asyncio.timeout(_CALL_TIMEOUT_S):
                tasks = await _list_tasks(url)
        except asyncio.CancelledError:
            raise
        except Exception as exc:  # logged: a poll never breaks the app
            self.failures += 1
            _log.warning(
                "reconcile_failed", server=server, url=url, error=f"{type(exc).__name__}: {exc}"
            )
            return {
                "error": "failed",
                "detail": f"list_tasks on {server!r} failed; the fake_rvc log says why.",
            }
        changed = self.recorder.record_task_states(server, tasks)
        return {"tasks": len(tasks), "changed": len(changed)}

    def start(self, interval_s: float) -> None:
        """Poll every ``interval_s`` seconds in the background until :meth:`aclose`."""
        if self._loop_task is None and self.urls:
            self._loop_task = asyncio.get_running_loop().create_task(
                self._every(interval_s), name="fake_rvc reconcile"
            )

    async def _every(self, interval_s: float) -> None:
        while True:
            await self.reconcile()
            await asyncio.sleep(interval_s)

    async def aclose(self) -> None:
        """Stop the background polling (idempotent)."""
        task, self._loop_task = self._loop_task, None
        if task is not None:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task


async def _list_tasks(url: str) -> list[dict[str, Any]]:
    """The TaskInfos ``list_tasks`` answers at ``url`` (one short MCP session)."""
    from mcp import ClientSession

    async with contextlib.AsyncExitStack() as stack:
        streams = await stack.enter_async_context(open_transport(url))
        session = await stack.enter_async_context(ClientSession(streams[0], streams[1]))
        await session.initialize()
        result: Any = await session.call_tool("list_tasks", {})
    if getattr(result, "isError", False):
        raise RepairError("list_tasks answered an error")
    data = getattr(result, "structuredContent", None)
    if not isinstance(data, dict):
        data = json.loads(result.content[0].text)
    tasks = data.get("tasks") if isinstance(data, dict) else None
    if not isinstance(tasks, list):
        raise RepairError(f"list_tasks answered {str(data)[:200]}")
    return [t for t in tasks if isinstance(t, dict)]
