"""Repair mode: fill a ``seq`` gap through the server's ``get_task_events`` tool (issue 14).

Configured per server with the server's MCP URL (``create_app(repair_urls=...)``,
``fake-rvc --repair sleeper=http://127.0.0.1:9100/sse``). When an accepted event shows a
gap (seq 7 after seq 4), fake_rvc calls ``get_task_events(task_id, after_seq=4)`` on that
server in the background, pages while ``more`` is true, and stores each event that is
still missing as ``repaired`` (:meth:`Recorder.record_repaired`): it shows on the task's
timeline (``repaired_seqs``) and on the live page. The answer is trusted only as far as
the server it came from: an event naming another task or server is ignored.

The MCP transport follows the URL: a path ending in ``/sse`` is SSE, anything else
streamable HTTP. Each repair opens its own short session (gaps are rare).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections.abc import Mapping
from typing import Any

from fake_rvc._exceptions import RepairError
from fake_rvc._recorder import Recorder
from robot_mcp_kit import TASK_EVENTS_TOOL_NAME, TaskEvent
from robot_mcp_kit.log import get_logger

__all__ = ["GapRepairer", "open_transport"]

_log = get_logger("fake_rvc")

_MAX_PAGES = 50
_CALL_TIMEOUT_S = 30.0


class GapRepairer:
    """Runs the background repairs of one app. Use from the app's event loop only."""

    def __init__(self, urls: Mapping[str, str], recorder: Recorder) -> None:
        self.urls = dict(urls)
        self.recorder = recorder
        self._running: set[asyncio.Task[None]] = set()
        self.failures = 0

    def schedule(self, server: str, task_id: str, after_seq: int) -> bool:
        """Start repairing ``task_id`` after ``after_seq``; False if ``server`` has no URL."""
        url = self.urls.get(server)
        if url is None:
            return False
        task = asyncio.get_running_loop().create_task(
            self._repair(url, server, task_id, after_seq), name=f"fake_rvc repair {task_id}"
        )
        self._running.add(task)
        task.add_done_callback(self._running.discard)
        return True

    async def aclose(self) -> None:
        """Cancel the repairs still running."""
        for task in list(self._running):
            task.cancel()
        with contextlib.suppress(Exception):
            await asyncio.gather(*self._running, return_exceptions=True)

    async def _repair(self, url: str, server: str, task_id: str, after_seq: int) -> None:
        try:
            async with asyncio.timeout(_CALL_TIMEOUT_S):
                repaired = await self._fetch_and_record(url, server, task_id, after_seq)
        except asyncio.CancelledError:
            raise
        except Exception as exc:  # logged: a repair never breaks the app
            self.failures += 1
            _log.warning(
                "repair_failed",
                task_id=task_id,
                server=server,
                after_seq=after_seq,
                url=url,
                error=f"{type(exc).__name__}: {exc}",
            )
            return
        _log.info("repaired", task_id=task_id, server=server, seqs=repaired)

    async def _fetch_and_record(
        self, url: str, server: str, task_id: str, after_seq: int
    ) -> list[int]:
        from mcp import ClientSession

        repaired: list[int] = []
        async with contextlib.AsyncExitStack() as stack:
            streams = await stack.enter_async_context(open_transport(url))
            session = await stack.enter_async_context(ClientSession(streams[0], streams[1]))
            await session.initialize()
            cursor = after_seq
            for _ in range(_MAX_PAGES):
                result = await session.call_tool(
                    TASK_EVENTS_TOOL_NAME, {"task_id": task_id, "after_seq": cursor}
                )
                page = _page(result)
                events = page.get("events")
                if not isinstance(events, list) or not events:
                    break
                for raw in events:
                    event = TaskEvent.model_validate(raw)
                    if event.task_id != task_id or event.server != server:
                        continue
                    if self.recorder.record_repaired(event, server=server) is not None:
                        repaired.append(event.seq)
                    cursor = max(cursor, event.seq)
                timeline = self.recorder.timeline(task_id, server)
                missing = [] if timeline is None else timeline.missing_seqs
                if not page.get("more") or not any(s > cursor for s in missing):
                    break
        return repaired


def _page(result: Any) -> dict[str, Any]:
    """The tool's answer as a dict (structured content, else its JSON text)."""
    if getattr(result, "isError", False):
        raise RepairError("get_task_events answered an error")
    data = getattr(result, "structuredContent", None)
    if not isinstance(data, dict):
        data = json.loads(result.content[0].text)
    if not isinstance(data, dict) or "error" in data:
        raise RepairError(f"get_task_events answered {str(data)[:200]}")
    return data


def open_transport(url: str) -> Any:
    """The MCP client transport for ``url``: SSE when the path ends in ``/sse``, else
    streamable HTTP (an async context manager yielding the read and write streams)."""
    if url.rstrip("/").endswith("/sse"):
        from mcp.client.sse import sse_client

        return sse_client(url)
    import mcp.client.streamable_http as streamable

    if hasattr(streamable, "streamable_http_client"):
        return streamable.streamable_http_client(url)
    return streamable.streamablehttp_client(url)  # pragma: no cover - old mcp 1.x only
