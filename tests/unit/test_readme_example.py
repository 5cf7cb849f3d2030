"""The README's "Use the kit in your own server" example is real code that works."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from mcp.shared.memory import create_connected_server_and_client_session

README = Path(__file__).resolve().parents[2] / "README.md"


def _kit_example() -> str:
    blocks = re.findall(r"```python\n(.*?)```", README.read_text(encoding="utf-8"), re.S)
    examples = [b for b in blocks if "register_task_tools" in b]
    assert len(examples) == 1, "README should hold exactly one kit example"
    return examples[0]


async def test_readme_kit_example_serves_its_tools(monkeypatch: pytest.MonkeyPatch) -> None:
    """Executed as written (poster in no-op mode), it serves navigate_to and the task tools."""
    monkeypatch.delenv("RVC_CALLBACK_URL", raising=False)
    namespace: dict[str, object] = {"__name__": "readme_example"}
    exec(compile(_kit_example(), str(README), "exec"), namespace)  # noqa: S102 - our own README
    server = namespace["mcp"]
    async with create_connected_server_and_client_session(server._mcp_server) as client:  # type: ignore[attr-defined]
        tools = {t.name: t for t in (await client.list_tools()).tools}
        started = await client.call_tool("navigate_to", {"place": "dock"})
    await namespace["manager"].aclose()  # type: ignore[attr-defined]
    assert {"navigate_to", "get_task", "cancel_task", "list_tasks"} <= set(tools)
    # The start tool answers the TaskInfo as an object (issue 12), not a JSON string.
    schema = tools["navigate_to"].outputSchema
    assert schema is not None
    assert schema["type"] == "object"
    assert "task_id" in schema["properties"]
    assert started.structuredContent is not None
    assert started.structuredContent["state"] == "running"
    assert json.loads(started.content[0].text) == started.structuredContent  # type: ignore[union-attr]
