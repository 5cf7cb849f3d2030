"""The README's "Use the kit in your own server" example is real code that works.

It is ``examples/navigation.py`` word for word, and the conformance commands both READMEs
give for it are the same text (``tests/integration/test_serve.py`` runs them;
``tests/frameworks/run.sh`` runs the example under the suite on all three frameworks).
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from mcp.shared.memory import create_connected_server_and_client_session

REPO = Path(__file__).resolve().parents[2]
README = REPO / "README.md"
NAVIGATION = REPO / "examples" / "navigation.py"
CONFORMANCE_README = REPO / "conformance" / "README.md"


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
    # The start tool answers the TaskInfo as an object (issue 12), not a JSON string, or
    # an error object (issue 32, finding 5).
    schema = tools["navigate_to"].outputSchema
    assert schema is not None
    assert schema["type"] == "object"
    info, error = schema["anyOf"]
    assert "task_id" in info["properties"]
    assert set(error["required"]) == {"error", "detail"}
    assert started.structuredContent is not None
    assert started.structuredContent["state"] == "running"
    assert json.loads(started.content[0].text) == started.structuredContent  # type: ignore[union-attr]


def test_the_readme_example_is_examples_navigation_py_word_for_word() -> None:
    """A reader copies the block; CI runs the file: they must be one text."""
    assert _kit_example() == NAVIGATION.read_text(encoding="utf-8")


def _suite_commands(text: str) -> list[str]:
    blocks = re.findall(r"```bash\n(.*?)```", text, re.S)
    return [b for b in blocks if "python navigation.py &" in b]


def test_both_readmes_give_the_same_suite_command_for_the_example() -> None:
    """The README and conformance/README.md start the example and run the suite alike."""
    (readme,) = _suite_commands(README.read_text(encoding="utf-8"))
    (conformance,) = _suite_commands(CONFORMANCE_README.read_text(encoding="utf-8"))
    assert readme == conformance
    for name in re.findall(r'"(\w+)":', readme):  # every argument is one navigate_to takes
        assert f"{name}: " in _kit_example(), name


BAD_STARTS = [
    # (arguments, what the detail must say): issue 32, finding 5.
    (
        {"place": "dock", "triggers": [{"type": "eta_below"}]},
        'trigger 0 (eta_below): "seconds" is missing; it must be a finite number > 0.',
    ),
    (
        {"place": "dock", "triggers": [{"type": "eta_below", "seconds": "10"}]},
        'trigger 0 (eta_below): "seconds" must be a finite number > 0, got "10" (a string).',
    ),
    (
        {
            "place": "dock",
            "triggers": [{"type": "x", "n": 1}, {"type": "eta_below", "seconds": -2}],
        },
        'trigger 1 (eta_below): "seconds" must be a finite number > 0, got -2 (an integer).',
    ),
    (
        {"place": "dock", "triggers": [{"type": "progress_above", "percent": 150}]},
        'trigger 0 (progress_above): "percent" must be a finite number >= 0 and <= 100, got '
        "150 (an integer).",
    ),
    (
        {"place": "dock", "triggers": [{"seconds": 10}]},
        'trigger 0 needs a "type", a non-empty string naming the condition; got none.',
    ),
    ({"place": "dock", "speed": 0}, "speed must be a number > 0, got 0.0."),
    ({"place": "dock", "speed": -1.5}, "speed must be a number > 0, got -1.5."),
]


@pytest.mark.parametrize(("arguments", "detail"), BAD_STARTS)
async def test_a_bad_start_answers_invalid_with_the_reason_and_starts_nothing(
    monkeypatch: pytest.MonkeyPatch, arguments: dict[str, object], detail: str
) -> None:
    """A malformed trigger or a bad speed: {"error": "invalid", "detail": <the field>} as
    structured content and text, no MCP error, and no task (issue 32, finding 5); an
    unknown trigger type still starts the task (ignored, contract §8.1)."""
    monkeypatch.delenv("RVC_CALLBACK_URL", raising=False)
    namespace: dict[str, object] = {"__name__": "readme_example"}
    exec(compile(_kit_example(), str(README), "exec"), namespace)  # noqa: S102 - our own README
    server, manager = namespace["mcp"], namespace["manager"]
    async with create_connected_server_and_client_session(server._mcp_server) as client:  # type: ignore[attr-defined]
        refused = await client.call_tool("navigate_to", arguments)
        listed = await client.call_tool("list_tasks", {})
        unknown = await client.call_tool(
            "navigate_to", {"place": "dock", "speed": 50, "triggers": [{"type": "x"}]}
        )
    await manager.aclose()  # type: ignore[attr-defined]
    assert not refused.isError
    assert refused.structuredContent == {"error": "invalid", "detail": detail}
    assert json.loads(refused.content[0].text) == refused.structuredContent  # type: ignore[union-attr]
    assert listed.structuredContent == {"tasks": []}
    assert unknown.structuredContent is not None
    assert unknown.structuredContent["state"] == "running"
