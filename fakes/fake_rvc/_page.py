"""The live page at ``/``: a static HTML file fed by server-sent events from the recorder."""

from __future__ import annotations

import asyncio
import importlib.resources
import json
from collections.abc import AsyncIterator
from typing import Any

from fastapi import APIRouter
from fastapi.responses import HTMLResponse, StreamingResponse

from fake_rvc._dependencies import RecorderDep
from fake_rvc._recorder import Recorder
from fake_rvc._records import Attempt

__all__ = ["feed", "router"]

router = APIRouter(include_in_schema=False)

_PAGE_POLICY = (
    "default-src 'none'; script-src 'unsafe-inline'; style-src 'unsafe-inline'; connect-src 'self'"
)


@router.get("/api/fake/stream")
async def stream(recorder: RecorderDep) -> StreamingResponse:
    return StreamingResponse(
        feed(recorder),
        media_type="text/event-stream",
        headers={"Cache-Control": "no-cache", "X-Accel-Buffering": "no"},
    )


@router.get("/")
async def page() -> HTMLResponse:
    html = importlib.resources.files("fake_rvc").joinpath("static/index.html").read_text()
    return HTMLResponse(html, headers={"Content-Security-Policy": _PAGE_POLICY})


def _sse(event: str, data: Any, event_id: int | None = None) -> str:
    head = f"id: {event_id}\n" if event_id is not None else ""
    return f"{head}event: {event}\ndata: {json.dumps(data, separators=(',', ':'))}\n\n"


async def feed(recorder: Recorder, heartbeat_s: float = 15.0) -> AsyncIterator[str]:
    """Server-sent events for the page: a reset, the backlog, then each change live.

    Changes are attempts (``attempt``) and, in repair mode, task states the servers
    answered ``list_tasks`` (``task_state``); ``counters`` follows each.
    """
    past, sub = recorder.subscribe()
    try:
        yield "retry: 1000\n\n"
        yield _sse("reset", {})
        for attempt in past:
            yield _sse("attempt", attempt.to_dict(), attempt.n)
        for state in recorder.task_states():
            yield _sse("task_state", state.to_dict())
        yield _sse("counters", recorder.counters())
        while True:
            try:
                item = await asyncio.wait_for(sub.queue.get(), heartbeat_s)
            except TimeoutError:
                yield ": ping\n\n"
                continue
            if item is None:
                return
            kind, live = item
            if live is None:
                yield _sse("reset", {})
            elif isinstance(live, Attempt):
                yield _sse("attempt", live.to_dict(), live.n)
            else:
                yield _sse(kind, live.to_dict())
            yield _sse("counters", recorder.counters())
    finally:
        recorder.unsubscribe(sub)
