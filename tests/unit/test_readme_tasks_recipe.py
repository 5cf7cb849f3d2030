"""The README's client recipe for the MCP tasks extension says what the code does.

The ``http`` block of "Serve the same tasks to hosts that speak the MCP tasks extension" is
a ``tasks/update`` request: its headers and ``_meta`` are the ones the suite's own client
(:class:`robot_mcp_conformance._native.NativeClient`) sends, its task id has the form
``NativeTasks`` hands out, and its ``inputResponses`` answers a real input request.
"""

from __future__ import annotations

import asyncio
import json
import re
from pathlib import Path
from typing import Any

import httpx
import pytest

from robot_mcp_conformance._native import NATIVE_PROTOCOL, TASKS_EXTENSION_ID, NativeClient
from robot_mcp_kit import NativeTasks, TaskContext, TaskManager
from robot_mcp_kit.testing import RecordingPoster

README = Path(__file__).resolve().parents[2] / "README.md"


def _recipe() -> tuple[dict[str, str], dict[str, Any]]:
    """The README's request: its headers and its JSON body."""
    blocks = re.findall(r"```http\n(.*?)```", README.read_text(encoding="utf-8"), re.S)
    (block,) = [b for b in blocks if "tasks/update" in b]
    head, body = block.split("\n\n", 1)
    headers = dict(line.split(": ", 1) for line in head.splitlines()[1:])
    return headers, json.loads(body)


def _sent_by_the_suite_client(monkeypatch: pytest.MonkeyPatch) -> tuple[dict[str, str], Any]:
    """What NativeClient puts on the wire for the same tasks/update (the HTTP post faked)."""
    seen: dict[str, Any] = {}

    def post(url: str, *, json: Any, headers: dict[str, str], timeout: float) -> httpx.Response:
        seen.update(headers=headers, body=json)
        answer = {"jsonrpc": "2.0", "id": json["id"], "result": {}}
        return httpx.Response(200, json=answer)

    monkeypatch.setattr(httpx, "post", post)
    _, body = _recipe()
    params = {k: v for k, v in body["params"].items() if k != "_meta"}
    assert NativeClient("http://127.0.0.1:1/mcp").request("tasks/update", params) == {}
    return seen["headers"], seen["body"]


def test_the_headers_and_meta_are_what_the_suite_client_sends(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    headers, body = _recipe()
    sent_headers, sent_body = _sent_by_the_suite_client(monkeypatch)
    assert headers == sent_headers
    assert headers["MCP-Protocol-Version"] == NATIVE_PROTOCOL
    assert headers["Mcp-Method"] == body["method"] == "tasks/update"
    assert headers["Mcp-Name"] == body["params"]["taskId"]
    meta = body["params"]["_meta"]
    assert set(meta) == set(sent_body["params"]["_meta"])
    assert meta["io.modelcontextprotocol/protocolVersion"] == NATIVE_PROTOCOL
    assert meta["io.modelcontextprotocol/clientCapabilities"] == {
        "extensions": {TASKS_EXTENSION_ID: {}}
    }


async def test_the_update_answers_a_real_input_request(
    manager: TaskManager, poster: RecordingPoster
) -> None:
    """The task id has NativeTasks' form, and ``inputResponses`` answers ``input-1``."""
    _, body = _recipe()
    native = NativeTasks(manager, id_secret=b"0123456789abcdef0123456789abcdef")

    async def asks(ctx: TaskContext) -> dict[str, Any]:
        answer = await ctx.request_input(
            "Move the arm to the shelf?",
            schema={"type": "object", "properties": {"confirm": {"type": "boolean"}}},
        )
        return {"action": answer.action, "content": answer.content}

    task_id = manager.start("navigate_to", asks).task_id
    native_id = native.native_id(task_id, "")
    shape = re.compile(r"[a-z]+-[0-9a-f]+\.[A-Za-z0-9_-]{22}")
    assert shape.fullmatch(native_id), native_id
    assert shape.fullmatch(body["params"]["taskId"])
    for _ in range(400):
        if native.get(native_id, "")["status"] == "input_required":
            break
        await asyncio.sleep(0.005)
    assert list(native.get(native_id, "")["inputRequests"]) == list(
        body["params"]["inputResponses"]
    )
    await native.update(native_id, "", body["params"]["inputResponses"])
    for _ in range(400):
        if native.get(native_id, "")["status"] == "completed":
            break
        await asyncio.sleep(0.005)
    result = native.get(native_id, "")["result"]["structuredContent"]
    assert result == {"action": "accept", "content": {"confirm": True}}
