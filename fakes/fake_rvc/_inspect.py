"""The inspection API under ``/api/fake/``: events, tasks, attempts, counters, waits, faults.

A bad query or body is answered 422 ``invalid_request`` (the app's handler); the shapes
are JSON views of the :class:`fake_rvc.Recorder`'s records.
"""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Query, Request
from fastapi.responses import JSONResponse, PlainTextResponse
from pydantic import BaseModel, Field

from fake_rvc._dependencies import ERROR_RESPONSE, RecorderDep, error_response
from fake_rvc._exceptions import FaultError, WaitTimeout
from fake_rvc._records import json_line
from robot_mcp_kit.log import get_logger
from robot_mcp_kit.receiver import Receiver

__all__ = ["EVENTS_JSONL_PATH", "INSPECT_PATH", "FaultRequest", "router"]

router = APIRouter()

_log = get_logger("fake_rvc")

EVENTS_JSONL_PATH = "/api/fake/events.jsonl"
"""The stored events as JSON lines: ``ReceivedEvent.to_dict()``, one per line."""

INSPECT_PATH = "/api/fake/inspect"
"""fake_rvc's inspection hook (docs/contract.md §5.5): ``?server=…&task_id=…``."""

EventTypeFilter = Annotated[
    str | None,
    Query(
        min_length=1,
        description="Only events of this type: a known one, or any other a post carried "
        "(an unknown type is acknowledged and stored, docs/contract.md §4.4).",
    ),
]
"""The ``type`` query filter: any non-empty string, the types the kit does not know too."""


class FaultRequest(BaseModel):
    """Body of ``POST /api/fake/faults``."""

    server: str = Field(min_length=1, max_length=200, description='Server name, or "*".')
    status: int | None = Field(default=None, ge=200, le=599)
    delay_s: float | None = Field(default=None, ge=0, le=3600)
    drop: bool = False
    count: int = Field(default=1, ge=1, le=1_000_000)
    task_id: str | None = Field(
        default=None,
        min_length=1,
        max_length=200,
        description="Only posts of this task (the body's task_id); every task when left out.",
    )
    retry_after_s: int | None = Field(
        default=None,
        ge=0,
        le=86400,
        description="With a status: send Retry-After with this many seconds.",
    )


@router.get("/api/fake/events", summary="Stored events, filtered", responses={422: ERROR_RESPONSE})
async def list_events(
    recorder: RecorderDep,
    server: str | None = None,
    task_id: str | None = None,
    type: EventTypeFilter = None,
) -> dict[str, Any]:
    events = recorder.events(server=server, task_id=task_id, type=type)
    return {"count": len(events), "events": [e.to_dict() for e in events]}


@router.get(
    EVENTS_JSONL_PATH,
    summary="Stored events as JSON lines (one received event per line), filtered",
    responses={422: ERROR_RESPONSE},
    response_class=PlainTextResponse,
)
async def export_events(
    recorder: RecorderDep,
    server: str | None = None,
    task_id: str | None = None,
    type: EventTypeFilter = None,
) -> PlainTextResponse:
    events = recorder.events(server=server, task_id=task_id, type=type)
    text = "".join(json_line(e) for e in events)
    return PlainTextResponse(text, media_type="application/x-ndjson")


@router.get("/api/fake/tasks", summary="Every task seen, with a summary")
async def list_tasks(recorder: RecorderDep) -> dict[str, Any]:
    tasks = [
        {
            "task_id": timeline.task_id,
            "server": timeline.server,
            "events": len(timeline.events),
            "terminal": None if timeline.terminal is None else timeline.terminal.type,
            "anomalies": len(timeline.anomalies) + timeline.anomalies_truncated,
        }
        for timeline in recorder.timelines()
    ]
    return {"tasks": tasks}


@router.get(
    "/api/fake/tasks/{task_id}",
    summary="One task's timeline with gaps, duplicates and anomalies",
    responses={404: ERROR_RESPONSE, 422: ERROR_RESPONSE},
)
async def get_task(task_id: str, recorder: RecorderDep, server: str | None = None) -> Any:
    timeline = recorder.timeline(task_id, server)
    if timeline is None:
        return error_response(404, "not_found", f"No event has named task {task_id[:100]!r}.")
    return timeline.to_dict()


@router.get(
    INSPECT_PATH,
    summary="The inspection hook of docs/contract.md §5.5: one task's processed events and gaps",
    responses={422: ERROR_RESPONSE},
)
async def inspect_task(
    recorder: RecorderDep,
    server: Annotated[str, Query(min_length=1)],
    task_id: Annotated[str, Query(min_length=1)],
) -> dict[str, Any]:
    timeline = recorder.timeline(task_id, server)
    if timeline is None:
        return {"server": server, "task_id": task_id, "events": [], "gaps": []}
    return timeline.inspection()


@router.post(
    "/api/fake/reconcile",
    summary="Ask each repair-mode server list_tasks now; the states it answers",
    responses={409: ERROR_RESPONSE},
)
async def reconcile(request: Request, recorder: RecorderDep) -> Any:
    receiver: Receiver = request.app.state.receiver
    if not request.app.state.repair_urls:
        return error_response(
            409,
            "not_configured",
            "fake_rvc knows no server's MCP URL to ask: start it with --repair "
            "name=http://host:port/sse (create_app(repair_urls=...)).",
        )
    listed: dict[str, int] = request.app.state.listed
    servers: dict[str, dict[str, Any]] = {}
    for name, report in (await receiver.reconcile()).items():
        if "error" in report:
            _log.warning("reconcile_failed", server=name, error=report["error"])
            servers[name] = {
                "error": "failed",
                "detail": f"list_tasks on {name!r} failed; the fake_rvc log says why.",
            }
        else:
            servers[name] = {"tasks": report["tasks"], "changed": listed.pop(name, 0)}
    return {"servers": servers, "states": [s.to_dict() for s in recorder.task_states()]}


@router.get("/api/fake/task-states", summary="Each task's state as its server last answered")
async def list_task_states(recorder: RecorderDep, server: str | None = None) -> dict[str, Any]:
    return {"states": [s.to_dict() for s in recorder.task_states(server)]}


@router.get("/api/fake/counters", summary="Counters")
async def get_counters(recorder: RecorderDep) -> dict[str, Any]:
    return recorder.counters()


@router.get(
    "/api/fake/attempts",
    summary="Every POST, with receive times and status",
    responses={422: ERROR_RESPONSE},
)
async def list_attempts(recorder: RecorderDep, server: str | None = None) -> dict[str, Any]:
    attempts = recorder.attempts(server)
    return {"count": len(attempts), "attempts": [a.to_dict() for a in attempts]}


@router.post("/api/fake/reset", summary="Forget events, attempts, counters and faults")
async def reset(request: Request, recorder: RecorderDep) -> dict[str, Any]:
    receiver: Receiver = request.app.state.receiver
    receiver.forget_everything()  # the same event_id is new again
    recorder.reset()
    return {"reset": True}


@router.get(
    "/api/fake/wait",
    summary="Long-poll until a task has an event of a type",
    responses={408: ERROR_RESPONSE, 422: ERROR_RESPONSE},
)
async def wait(
    recorder: RecorderDep,
    task_id: Annotated[str, Query(min_length=1)],
    type: EventTypeFilter = None,
    timeout_s: Annotated[float, Query(gt=0, le=300)] = 10.0,
    server: str | None = None,
) -> Any:
    try:
        found = await recorder.wait_for_event_async(task_id, type, timeout_s, server=server)
    except WaitTimeout as exc:
        return error_response(408, "timeout", str(exc))
    return found.to_dict()


@router.get("/api/fake/faults", summary="Pending injected faults")
async def list_faults(recorder: RecorderDep) -> dict[str, Any]:
    return {"faults": [f.to_dict() for f in recorder.faults()]}


@router.post(
    "/api/fake/faults",
    status_code=201,
    summary="Answer the next N posts from a server with a status, a delay or a drop",
    responses={422: ERROR_RESPONSE},
)
async def add_fault(spec: FaultRequest, recorder: RecorderDep) -> Any:
    try:
        fault = recorder.inject_fault(
            spec.server,
            status=spec.status,
            delay_s=spec.delay_s,
            drop=spec.drop,
            count=spec.count,
            task_id=spec.task_id,
            retry_after_s=spec.retry_after_s,
        )
    except FaultError as exc:
        return error_response(422, "invalid_fault", str(exc))
    return JSONResponse(
        {"fault": fault.to_dict(), "faults": [f.to_dict() for f in recorder.faults()]},
        status_code=201,
    )


@router.delete(
    "/api/fake/faults",
    summary="Remove pending faults (of one server, or all)",
    responses={422: ERROR_RESPONSE},
)
async def clear_faults(recorder: RecorderDep, server: str | None = None) -> dict[str, Any]:
    recorder.clear_faults(server)
    return {"faults": [f.to_dict() for f in recorder.faults()]}
