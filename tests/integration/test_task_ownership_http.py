"""Two authenticated principals over streamable HTTP on mcp 2.x (issue 32, finding 2).

``_owned_tasks_server.py`` runs where only the kit's wheel and mcp 2.x are installed, with
bearer tokens for ``alice``, ``bob`` and ``brain`` (a task admin), serving both task faces
over one manager. Alice starts one task through a plain ``tools/call`` (it waits for her
confirmation) and one as a native task. To Bob both are unknown ids on every tool of the
contract (``list_tasks`` omits them; ``get_task``, ``get_task_events``,
``answer_task_input``, ``cancel_task`` answer ``not_found`` exactly as for an id that never
existed) and on the native methods (``-32602``); nothing he sends reaches them. Alice still
drives both; the brain sees and cancels them. The requests are raw JSON-RPC on protocol
2026-07-28, as any host sends them.
"""

from __future__ import annotations

import itertools
import json
import time
from pathlib import Path
from typing import Any

import httpx
import pytest

from robot_mcp_kit.testing import free_port

pytestmark = [pytest.mark.slow, pytest.mark.timeout(300)]

SERVER = Path(__file__).with_name("_owned_tasks_server.py")
PROTOCOL = "2026-07-28"
TASKS = "io.modelcontextprotocol/tasks"
KIT_ID = "io.github.robot-mcp/task_id"
UNKNOWN = "owne-000000"


class Host:
    """One principal's JSON-RPC requests (its bearer token on each)."""

    _ids = itertools.count(1)

    def __init__(self, url: str, token: str) -> None:
        self.url = url
        self.token = token

    def rpc(self, method: str, params: dict[str, Any], *, tasks: bool = False) -> dict[str, Any]:
        """The JSON-RPC answer (``result`` or ``error``) to one request."""
        extensions = {TASKS: {}} if tasks else {}
        params = {
            **params,
            "_meta": {
                "io.modelcontextprotocol/protocolVersion": PROTOCOL,
                "io.modelcontextprotocol/clientCapabilities": {"extensions": extensions},
                "io.modelcontextprotocol/clientInfo": {"name": "host", "version": "1"},
            },
        }
        name = params.get("name") if method == "tools/call" else params.get("taskId")
        headers = {
            "Authorization": f"Bearer {self.token}",
            "Accept": "application/json, text/event-stream",
            "MCP-Protocol-Version": PROTOCOL,
            "Mcp-Method": method,
            "Mcp-Name": str(name),
        }
        body = {"jsonrpc": "2.0", "id": next(self._ids), "method": method, "params": params}
        response = httpx.post(self.url, json=body, headers=headers, timeout=30)
        answer: dict[str, Any] = response.json()
        # An error answer comes with HTTP 400 on the 2026-07-28 protocol.
        assert response.status_code == (400 if "error" in answer else 200), response.text
        return answer

    def tool(self, name: str, **arguments: Any) -> dict[str, Any]:
        """A contract tool's answer object (structured content)."""
        answer = self.rpc("tools/call", {"name": name, "arguments": arguments})
        result = answer["result"]
        assert not result.get("isError"), result
        structured: dict[str, Any] = result["structuredContent"]
        assert json.loads(result["content"][0]["text"]) == structured
        return structured


def wait_for(predicate: Any, what: str, timeout_s: float = 20) -> Any:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        found = predicate()
        if found:
            return found
        time.sleep(0.05)
    raise AssertionError(f"timed out waiting for {what}")


def test_another_principal_s_tasks_are_unknown_ids_on_every_face(
    kit_wheel: Path, uv_isolated_service: Any
) -> None:
    """Bob neither sees nor drives Alice's tasks; Alice and the brain still do."""
    port = free_port()
    server = uv_isolated_service(
        "owned-tasks server (mcp 2.x)",
        [str(kit_wheel), "mcp>=2.3,<3"],
        ["python", str(SERVER)],
        port,
        {"MCP_TRANSPORT": "streamable-http", "MCP_PORT": str(port), "PYTHONUNBUFFERED": "1"},
    )
    with server.start(ready_timeout_s=180):
        url = f"http://127.0.0.1:{port}/mcp"
        alice, bob, brain = (
            Host(url, "alice-token"),
            Host(url, "bob-token"),
            Host(url, "brain-token"),
        )
        no_token = httpx.post(url, json={"jsonrpc": "2.0", "id": 1, "method": "tools/list"})
        assert no_token.status_code == 401

        asks = alice.tool("sleep_task", duration_s=600, confirm=True)["task_id"]
        created = alice.rpc(
            "tools/call", {"name": "sleep_task", "arguments": {"duration_s": 600}}, tasks=True
        )["result"]
        assert created["resultType"] == "task", created
        native_id, runs = created["taskId"], created["_meta"][KIT_ID]
        request_id = wait_for(
            lambda: [
                e["payload"]["request_id"]
                for e in alice.tool("get_task_events", task_id=asks)["events"]
                if e["type"] == "input_required"
            ],
            "Alice's task to ask for input",
        )[0]

        # Bob: every tool answers as for an id that never existed.
        assert bob.tool("list_tasks") == {"tasks": []}
        assert bob.tool("list_tasks", states=["running"]) == {"tasks": []}
        for tool, args in (
            ("get_task", {}),
            ("get_task_events", {"after_seq": 0}),
            ("cancel_task", {}),
            (
                "answer_task_input",
                {"request_id": request_id, "action": "accept", "content": {"confirm": True}},
            ),
        ):
            for task_id in (asks, runs):
                theirs = bob.tool(tool, task_id=task_id, **args)
                never = bob.tool(tool, task_id=UNKNOWN, **args)
                assert theirs["error"] == never["error"] == "not_found", (tool, theirs)
                assert theirs["detail"] == never["detail"].replace(UNKNOWN, task_id), tool
                assert set(theirs) == {"error", "detail"}, theirs
        for method, extra in (
            ("tasks/get", {}),
            ("tasks/cancel", {}),
            ("tasks/update", {"inputResponses": {request_id: {"action": "cancel"}}}),
        ):
            refused = bob.rpc(method, {"taskId": native_id, **extra}, tasks=True)
            assert refused["error"]["code"] == -32602, (method, refused)

        # Nothing Bob sent reached them: both run, the question is still open.
        mine = {t["task_id"]: t["state"] for t in alice.tool("list_tasks")["tasks"]}
        assert mine == {asks: "running", runs: "running"}
        native = alice.rpc("tasks/get", {"taskId": native_id}, tasks=True)["result"]
        assert native["status"] == "working", native
        events = alice.tool("get_task_events", task_id=asks)["events"]
        assert [e["type"] for e in events] == ["input_required"]

        # Alice answers her own question; the brain (a task admin) sees and cancels both.
        answered = alice.tool(
            "answer_task_input",
            task_id=asks,
            request_id=request_id,
            action="accept",
            content={"confirm": True},
        )
        assert answered["task_id"] == asks
        seen = {t["task_id"] for t in brain.tool("list_tasks")["tasks"]}
        assert seen == {asks, runs}
        assert brain.tool("get_task_events", task_id=runs)["task_id"] == runs
        for task_id in (asks, runs):
            assert brain.tool("cancel_task", task_id=task_id)["state"] == "cancelled"
        native = alice.rpc("tasks/get", {"taskId": native_id}, tasks=True)["result"]
        assert native["status"] == "cancelled", native
        assert bob.tool("list_tasks", states=["cancelled"]) == {"tasks": []}
