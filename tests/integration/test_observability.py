"""Issue 21, end to end: real processes exporting OTLP/HTTP to a collector inside the test.

1. The sleeper over real SSE, posting to fake_rvc (uvicorn): a client's ``tools/call`` with a
   ``traceparent`` in ``params._meta`` is one trace through the SERVER span, the task's span,
   every CLIENT delivery attempt (one retried on an injected 503) and the ``traceparent``
   header fake_rvc recorded on each POST.
2. The memory server with a saved document and a robot token: no span, metric or resource
   attribute holds the document's text, a token, or more of a query than its bounded prefix.
"""

from __future__ import annotations

import importlib.util
import json
import sys
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType
from typing import Any

import anyio
import pytest
from mcp import ClientSession
from mcp.client.sse import sse_client

from fake_rvc import FakeRvcServer
from robot_mcp_kit.testing import ServiceProcess, free_port

pytestmark = pytest.mark.slow

HERE = Path(__file__).resolve().parent
SLEEPER_PATH = HERE.parents[1] / "examples" / "sleeper.py"
SECRET = "observability-secret"
TRACE_ID = "0af7651916cd43dd8448eb211c80319c"
CALLER_SPAN = "b7ad6b7169203331"
CALLER = f"00-{TRACE_ID}-{CALLER_SPAN}-01"


def _load_collector() -> ModuleType:
    spec = importlib.util.spec_from_file_location("otlp_collector", HERE / "_otlp_collector.py")
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules.setdefault("otlp_collector", module)
    spec.loader.exec_module(module)
    return module


otlp = _load_collector()


@pytest.fixture
def collector() -> Iterator[Any]:
    with otlp.CollectorServer() as received:
        yield received


async def call(session: ClientSession, tool: str, meta: dict[str, Any] | None = None, **args: Any):
    result = await session.call_tool(tool, args, meta=meta)
    assert not result.isError, result.content
    return json.loads(result.content[0].text)  # type: ignore[union-attr]


async def test_one_trace_from_the_tool_call_through_the_task_to_every_webhook(collector):
    """SERVER span (caller's parent), task span, CLIENT attempts, fake_rvc's traceparent."""
    with FakeRvcServer({"sleeper": SECRET}) as rvc:
        rvc.state.inject_fault("sleeper", status=503)  # the first POST is retried
        port = free_port()
        sleeper = ServiceProcess(
            "sleeper",
            [sys.executable, str(SLEEPER_PATH)],
            port,
            env={
                "MCP_TRANSPORT": "sse",
                "MCP_PORT": str(port),
                "RVC_CALLBACK_URL": rvc.events_url,
                "RVC_EVENT_SECRET": SECRET,
                **otlp.otel_env(collector, "sleeper"),
            },
        )
        try:
            sleeper.start(ready_timeout_s=30)
            url = f"http://127.0.0.1:{port}/sse"
            async with sse_client(url) as (read, write), ClientSession(read, write) as session:
                await session.initialize()
                info = await call(
                    session,
                    "sleep_task",
                    meta={"traceparent": CALLER, "tracestate": "planner=step-3"},
                    duration_s=0.3,
                    tick_s=0.1,
                )
                task_id = info["task_id"]
                await rvc.state.wait_for_event_async(task_id, "task_done", 20)
            posts = [a for a in rvc.state.attempts() if a.task_id == task_id]

            def all_attempts_exported(c: Any) -> bool:
                clients = [s for s in c.spans() if s.kind == "client"]
                return len(clients) >= len(posts) and any(
                    s.name == "task sleep_task" for s in c.spans()
                )

            collector.wait_for(all_attempts_exported)
        finally:
            sleeper.close()

    spans = collector.spans()
    (server,) = [s for s in spans if s.name == "tools/call sleep_task"]
    assert server.kind == "server"
    assert server.service == "sleeper"
    assert (server.trace_id, server.parent_span_id) == (TRACE_ID, CALLER_SPAN)
    assert server.attributes["mcp.method.name"] == "tools/call"
    assert server.attributes["gen_ai.tool.name"] == "sleep_task"
    assert server.attributes["jsonrpc.request.id"]
    assert server.attributes["mcp.session.id"]

    (task,) = [s for s in spans if s.name == "task sleep_task"]
    assert (task.trace_id, task.parent_span_id) == (TRACE_ID, server.span_id)
    assert task.attributes["robot_mcp.task.id"] == task_id
    assert task.attributes["robot_mcp.task.state"] == "succeeded"

    clients = [s for s in spans if s.kind == "client"]
    assert {s.trace_id for s in clients} == {TRACE_ID}
    assert {s.parent_span_id for s in clients} == {task.span_id}
    assert len(clients) == len(posts) >= 4  # progress ticks, the retried one, task_done
    (retried,) = [s for s in clients if s.attributes.get("http.response.status_code") == 503]
    assert retried.attributes["robot_mcp.delivery.attempt"] == 1
    assert retried.attributes["robot_mcp.delivery.outcome"] == "retry"
    assert retried.attributes["robot_mcp.delivery.retry_delay_s"] > 0

    by_span = {s.span_id: s for s in clients}
    for post in posts:
        assert post.traceparent is not None, post
        version, trace_id, span_id, flags = post.traceparent.split("-")
        assert (version, trace_id, flags) == ("00", TRACE_ID, "01")
        assert by_span[span_id].attributes["robot_mcp.event.seq"] == post.seq
        assert post.tracestate == "planner=step-3"
    stored = rvc.state.events(task_id=task_id)
    assert stored
    assert all(r.traceparent is not None and TRACE_ID in r.traceparent for r in stored)


ROBOT_TOKEN = "robot-token-rap-1-" + "s" * 16
BODY_MARKER = "Unlatch the red cabinet with code 7731 behind the vending machine"
QUERY_TAIL = "zebra-quartz-fjord"


def _document() -> str:
    return (
        "---\nid: cabinet-codes\ntitle: Fetch the parcel from the mailroom\nrobot: rap-1\n"
        f"source_mission_id: m-42\n---\n\n## Steps\n1. {BODY_MARKER}\n2. bring the parcel\n"
    )


def _every_value(collector: Any) -> list[str]:
    """Every attribute value the collector holds (spans, data points, resources), as text."""
    values: list[str] = []
    for attributes in [
        *(s.attributes for s in collector.spans()),
        *(p.attributes for p in collector.points()),
        *collector.resources(),
    ]:
        values.extend(json.dumps(v) for v in attributes.values())
        values.extend(attributes)
    values.extend(s.name for s in collector.spans())
    return values


@pytest.mark.parametrize("search", ["lexical", "hybrid"])
async def test_no_span_or_metric_holds_a_document_a_token_or_a_whole_query(
    collector, spawn, mcp_call, search
):
    """Ids, counts and modes only: the body, the tokens and a query's tail never leave."""
    server = spawn(
        transport="sse",
        env={
            "MEMORY_ROBOT_TOKENS": f"rap-1:{ROBOT_TOKEN}",
            "MEMORY_SEARCH": search,
            "MEMORY_TRACE_QUERY_CHARS": "12",
            **otlp.otel_env(collector, "robot-mcp-memory"),
        },
    )
    query = f"bring me the parcel from the mail room {QUERY_TAIL}"
    async with server.session(ROBOT_TOKEN) as robot:
        saved = await mcp_call(robot, "save_process", markdown=_document())
        assert saved["id"] == "cabinet-codes"
        found = await mcp_call(robot, "find_processes", query=query)
        assert found["processes"][0]["id"] == "cabinet-codes"
        assert BODY_MARKER in found["processes"][0]["markdown"]
        fetched = await mcp_call(robot, "get_process", id="cabinet-codes")
        assert BODY_MARKER in fetched["markdown"]
        outcome = await mcp_call(
            robot, "record_outcome", id="cabinet-codes", success=True, note=BODY_MARKER
        )
        assert outcome["success_count"] == 1, outcome

        def connected(c: Any) -> bool:  # while the robot's SSE stream is open
            return any(
                p.metric == "robot_mcp.memory.connections"
                and p.attributes == {"robot_mcp.robot": "rap-1"}
                for p in c.points()
            )

        await anyio.to_thread.run_sync(collector.wait_for, connected)

    def exported(c: Any) -> bool:
        names = {s.name for s in c.spans()}
        metrics = {p.metric for p in c.points()}
        return {
            "tools/call save_process",
            "tools/call find_processes",
            "tools/call get_process",
            "tools/call record_outcome",
            "memory.find",
            "memory.write",
            "store.flush",
        } <= names and {
            "mcp.server.operation.duration",
            "robot_mcp.memory.find.duration",
            "robot_mcp.store.hot_queue",
        } <= metrics

    collector.wait_for(exported)
    server.stop()

    # The attributes were recorded: what may be there is there.
    spans = collector.spans()
    (find,) = [s for s in spans if s.name == "tools/call find_processes"]
    assert find.attributes["robot_mcp.robot"] == "rap-1"
    assert find.attributes["robot_mcp.tenant"] == "robot:rap-1"
    assert find.attributes["robot_mcp.memory.query_prefix"] == query[:12]
    assert find.attributes["robot_mcp.memory.query_chars"] == len(query)
    assert find.attributes["robot_mcp.memory.results"] == 1
    (search_span,) = [s for s in spans if s.name == "memory.find"]
    assert search_span.parent_span_id == find.span_id
    assert search_span.attributes["robot_mcp.memory.search_mode"] == search
    if search == "hybrid":
        assert {"memory.search.lexical", "memory.search.vector", "memory.search.fusion"} <= {
            s.name for s in spans
        }
    writes = {s.attributes["robot_mcp.memory.write"]: s for s in spans if s.name == "memory.write"}
    assert writes["save"].attributes["robot_mcp.memory.id"] == "cabinet-codes"
    assert writes["save"].attributes["robot_mcp.memory.created"] is True
    assert writes["note"].attributes["robot_mcp.memory.id"] == "cabinet-codes"

    # ... and nothing that must not be is anywhere.
    text = "\n".join(_every_value(collector))
    for secret in (BODY_MARKER, "7731", "red cabinet", ROBOT_TOKEN, server.token, QUERY_TAIL):
        assert secret not in text, secret
    assert query[:13] not in text  # the prefix is bounded at 12 characters
